package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// indexReadTimeout bounds one read of an archive's index: a store that does not answer
// makes the condition say so, and holds the reconcile worker no longer than this.
const indexReadTimeout = 10 * time.Second

// Index reads are at most this often per cluster, and at least every archive timeout
// when that is shorter (never below the floor): the archiver's heartbeat is the index,
// and reading it on every pass would put one GET per pass on the store.
const (
	indexReadCeiling = time.Minute
	indexReadFloor   = 10 * time.Second
)

// archiveRead is one read of a cluster's archive index.
type archiveRead struct {
	at  time.Time
	ix  binlog.Index
	err error
}

// archiveReads remembers each cluster's last index read, and the retention record last
// written to its archive, between passes.
type archiveReads struct{ m, kept sync.Map }

func (a *archiveReads) get(uid types.UID) (archiveRead, bool) {
	v, ok := a.m.Load(uid)
	if !ok {
		return archiveRead{}, false
	}
	return v.(archiveRead), true
}

func (a *archiveReads) put(uid types.UID, r archiveRead) { a.m.Store(uid, r) }
func (a *archiveReads) forget(uid types.UID) {
	a.m.Delete(uid)
	a.kept.Delete(uid)
}

// written reports whether r is the record last written for the cluster.
func (a *archiveReads) written(uid types.UID, r binlog.Retention) bool {
	v, ok := a.kept.Load(uid)
	return ok && v.(binlog.Retention) == r
}

// archiveObservation is what a pass knows of the cluster's binary log archive.
type archiveObservation struct {
	// blocked is the reason the archiver cannot run (NoOperatorImage), with message.
	blocked, blockedMsg string
	read                archiveRead
	timeout             time.Duration
	// window is what recoveries can reach; ok is false when no backup is continued.
	window    binlog.Window
	windowOK  bool
	windowErr error
	// nextRead is when the index is read again.
	nextRead time.Time
}

// reconcileArchive runs the cluster's archiver when spec.backup.binlogArchive asks for
// one (and deletes it otherwise), and reads the archive's index for the status.
func (r *MySQLClusterReconciler) reconcileArchive(ctx context.Context, st *state) error {
	c := st.cluster
	desired := resources.BinlogArchiver(c, r.OperatorImage, r.Images, st.credentials)
	gone := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.BinlogArchiverName(c)}}
	if desired == nil {
		r.archives.forget(c.UID)
		return r.applyOrDelete(ctx, st, nil, gone)
	}
	obs := &archiveObservation{timeout: resources.ArchiveTimeout(c).Duration}
	st.archive = obs
	if r.OperatorImage == "" {
		obs.blocked = mysqlv1beta1.ReasonNoOperatorImage
		obs.blockedMsg = "the operator does not know its own image, which the archiver runs (set DOLPHIN_OPERATOR_IMAGE)"
		return r.applyOrDelete(ctx, st, nil, gone)
	}
	if err := r.applyOrDelete(ctx, st, desired, nil); err != nil {
		return err
	}
	every := min(max(obs.timeout, indexReadFloor), indexReadCeiling)
	read, ok := r.archives.get(c.UID)
	if !ok || r.now().Sub(read.at) >= every {
		read = r.readArchiveIndex(ctx, c)
		r.archives.put(c.UID, read)
	}
	obs.read = read
	obs.nextRead = read.at.Add(every)
	if read.err == nil {
		obs.window, obs.windowOK, obs.windowErr = read.ix.Recoverable(recoveryBases(st.backups))
		r.keepArchive(ctx, st)
	}
	return nil
}

// keepArchive writes the archive's retention record when the oldest backup that
// retention keeps has changed: the archiver then prunes what that backup holds. A
// failed write is retried on a later pass; until then the archive only keeps more.
func (r *MySQLClusterReconciler) keepArchive(ctx context.Context, st *state) {
	c := st.cluster
	keep, ok := keptFrom(st.backups, expired(st.backups, c.Spec.Backup.Retention, r.now()))
	if !ok || r.archives.written(c.UID, keep) {
		return
	}
	err := func() error {
		t := c.Spec.Backup.Target.S3
		store, err := openStore(ctx, r, c.Namespace, t)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, indexReadTimeout)
		defer cancel()
		_, err = store.Put(wctx, binlog.RetentionKey(resources.BinlogPrefix(c, t)), bytes.NewReader(keep.Encode()))
		return err
	}()
	if err != nil {
		logf.FromContext(ctx).Info("Could not write the binary log archive's retention record; retrying later", "error", err.Error())
		return
	}
	r.archives.kept.Store(c.UID, keep)
}

// keptFrom is the retention record for backups: the oldest completed one that is not
// expired; false when there is none (the archive keeps everything).
func keptFrom(backups []mysqlv1beta1.MySQLBackup, expiredNames []string) (binlog.Retention, bool) {
	var keep binlog.Retention
	found := false
	for _, b := range recoveryBases(backups) {
		if slices.Contains(expiredNames, b.Name) {
			continue
		}
		if !found || b.CompletedAt.Before(keep.CompletedAt) {
			keep, found = binlog.Retention{Version: binlog.RetentionVersion, Backup: b.Name, GTIDSet: b.GTIDSet, CompletedAt: b.CompletedAt.UTC()}, true
		}
	}
	return keep, found
}

