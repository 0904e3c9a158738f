package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// conditionAs waits for the cluster's condition of type kind to have status and reason.
func conditionAs(t *testing.T, c *mysqlv1beta1.MySQLCluster, kind string, status metav1.ConditionStatus, reason string, within time.Duration) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	got := &mysqlv1beta1.MySQLCluster{}
	took := waitFor(t, within, fmt.Sprintf("%s %s %s", kind, status, reason), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, kind)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
	t.Logf("%s %s %s after %s", kind, status, reason, took.Round(10*time.Millisecond))
	return got
}

// archiving waits for the cluster's BinlogArchiving condition to have status and reason.
func archiving(t *testing.T, c *mysqlv1beta1.MySQLCluster, status metav1.ConditionStatus, reason string, within time.Duration) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	return conditionAs(t, c, mysqlv1beta1.ConditionBinlogArchiving, status, reason, within)
}

// archivedSet is every transaction the archive's index says it holds.
func archivedSet(t *testing.T, ix binlog.Index) gtid.Set {
	all := gtid.Set{}
	for _, f := range ix.Files {
		s, err := gtid.Parse(f.GTIDSet)
		require.NoError(t, err)
		all = all.Union(s)
	}
	return all
}

// requireStoredAsIndexed checks that every file the index names is stored, as it says.
func requireStoredAsIndexed(t *testing.T, store *objectstore.Store, ix binlog.Index) {
	for _, f := range ix.Files {
		r, err := store.Get(context.Background(), f.Key)
		require.NoError(t, err, f.Key)
		raw, err := io.ReadAll(r)
		r.Close()
		require.NoError(t, err)
		sum := sha256.Sum256(raw)
		require.Equal(t, f.SHA256, hex.EncodeToString(sum[:]), f.Key)
		require.Equal(t, f.Size, int64(len(raw)), f.Key)
	}
}

// recovery is a one-instance cluster recovered from backup from to target.
func recovery(ns, name, from string, target time.Time) *mysqlv1beta1.MySQLCluster {
	c := newCluster(ns, name, mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Instances = new(int32(1))
	c.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: from,
		TargetTime: &metav1.Time{Time: target}}}
	return c
}

// requireRecovered waits for the recovered cluster to be Ready and checks it holds
// exactly the transactions and rows of its source at the target.
func requireRecovered(t *testing.T, c *mysqlv1beta1.MySQLCluster, target time.Time, atTarget string) *mysqlv1beta1.RestoreStatus {
	t.Helper()
	recovered := readyCluster(t, c.Namespace, c.Name)
	rs := recovered.Status.Restore
	require.NotNil(t, rs)
	require.True(t, rs.TargetTime.Time.Equal(target), "status.restore.targetTime %v", rs.TargetTime)
	require.Positive(t, rs.BinlogFiles)
	require.True(t, gtid.MustParse(atTarget).Equal(gtid.MustParse(rs.GTIDSet)), "restored %s, the source had %s at the target", rs.GTIDSet, atTarget)
	// The executed set first, as the operator's account: the tests' own account, made on
	// the first connection that needs it, would be one transaction more.
	admin, err := g.AccountDB(context.Background(), c.Namespace, c.Name, recovered.Status.CurrentPrimary,
		resources.AdminUser, resources.KeyAdminPassword)
	require.NoError(t, err)
	defer func() { _ = admin.Close() }()
	var executed string
	require.NoError(t, admin.QueryRowContext(context.Background(), "SELECT @@gtid_executed").Scan(&executed))
	require.True(t, gtid.MustParse(atTarget).Equal(gtid.MustParse(executed)), "executed %s, the source had %s at the target", executed, atTarget)
	rdb := dbOf(t, c.Namespace, recovered.Status.CurrentPrimary)
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, column(t, rdb, "SELECT id FROM shop.orders ORDER BY id"),
		"exactly the rows written before the target")
	return rs
}

