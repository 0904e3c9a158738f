package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// restoreRecheck is how often a restore waiting for its backup looks again (the backup
// is another cluster's: its changes do not reach this cluster's queue).
const restoreRecheck = 10 * time.Second

// restoreState is what the restore step learned: the status to report, the Restored
// condition, and whether the instances must wait (the data is not in place yet).
type restoreState struct {
	status *mysqlv1beta1.RestoreStatus
	cond   metav1.Condition
	hold   bool
	// failed: the restore cannot go on as it is (the cluster is Failed).
	failed bool
}

// reconcileRestore fills the first instance's volume from spec.bootstrap.fromBackup
// before the StatefulSet exists: it makes the claim, runs the restore Job, and holds the
// later steps until the Job reports the data in place. Once the StatefulSet exists
// (or the status records the restore complete) it does nothing more.
func (r *MySQLClusterReconciler) reconcileRestore(ctx context.Context, st *state) error {
	c := st.cluster
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		return nil
	}
	old := c.Status.Restore.DeepCopy()
	if old == nil {
		old = &mysqlv1beta1.RestoreStatus{}
	}
	if f := c.Spec.Bootstrap.FromBackup; f.Name != "" {
		old.Backup = f.Name
	} else if f.Source.Backup != "" {
		old.Backup = f.Source.Backup
	}
	if old.CompletedAt != nil {
		st.restore = restoreDone(c, old)
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, &appsv1.StatefulSet{})
	if err == nil {
		// Created after a restore whose status write was lost: the data is in place.
		st.restore = restoreDone(c, old)
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("while reading the StatefulSet: %w", err)
	}
	rs, err := r.restore(ctx, c, old)
	if err != nil {
		return err
	}
	st.restore = rs
	r.announceRestore(c, rs)
	return nil
}

func restoreDone(c *mysqlv1beta1.MySQLCluster, s *mysqlv1beta1.RestoreStatus) *restoreState {
	msg := "restored from " + backupText(c, s.Backup)
	if s.CompletedAt != nil {
		msg += fmt.Sprintf(" (%s, %s) at %s", s.Method, s.Location, s.CompletedAt.UTC().Format(time.RFC3339))
	}
	return &restoreState{status: s, cond: restoredCondition(metav1.ConditionTrue, mysqlv1beta1.ReasonRestoreCompleted, msg)}
}

func restoredCondition(ok metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: mysqlv1beta1.ConditionRestored, Status: ok, Reason: reason, Message: msg}
}

// waiting holds the instances with the Restored condition False; failed says the
// restore cannot go on by itself.
func waiting(s *mysqlv1beta1.RestoreStatus, reason, msg string, failed bool) *restoreState {
	return &restoreState{status: s, cond: restoredCondition(metav1.ConditionFalse, reason, msg), hold: true, failed: failed}
}

// restore moves the restore one step: once its Job exists, read how it goes; before,
// find the backup and check it can be restored to the target, make the claim, start the
// Job.
func (r *MySQLClusterReconciler) restore(ctx context.Context, c *mysqlv1beta1.MySQLCluster, s *mysqlv1beta1.RestoreStatus) (*restoreState, error) {
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.RestoreJobName(c)}, job)
	if err == nil {
		s.Job = job.Name
		if s.StartedAt == nil {
			s.StartedAt = job.CreationTimestamp.DeepCopy()
		}
		return r.observeRestore(ctx, c, s, job)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("while reading the restore's Job: %w", err)
	}
	src, rs, err := r.restoreSource(ctx, c, s)
	if err != nil || rs != nil {
		return rs, err
	}
	s.Backup = src.Name
	if rs := unrecoverable(c, src, s); rs != nil {
		return rs, nil
	}
	s.Location, s.Method = src.Location, src.Method
	if r.OperatorImage == "" {
		return waiting(s, mysqlv1beta1.ReasonNoOperatorImage,
			"the operator does not know its own image, which restore pods run (set DOLPHIN_OPERATOR_IMAGE)", true), nil
	}
	if err := r.Create(ctx, resources.FirstDataClaim(c)); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("while creating the first instance's claim: %w", err)
	}
	job = resources.RestoreJob(resources.RestoreRun{Cluster: c, Backup: src, OperatorImage: r.OperatorImage, Images: r.Images})
	if _, err := r.applier().Apply(ctx, c, job); err != nil {
		return nil, fmt.Errorf("while creating the restore's Job: %w", err)
	}
	s.Job, s.StartedAt = job.Name, &metav1.Time{Time: r.now()}
	return waiting(s, mysqlv1beta1.ReasonRestoring, fmt.Sprintf("Job %s restores %s from %s", job.Name, src.Name, src.Location), false), nil
}

// unrestorable is why a backup cannot be restored (yet), or nil when it can.
func unrestorable(b *mysqlv1beta1.MySQLBackup, s *mysqlv1beta1.RestoreStatus) *restoreState {
	switch b.Status.Phase {
	case mysqlv1beta1.BackupPhaseCompleted:
	case mysqlv1beta1.BackupPhaseFailed:
		f := failedCondition(b)
		return waiting(s, mysqlv1beta1.ReasonBackupNotCompleted,
			fmt.Sprintf("MySQLBackup %s failed (%s: %s); a cluster is restored from a completed backup only", b.Name, f.Reason, f.Message), true)
	default:
		return waiting(s, mysqlv1beta1.ReasonBackupNotCompleted,
			fmt.Sprintf("waiting for MySQLBackup %s to complete (phase %q)", b.Name, b.Status.Phase), false)
	}
	if b.Status.Target == nil || b.Status.SHA256 == "" || b.Status.GTIDSet == "" || b.Status.Method == "" {
		return waiting(s, mysqlv1beta1.ReasonBackupNotCompleted,
			fmt.Sprintf("MySQLBackup %s completed but its status lacks its target, SHA-256, GTID set or method", b.Name), true)
	}
	return nil
}

