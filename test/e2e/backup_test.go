package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
)

const bucket = "backups"

// s3Target is the ground's S3 server as a backup target, with a credentials Secret
// holding secret as the secret key.
func s3Target(t *testing.T, ns, name, endpoint, accessKey, secret string) *mysqlv1beta1.BackupTarget {
	rememberSecret(secret, "the S3 secret key of "+ns+"/"+name)
	require.NoError(t, k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: map[string]string{resources.KeyS3AccessKeyID: accessKey, resources.KeyS3SecretAccessKey: secret}}))
	return &mysqlv1beta1.BackupTarget{S3: &mysqlv1beta1.S3Target{Bucket: bucket, Prefix: "e2e", Endpoint: endpoint,
		ForcePathStyle: true, CredentialsSecret: corev1.LocalObjectReference{Name: name}}}
}

func newBackup(ns, name, cluster string, target *mysqlv1beta1.BackupTarget) *mysqlv1beta1.MySQLBackup {
	return &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: cluster, Target: target, Method: mysqlv1beta1.BackupMethodLogical}}
}

// backupEnded waits until the backup is Completed or Failed.
func backupEnded(t *testing.T, ns, name string) *mysqlv1beta1.MySQLBackup {
	t.Helper()
	b := &mysqlv1beta1.MySQLBackup{}
	took := waitFor(t, 3*time.Minute, "backup "+name+" to end", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return err
		}
		if b.Status.Phase != mysqlv1beta1.BackupPhaseCompleted && b.Status.Phase != mysqlv1beta1.BackupPhaseFailed {
			return fmt.Errorf("phase %q, conditions %v", b.Status.Phase, b.Status.Conditions)
		}
		return nil
	})
	t.Logf("backup %s %s after %s", name, b.Status.Phase, took.Round(10*time.Millisecond))
	return b
}

// startS3 starts the ground's S3 server for the test and creates the bucket; store is the
// test's own client of it. At the test's end the server runs until the test's namespaces
// are gone (their backups' finalizers delete stored objects), then stops.
func startS3(t *testing.T) (*ground.S3, *objectstore.Store) {
	t.Helper()
	s3, err := g.StartS3(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() {
		if !s3.Running() {
			if err := s3.Start(context.Background()); err != nil {
				t.Errorf("starting the S3 server again for the namespaces' deletion: %v", err)
			}
		}
		suite.DeleteNamespaces(t, k8s)
		s3.Stop()
	})
	store, err := s3.Store(bucket)
	require.NoError(t, err)
	require.NoError(t, store.CreateBucket(context.Background()))
	return s3, store
}

