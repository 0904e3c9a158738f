package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// verifiedAs waits for the cluster's BackupVerified condition to have status and reason,
// and checks that the verification was of the backup named.
func verifiedAs(t *testing.T, c *mysqlv1beta1.MySQLCluster, status metav1.ConditionStatus, reason, backup string) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	got := conditionAs(t, c, mysqlv1beta1.ConditionBackupVerified, status, reason, 3*time.Minute)
	v := got.Status.Backup.Verification
	require.NotNil(t, v)
	require.NotNil(t, v.Last)
	require.Equal(t, backup, v.Last.Backup, v.Last.Message)
	return got
}

// TestVerificationRestoresTheNewestBackupAndCatchesACorruptedOne: every minute the
// operator restores the newest backup into a throwaway pod; a physical backup of known
// rows verifies with its tables checked, and the same backup with a byte changed in the
// store fails verification as BackupCorrupted.
func TestVerificationRestoresTheNewestBackupAndCatchesACorruptedOne(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	s3, store := startS3(t)
	target := s3Target(t, ns, "s3", s3.Endpoint, s3.AccessKeyID, s3.SecretAccessKey)

	c := newCluster(ns, "vfy", mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Instances = new(int32(1))
	c.Spec.Backup = &mysqlv1beta1.BackupSpec{Suspend: true, Target: target}
	require.NoError(t, k8s.Create(ctx, c))
	readyCluster(t, ns, c.Name)
	db := dbOf(t, ns, c.Name+"-0")
	for _, q := range []string{"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1), (2), (3)"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	b := newBackup(ns, "full", c.Name, nil)
	b.Spec.Method = mysqlv1beta1.BackupMethodPhysical
	require.NoError(t, k8s.Create(ctx, b))
	b = backupEnded(t, ns, b.Name)
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, b.Status.Phase, "%v", b.Status.Conditions)

	// Verified every minute from now on (a schedule runs from when it is first seen).
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Backup.Verify = &mysqlv1beta1.BackupVerifySpec{Schedule: "* * * * *"}
	require.NoError(t, k8s.Patch(ctx, c, patch))

	got := verifiedAs(t, c, metav1.ConditionTrue, mysqlv1beta1.ReasonVerified, b.Name)
	last := got.Status.Backup.Verification.Last
	require.GreaterOrEqual(t, last.Tables, int32(1), "the backup's tables were checked: %s", last.Message)
	require.NotNil(t, got.Status.Backup.Verification.LastSucceeded)

	tamper(t, store, b)
	got = verifiedAs(t, c, metav1.ConditionFalse, mysqlv1beta1.ReasonBackupCorrupted, b.Name)
	require.NotNil(t, got.Status.Backup.Verification.LastSucceeded, "when it last succeeded is kept")
	captureOperatorFixture(t, nil, "operator-verification", ns)
}