// readArchiveIndex reads the index, bounded by indexReadTimeout.
func (r *MySQLClusterReconciler) readArchiveIndex(ctx context.Context, c *mysqlv1beta1.MySQLCluster) archiveRead {
	read := archiveRead{at: r.now()}
	t := c.Spec.Backup.Target.S3
	store, err := openStore(ctx, r, c.Namespace, t)
	if err != nil {
		read.err = fmt.Errorf("the backup target: %w", err)
		return read
	}
	rctx, cancel := context.WithTimeout(ctx, indexReadTimeout)
	defer cancel()
	read.ix, read.err = backup.ReadIndex(rctx, store, resources.BinlogPrefix(c, t))
	return read
}

// recoveryBases are the completed backups a recovery can start from.
func recoveryBases(backups []mysqlv1beta1.MySQLBackup) []binlog.Base {
	var bases []binlog.Base
	for _, b := range backups {
		if b.Status.Phase != mysqlv1beta1.BackupPhaseCompleted || b.Status.CompletedAt == nil || b.Status.GTIDSet == "" {
			continue
		}
		bases = append(bases, binlog.Base{Name: b.Name, GTIDSet: b.Status.GTIDSet, CompletedAt: b.Status.CompletedAt.Time})
	}
	return bases
}

// stalledAfter is how old the archiver's last complete round may be before the archive
// counts as stalled: two archive timeouts (one round may fail and be retried) and half a
// minute for the round's own work.
func stalledAfter(timeout time.Duration) time.Duration { return 2*timeout + 30*time.Second }

// setArchiving sets the BinlogArchiving condition from what the pass saw of the archive;
// without an archive the condition is absent.
func setArchiving(conds *[]metav1.Condition, obs *archiveObservation, gen int64) {
	if obs == nil {
		meta.RemoveStatusCondition(conds, mysqlv1beta1.ConditionBinlogArchiving)
		return
	}
	cond := metav1.Condition{Type: mysqlv1beta1.ConditionBinlogArchiving, ObservedGeneration: gen}
	set := func(ok metav1.ConditionStatus, reason, msg string) {
		cond.Status, cond.Reason, cond.Message = ok, reason, msg
	}
	ix := obs.read.ix
	switch {
	case obs.blocked != "":
		set(metav1.ConditionFalse, obs.blocked, obs.blockedMsg)
	case obs.read.err != nil:
		set(metav1.ConditionFalse, indexReadReason(obs.read.err), "reading the archive's index: "+obs.read.err.Error())
	case obs.windowErr != nil:
		set(metav1.ConditionFalse, mysqlv1beta1.ReasonArchiveIndexInvalid, obs.windowErr.Error())
	case ix.CheckedAt.IsZero():
		set(metav1.ConditionUnknown, mysqlv1beta1.ReasonArchivePending, "the archiver has not ended a round yet")
	case obs.read.at.Sub(ix.CheckedAt) > stalledAfter(obs.timeout):
		set(metav1.ConditionFalse, mysqlv1beta1.ReasonArchiveStalled, fmt.Sprintf(
			"the archiver last stored every closed binary log of the primary at %s, %s before the check (archive timeout %s)",
			ix.CheckedAt.UTC().Format(time.RFC3339), obs.read.at.Sub(ix.CheckedAt).Round(time.Second), obs.timeout))
	default:
		msg := fmt.Sprintf("every closed binary log of the primary was stored at %s", ix.CheckedAt.UTC().Format(time.RFC3339))
		if f, ok := ix.Newest(); ok {
			msg += "; newest file " + f.ServerUUID + "/" + f.Name
		}
		set(metav1.ConditionTrue, mysqlv1beta1.ReasonArchiving, msg)
	}
	meta.SetStatusCondition(conds, cond)
}

// indexReadReason is the condition's reason for a failed read of the index.
func indexReadReason(err error) string {
	switch {
	case errors.Is(err, binlog.ErrIndexInvalid):
		return mysqlv1beta1.ReasonArchiveIndexInvalid
	case apierrors.IsNotFound(err):
		return mysqlv1beta1.ReasonBackupTargetNotFound // a credentials or CA Secret
	default:
		return objectstore.Reason(err)
	}
}

// archiveStatus fills the archive's part of status.backup. What a failed read cannot
// tell is kept from the stored status: archived files stay archived.
func archiveStatus(bs *mysqlv1beta1.BackupStatus, old mysqlv1beta1.BackupStatus, obs *archiveObservation) {
	if obs == nil {
		return
	}
	if obs.blocked != "" || obs.read.err != nil || obs.windowErr != nil {
		bs.FirstRecoverableTime, bs.LastRecoverableTime = old.FirstRecoverableTime, old.LastRecoverableTime
		bs.LastArchivedBinlog = old.LastArchivedBinlog
		return
	}
	if f, ok := obs.read.ix.Newest(); ok {
		bs.LastArchivedBinlog = f.ServerUUID + "/" + f.Name
	}
	if obs.windowOK {
		bs.FirstRecoverableTime = &metav1.Time{Time: obs.window.First}
		bs.LastRecoverableTime = &metav1.Time{Time: obs.window.Last}
	}
}