// unrecoverable is why the cluster's recovery target cannot be reached from the backup,
// or nil (the restore Job checks the archive itself).
func unrecoverable(c *mysqlv1beta1.MySQLCluster, b resources.RestoreSource, s *mysqlv1beta1.RestoreStatus) *restoreState {
	if !resources.Recovers(c) {
		return nil
	}
	f := c.Spec.Bootstrap.FromBackup
	s.TargetTime, s.TargetGTID = f.TargetTime.DeepCopy(), f.TargetGTID
	what := backupText(c, b.Name)
	switch {
	case b.Target == nil || b.Target.S3 == nil:
		return waiting(s, mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Sprintf(
			"%s is stored on a volume: a recovery to a point in time needs a backup stored in S3, beside its cluster's binary log archive", what), true)
	case f.TargetGTID != "":
		if held, err := gtidHeld(b.GTIDSet, f.TargetGTID); err != nil || held {
			return waiting(s, mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Sprintf(
				"%s already holds transaction %s (and may hold later ones): choose a backup taken before it%s",
				what, f.TargetGTID, errSuffix(err)), true)
		}
	case b.CompletedAt == nil || f.TargetTime.Before(b.CompletedAt):
		return waiting(s, mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Sprintf(
			"%s completed at %s, after the target %s: choose a backup that completed before it", what,
			timeOrNone(b.CompletedAt), f.TargetTime.UTC().Format(time.RFC3339)), true)
	}
	return nil
}

// backupText names the backup the cluster restores, as messages do.
func backupText(c *mysqlv1beta1.MySQLCluster, name string) string {
	if src := c.Spec.Bootstrap.FromBackup.Source; src != nil {
		return fmt.Sprintf("stored backup %s of cluster %s", name, src.Cluster)
	}
	return "MySQLBackup " + name
}

// gtidHeld says whether the GTID set holds the transaction.
func gtidHeld(set, transaction string) (bool, error) {
	s, err := gtid.Parse(set)
	if err != nil {
		return false, fmt.Errorf("the backup's GTID set: %w", err)
	}
	t, err := gtid.Parse(transaction)
	if err != nil {
		return false, fmt.Errorf("the target: %w", err)
	}
	return s.Contains(t), nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

func timeOrNone(t *metav1.Time) string {
	if t == nil {
		return "(unknown)"
	}
	return t.UTC().Format(time.RFC3339)
}

// observeRestore reads the restore Job's end and its pod's report.
func (r *MySQLClusterReconciler) observeRestore(ctx context.Context, c *mysqlv1beta1.MySQLCluster, s *mysqlv1beta1.RestoreStatus, job *batchv1.Job) (*restoreState, error) {
	end := jobEnd(job)
	if end == nil {
		return waiting(s, mysqlv1beta1.ReasonRestoring, fmt.Sprintf("Job %s restores %s from %s", job.Name, s.Backup, s.Location), false), nil
	}
	res, err := jobReport(ctx, r.Client, job, resources.RestoreContainer)
	switch {
	case err == nil && res.Restored != nil && end.Type == batchv1.JobComplete:
		s.CompletedAt = &metav1.Time{Time: res.Restored.CompletedAt}
		s.GTIDSet = res.Restored.GTIDSet
		s.BinlogFiles = int32(res.Restored.BinlogFiles)
		return restoreDone(c, s), nil
	case err == nil && res.Reason != "":
		return waiting(s, res.Reason, res.Message+retryHint(job), true), nil
	case end.Reason == batchv1.JobReasonDeadlineExceeded:
		return waiting(s, mysqlv1beta1.ReasonDeadlineExceeded,
			fmt.Sprintf("not done within %s; its pod was stopped%s", resources.RestoreTimeout(c), retryHint(job)), true), nil
	case err != nil && !errors.Is(err, errNoReport):
		return nil, err
	}
	msg := end.Message
	if res.Message != "" {
		msg = res.Message
	}
	return waiting(s, mysqlv1beta1.ReasonRestorePodFailed,
		fmt.Sprintf("Job %s ended (%s) without a report: %s%s", job.Name, end.Reason, msg, retryHint(job)), true), nil
}

func retryHint(job *batchv1.Job) string {
	return fmt.Sprintf(" (delete Job %s to try again)", job.Name)
}

// announceRestore records the restore's steps as Events.
func (r *MySQLClusterReconciler) announceRestore(c *mysqlv1beta1.MySQLCluster, rs *restoreState) {
	if prev := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionRestored); prev != nil &&
		prev.Reason == rs.cond.Reason && prev.Status == rs.cond.Status {
		return
	}
	kind := corev1.EventTypeNormal
	if rs.failed {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(c, nil, kind, rs.cond.Reason, "Restore", "%s", rs.cond.Message)
}

// deleteUnusedRestoreClaim removes the claim a restore made when no StatefulSet ever
// took it over (a cluster deleted before its restore finished, with DeletionPolicy
// Delete); a StatefulSet's claims go by its own retention policy.
func (r *MySQLClusterReconciler) deleteUnusedRestoreClaim(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, &appsv1.StatefulSet{})
	if err == nil || !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	pvc := resources.FirstDataClaim(c)
	if err := r.Delete(ctx, pvc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("while deleting claim %s: %w", pvc.Name, err)
	}
	return nil
}