func TestBackupsAreWhatTheirStatusSays(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	s3, store := startS3(t)
	c, primary := readyPair(t, ns, "bk")
	db := dbOf(t, ns, primary)
	for _, q := range []string{"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, item VARCHAR(32))",
		"INSERT INTO shop.orders VALUES (1, 'first'), (2, 'second'), (3, 'third')"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	var want string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_executed").Scan(&want))
	replica := c.Name + "-1"
	waitFor(t, time.Minute, "the replica to apply the rows", func() error {
		var has bool
		if err := dbOf(t, ns, replica).QueryRowContext(ctx, "SELECT GTID_SUBSET(?, @@gtid_executed)", want).Scan(&has); err != nil || !has {
			return fmt.Errorf("not yet (%w)", err)
		}
		return nil
	})

	good := s3Target(t, ns, "s3-good", s3.Endpoint, s3.AccessKeyID, s3.SecretAccessKey)
	bad := s3Target(t, ns, "s3-bad", s3.Endpoint, s3.AccessKeyID, "not-the-secret")
	require.NoError(t, k8s.Create(ctx, newBackup(ns, "full", c.Name, good)))
	require.NoError(t, k8s.Create(ctx, newBackup(ns, "refused", c.Name, bad)))
	phys := newBackup(ns, "physical", c.Name, good)
	phys.Spec.Method = mysqlv1beta1.BackupMethodPhysical
	require.NoError(t, k8s.Create(ctx, phys))
	require.NoError(t, k8s.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dumps"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("100Mi")}}}}))
	b := backupEnded(t, ns, "full")
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, b.Status.Phase, "%v", b.Status.Conditions)
	require.Equal(t, replica, b.Status.Source, "a healthy cluster is backed up from a replica")
	require.Equal(t, mysqlv1beta1.BackupMethodLogical, b.Status.Method)
	require.Equal(t, strings.ReplaceAll(want, "\n", ""), b.Status.GTIDSet, "the backup holds every transaction written before it")
	require.True(t, strings.HasPrefix(b.Status.MySQLVersion, g.MySQLVersion), "%s", b.Status.MySQLVersion)
	require.NotEmpty(t, b.Status.BinlogFile)
	require.NotNil(t, b.Status.StartedAt)
	require.NotNil(t, b.Status.CompletedAt)
	require.True(t, meta.IsStatusConditionTrue(b.Status.Conditions, mysqlv1beta1.BackupConditionComplete))

	// The stored object is what the status says, and holds the rows.
	key := resources.BackupKey(b, good)
	require.Equal(t, "s3://"+bucket+"/"+key, b.Status.Location)
	r, err := store.Get(ctx, key)
	require.NoError(t, err)
	raw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), b.Status.SHA256)
	require.Equal(t, int64(len(raw)), b.Status.Size.Value())
	dec, err := zstd.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	defer dec.Close()
	dump, err := io.ReadAll(dec)
	require.NoError(t, err)
	require.Contains(t, string(dump), "INSERT INTO `orders` VALUES (1,'first'),(2,'second'),(3,'third');")

	// Physical: a copy of the replica's data, with the same GTID set, as a tar.
	p := backupEnded(t, ns, "physical")
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, p.Status.Phase, "%v", p.Status.Conditions)
	require.Equal(t, mysqlv1beta1.BackupMethodPhysical, p.Status.Method)
	require.Equal(t, replica, p.Status.Source)
	require.Equal(t, b.Status.GTIDSet, p.Status.GTIDSet)
	pkey := resources.BackupKey(p, good)
	require.True(t, strings.HasSuffix(pkey, "/data.tar.zst"), pkey)
	r, err = store.Get(ctx, pkey)
	require.NoError(t, err)
	praw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	psum := sha256.Sum256(praw)
	require.Equal(t, hex.EncodeToString(psum[:]), p.Status.SHA256)
	pdec, err := zstd.NewReader(bytes.NewReader(praw))
	require.NoError(t, err)
	defer pdec.Close()
	names := map[string]bool{}
	tr := tar.NewReader(pdec)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names[h.Name] = true
	}
	require.True(t, names["mysql.ibd"] && names["shop/orders.ibd"], "the copy holds the system tablespace and the table: %d files", len(names))

	// Restored into new clusters through the restore Job (while the test goes on): the
	// physical backup into two instances, the second cloned from the first; a copy of the
	// logical backup with a byte changed in the store is refused. (Each method's restore
	// gives back the same rows and GTID set in test/backup, against a real mysqld.)
	sums := tableSums(t, db)
	fromPhysical := startRestore(t, ns, "from-physical", p.Name, 2)
	require.NoError(t, k8s.Create(ctx, newBackup(ns, "tampered", c.Name, good)))
	tampered := backupEnded(t, ns, "tampered")
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, tampered.Status.Phase, "%v", tampered.Status.Conditions)
	tamper(t, store, tampered)
	fromTampered := startRestore(t, ns, "from-tampered", tampered.Name, 1)

	// On a volume: the same backup, as a file (taken after the first, which retention
	// below expects to be the oldest).
	onVolume := &mysqlv1beta1.BackupTarget{PVC: &mysqlv1beta1.PVCTarget{ClaimName: "dumps"}}
	require.NoError(t, k8s.Create(ctx, newBackup(ns, "on-volume", c.Name, onVolume)))
	v := backupEnded(t, ns, "on-volume")
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, v.Status.Phase, "%v", v.Status.Conditions)
	vkey := resources.BackupKey(v, onVolume)
	require.Equal(t, "pvc://dumps/"+vkey, v.Status.Location)
	dir, err := g.VolumePath(ctx, ns, "dumps")
	require.NoError(t, err)
	raw, err = os.ReadFile(filepath.Join(dir, vkey))
	require.NoError(t, err)
	sum = sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), v.Status.SHA256)
	require.Equal(t, b.Status.GTIDSet, v.Status.GTIDSet)

	// Wrong credentials: Failed, with the reason, and nothing of it stored.
	f := backupEnded(t, ns, "refused")
	require.Equal(t, mysqlv1beta1.BackupPhaseFailed, f.Status.Phase)
	failed := meta.FindStatusCondition(f.Status.Conditions, mysqlv1beta1.BackupConditionFailed)
	require.NotNil(t, failed)
	require.Equal(t, mysqlv1beta1.ReasonStorageAccessDenied, failed.Reason, failed.Message)
	listed, err := store.List(ctx, strings.TrimSuffix(resources.BackupKey(f, bad), "dump.sql.zst"))
	require.NoError(t, err)
	require.Empty(t, listed)

	requireRestored(t, fromPhysical, p, sums)
	requireRestoreRefused(t, fromTampered, mysqlv1beta1.ReasonBackupCorrupted)

	// The store gone: Failed, StorageUnreachable, within the backup's timeout.
	s3.Stop()
	down := newBackup(ns, "store-down", c.Name, good)
	down.Spec.Timeout = &metav1.Duration{Duration: 90 * time.Second}
	require.NoError(t, k8s.Create(ctx, down))
	d := backupEnded(t, ns, "store-down")
	require.Equal(t, mysqlv1beta1.BackupPhaseFailed, d.Status.Phase)
	failed = meta.FindStatusCondition(d.Status.Conditions, mysqlv1beta1.BackupConditionFailed)
	require.NotNil(t, failed)
	require.Equal(t, mysqlv1beta1.ReasonStorageUnreachable, failed.Reason, failed.Message)

	waitFor(t, time.Minute, "the cluster to report the failure", func() error {
		return lastBackup(ns, c.Name, metav1.ConditionFalse, mysqlv1beta1.ReasonStorageUnreachable)
	})

	// Scheduled every minute, keeping 2: the first scheduled backup completes, and the
	// oldest completed one (full) goes with its Job and its stored objects.
	require.NoError(t, s3.Start(ctx))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "* * * * *", Target: good,
		Retention: mysqlv1beta1.BackupRetention{Count: new(int32(2))}}
	require.NoError(t, k8s.Patch(ctx, c, patch)) // a patch: the operator writes the status meanwhile
	var scheduled *mysqlv1beta1.MySQLBackup
	waitFor(t, 150*time.Second, "a scheduled backup to complete", func() error {
		list := &mysqlv1beta1.MySQLBackupList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i, x := range list.Items {
			if _, ok := x.Annotations[resources.AnnotationScheduledAt]; ok && x.Status.Phase == mysqlv1beta1.BackupPhaseCompleted {
				scheduled = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("%d backups, none scheduled and completed", len(list.Items))
	})
	require.True(t, strings.HasPrefix(scheduled.Name, c.Name+"-"), scheduled.Name)
	// Which instance it read depends on the cluster's health at the minute it fired (a
	// replica while ReplicationHealthy is True, else the primary; both rules are checked
	// above and in the unit tests), so only that it read one of the cluster's.
	require.Contains(t, []string{c.Name + "-0", replica}, scheduled.Status.Source)
	waitFor(t, time.Minute, "retention to delete the oldest completed backup, its Job and its data", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &mysqlv1beta1.MySQLBackup{}); client.IgnoreNotFound(err) != nil || err == nil {
			return fmt.Errorf("backup full still there (%w)", err)
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupJobName(b)}, &batchv1.Job{}); err == nil {
			return errors.New("its Job still there")
		}
		listed, err := store.List(ctx, strings.TrimSuffix(key, "dump.sql.zst"))
		if err != nil || len(listed) > 0 {
			return fmt.Errorf("its objects: %v (%w)", listed, err)
		}
		return nil
	})
	for _, kept := range []string{scheduled.Name, "on-volume", "refused", "store-down"} {
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: kept}, &mysqlv1beta1.MySQLBackup{}), "%s is kept", kept)
	}
	listed, err = store.List(ctx, strings.TrimSuffix(resources.BackupKey(scheduled, good), "dump.sql.zst"))
	require.NoError(t, err)
	require.Len(t, listed, 2, "the scheduled backup's dump and manifest")
	waitFor(t, time.Minute, "the cluster to report the scheduled backup", func() error {
		if err := lastBackup(ns, c.Name, metav1.ConditionTrue, mysqlv1beta1.ReasonBackupCompleted); err != nil {
			return err
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if bs := c.Status.Backup; bs.LastSuccessful == nil || bs.LastFailure == nil || bs.NextScheduled == nil ||
			bs.LastSuccessful.Before(scheduled.Status.CompletedAt) {
			return fmt.Errorf("status.backup %+v", bs)
		}
		return nil
	})
	captureOperatorFixture(t, nil, "operator-backup", ns)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch = client.MergeFrom(c.DeepCopy())
	c.Spec.Backup.Suspend = true
	require.NoError(t, k8s.Patch(ctx, c, patch))
	require.NotNil(t, c.Status.Backup.LastScheduleTime)
}

// lastBackup checks the cluster's LastBackupSucceeded condition.
func lastBackup(ns, name string, status metav1.ConditionStatus, reason string) error {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return err
	}
	got := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionLastBackupSucceeded)
	if got == nil || got.Status != status || got.Reason != reason {
		return fmt.Errorf("LastBackupSucceeded %+v, want %s %s", got, status, reason)
	}
	return nil
}