// TestTheOperatorArchivesThePrimarysBinaryLogs runs a cluster with spec.backup.binlogArchive
// against the ground's S3 server: the operator's archiver pod stores every write, the
// status reports the window a backup and the archive reach, an unreachable store turns
// the condition False with the reason, new clusters recover to a point in time from the
// backup and the archive (one through the MySQLBackup, one in another namespace from the
// store alone), and removing the archive removes its pod.
func TestTheOperatorArchivesThePrimarysBinaryLogs(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	s3, store := startS3(t)
	var err error
	target := s3Target(t, ns, "s3", s3.Endpoint, s3.AccessKeyID, s3.SecretAccessKey)

	c := newCluster(ns, "arc", mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Instances = new(int32(2))
	c.Spec.Backup = &mysqlv1beta1.BackupSpec{Suspend: true, Target: target,
		BinlogArchive: &mysqlv1beta1.BinlogArchiveSpec{ArchiveTimeout: &metav1.Duration{Duration: 10 * time.Second}}}
	require.NoError(t, k8s.Create(ctx, c))
	readyCluster(t, ns, c.Name)
	primary := waitPrimary(t, ns, c.Name, c.Name+"-0").Status.CurrentPrimary
	db := dbOf(t, ns, primary)
	var before, after string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_executed").Scan(&before))
	for _, q := range []string{"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1), (2), (3)"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_executed").Scan(&after))
	written := gtid.MustParse(after).Subtract(gtid.MustParse(before))
	require.Equal(t, int64(3), written.Count())

	// Every write is archived within a few archive timeouts, and the condition says so.
	prefix := resources.BinlogPrefix(c, target.S3)
	var ix binlog.Index
	took := waitFor(t, 3*time.Minute, "the writes to be archived", func() error {
		if ix, err = backup.ReadIndex(ctx, store, prefix); err != nil {
			return err
		}
		if missing := written.Subtract(archivedSet(t, ix)); !missing.IsEmpty() {
			return fmt.Errorf("%s not archived yet (%d files)", missing, len(ix.Files))
		}
		return nil
	})
	t.Logf("3 writes archived %s after they were made", took.Round(10*time.Millisecond))
	requireStoredAsIndexed(t, store, ix)
	got := archiving(t, c, metav1.ConditionTrue, mysqlv1beta1.ReasonArchiving, time.Minute)
	require.NotEmpty(t, got.Status.Backup.LastArchivedBinlog)
	require.Nil(t, got.Status.Backup.FirstRecoverableTime, "no backup yet: nothing to recover from")

	// A backup is where recoveries start; the archive carries them past it.
	require.NoError(t, k8s.Create(ctx, newBackup(ns, "base", c.Name, target)))
	base := backupEnded(t, ns, "base")
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, base.Status.Phase, "%v", base.Status.Conditions)
	_, err = db.ExecContext(ctx, "INSERT INTO shop.orders VALUES (4)")
	require.NoError(t, err)
	waitFor(t, 3*time.Minute, "the window to start at the backup and reach past it", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		bs := got.Status.Backup
		if bs.FirstRecoverableTime == nil || bs.LastRecoverableTime == nil {
			return fmt.Errorf("no window yet: %+v", bs)
		}
		if !bs.FirstRecoverableTime.Equal(base.Status.CompletedAt) {
			return fmt.Errorf("the window starts at %s, the backup completed at %s", bs.FirstRecoverableTime, base.Status.CompletedAt)
		}
		if bs.LastRecoverableTime.Before(base.Status.CompletedAt) {
			return fmt.Errorf("the window ends at %s, before the backup", bs.LastRecoverableTime)
		}
		return nil
	})
	t.Logf("recoverable from %s to %s", got.Status.Backup.FirstRecoverableTime.UTC().Format(time.RFC3339),
		got.Status.Backup.LastRecoverableTime.UTC().Format(time.RFC3339))
	captureOperatorFixture(t, nil, "operator-archive", ns)

	// The archive keeps from the oldest backup retention keeps: the operator says which.
	waitFor(t, time.Minute, "the archive's retention record to name the backup", func() error {
		rc, err := store.Get(ctx, binlog.RetentionKey(prefix))
		if err != nil {
			return err
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		keep, ok, err := binlog.DecodeRetention(raw)
		if err != nil || !ok || keep.Backup != base.Name || keep.GTIDSet != base.Status.GTIDSet {
			return fmt.Errorf("record %+v: %w", keep, err)
		}
		return nil
	})

	// A recovery to a time T after the backup: the rows written before T, not a bad
	// DELETE after it. A target before the backup completed is refused at once.
	for _, q := range []string{"INSERT INTO shop.orders VALUES (5)", "INSERT INTO shop.orders VALUES (6)"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	var atTarget string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_executed").Scan(&atTarget))
	pointInTime := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(pointInTime))
	_, err = db.ExecContext(ctx, "DELETE FROM shop.orders WHERE id <= 2")
	require.NoError(t, err)
	waitFor(t, 3*time.Minute, "the archive to reach past the target", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		if l := got.Status.Backup.LastRecoverableTime; l == nil || l.Time.Before(pointInTime) {
			return fmt.Errorf("recoverable up to %v", l)
		}
		return nil
	})
	pitr := recovery(ns, "arc-pitr", base.Name, pointInTime)
	require.NoError(t, k8s.Create(ctx, pitr))
	// The same recovery in another namespace from the store alone, as after the loss of
	// the Kubernetes cluster that ran arc: no MySQLBackup there, the operator finds the
	// backup by the manifests stored beside the data.
	dr := namespace(t)
	fromStore := recovery(dr, "arc-dr", "", pointInTime)
	fromStore.Spec.Bootstrap.FromBackup.Source = &mysqlv1beta1.BackupSource{Cluster: c.Name, Namespace: ns,
		S3: *s3Target(t, dr, "s3", s3.Endpoint, s3.AccessKeyID, s3.SecretAccessKey).S3}
	require.NoError(t, k8s.Create(ctx, fromStore))
	// One naming a stored backup that is not there waits, saying where it looked.
	missing := recovery(dr, "arc-missing", "", pointInTime)
	missing.Spec.Bootstrap.FromBackup.Source = fromStore.Spec.Bootstrap.FromBackup.Source.DeepCopy()
	missing.Spec.Bootstrap.FromBackup.Source.Backup = "20000101T000000Z-none"
	require.NoError(t, k8s.Create(ctx, missing))
	waitFor(t, time.Minute, "the restore of arc-missing to report the backup missing", func() error {
		got := &mysqlv1beta1.MySQLCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(missing), got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionRestored)
		if cond == nil || cond.Reason != mysqlv1beta1.ReasonBackupNotFound ||
			!strings.Contains(cond.Message, "no complete backup 20000101T000000Z-none under s3://") {
			return fmt.Errorf("Restored %+v", cond)
		}
		return nil
	})
	for _, tc := range []struct {
		at   time.Time
		says string
	}{
		{base.Status.CompletedAt.Add(-time.Minute), "before MySQLBackup base completed"},
		{time.Now().Add(time.Hour), "outside the window MySQLCluster arc can recover to"},
	} {
		err := k8s.Create(ctx, recovery(ns, "arc-refused", base.Name, tc.at))
		require.ErrorContains(t, err, "spec.bootstrap.fromBackup.targetTime", "the webhook refuses a target out of reach")
		require.ErrorContains(t, err, tc.says)
	}
	requireRecovered(t, pitr, pointInTime, atTarget)
	rs := requireRecovered(t, fromStore, pointInTime, atTarget)
	require.Equal(t, path.Base(path.Dir(resources.RestoreKey(base))), rs.Backup, "the stored backup restored is base's")
	require.Equal(t, base.Status.Location, rs.Location)

	// The store gone: the operator cannot read the index and says why; back, it recovers.
	s3.Stop()
	got = archiving(t, c, metav1.ConditionFalse, mysqlv1beta1.ReasonStorageUnreachable, 2*time.Minute)
	require.NotNil(t, got.Status.Backup.FirstRecoverableTime, "what is archived stays reported while the store is away")
	require.NoError(t, s3.Start(ctx))
	archiving(t, c, metav1.ConditionTrue, mysqlv1beta1.ReasonArchiving, 2*time.Minute)

	// No archive asked for: no archiver, no condition.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Backup.BinlogArchive = nil
	require.NoError(t, k8s.Patch(ctx, c, patch))
	waitFor(t, time.Minute, "the archiver and its condition to go", func() error {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BinlogArchiverName(c)}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the archiver's Deployment: %w", err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionBinlogArchiving); cond != nil {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}
