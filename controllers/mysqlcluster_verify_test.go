package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

var verifyNow = time.Date(2026, 12, 2, 2, 0, 30, 0, time.UTC)

// verifiedCluster is cluster db with hourly verification, known since 01:00 (so that the
// 02:00 due time is run).
func verifiedCluster() *mysqlv1beta1.MySQLCluster {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-db", Generation: 1},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(1)), Backup: &mysqlv1beta1.BackupSpec{Suspend: true,
			Target:    completedBackup(mysqlv1beta1.BackupPhaseCompleted).Status.Target,
			Verify:    &mysqlv1beta1.BackupVerifySpec{Schedule: "0 * * * *"},
			Retention: mysqlv1beta1.BackupRetention{Count: new(int32(9))}}}}
	c.Status.Backup.Verification = &mysqlv1beta1.VerificationStatus{LastScheduleTime: &metav1.Time{Time: verifyNow.Add(-time.Hour)}}
	c.Default()
	return c
}

// dbBackup is a completed backup of cluster db.
func dbBackup() *mysqlv1beta1.MySQLBackup {
	b := completedBackup(mysqlv1beta1.BackupPhaseCompleted)
	b.Spec.Cluster = "db"
	return b
}

func verified(c *mysqlv1beta1.MySQLCluster) metav1.Condition {
	if got := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionBackupVerified); got != nil {
		return *got
	}
	return metav1.Condition{}
}

func TestAVerificationRestoresTheNewestBackupAndReportsWhatItFound(t *testing.T) {
	r, rec := fakeReconciler(t, verifiedCluster(), dbBackup())
	r.OperatorImage, r.Now = "op:1", func() time.Time { return verifyNow }
	c, res := reconcileCluster(t, r)

	// Due at 02:00: a Job restores backup nightly into a throwaway volume.
	name := resources.VerifyJobName(c, verifyNow.Truncate(time.Hour))
	job := &batchv1.Job{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, job))
	require.Equal(t, "nightly", job.Labels[resources.LabelBackup])
	require.Contains(t, job.Spec.Template.Spec.Containers[0].Command, "--key="+resources.RestoreKey(dbBackup()))
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			require.NotNil(t, v.EmptyDir, "nothing of the cluster is restored over")
		}
	}
	vs := c.Status.Backup.Verification
	require.NotNil(t, vs.Running)
	require.Equal(t, name, vs.Running.Job)
	require.True(t, vs.NextScheduled.Time.Equal(verifyNow.Truncate(time.Hour).Add(time.Hour)), "next %s", vs.NextScheduled)
	require.Equal(t, mysqlv1beta1.ReasonVerificationPending, verified(c).Reason)
	require.Equal(t, metav1.ConditionUnknown, verified(c).Status)
	require.Positive(t, res.RequeueAfter, "the next due time brings the next pass")

	// It ends well: recorded, with the tables it checked, and its Job cleared next pass.
	ok := string(backup.EncodeRestored(backup.Restored{Location: "s3://b/k", GTIDSet: "u:1-9", Tables: 2}, nil, ""))
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.Time{Time: verifyNow.Add(time.Minute)}}}
	require.NoError(t, r.Status().Update(context.Background(), job))
	require.NoError(t, r.Create(context.Background(), restorePod(job, ok)))
	c, _ = reconcileCluster(t, r)
	cond := verified(c)
	require.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	require.Equal(t, mysqlv1beta1.ReasonVerified, cond.Reason)
	require.Contains(t, cond.Message, "2 tables as recorded")
	last := c.Status.Backup.Verification.Last
	require.Equal(t, int32(2), last.Tables)
	require.Nil(t, c.Status.Backup.Verification.Running)
	require.True(t, c.Status.Backup.Verification.LastSucceeded.Equal(&metav1.Time{Time: verifyNow.Add(time.Minute)}))
	require.Contains(t, <-rec.Events, "Normal Verified")
	c, _ = reconcileCluster(t, r)
	err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &batchv1.Job{})
	require.True(t, apierrors.IsNotFound(err), "the recorded Job is deleted: %v", err)
	require.Equal(t, mysqlv1beta1.ReasonVerified, verified(c).Reason, "the outcome outlives its Job")

	// No verification asked for: no condition.
	c.Spec.Backup.Verify = nil
	require.NoError(t, r.Update(context.Background(), c))
	c, _ = reconcileCluster(t, r)
	require.Nil(t, meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionBackupVerified))
	require.Nil(t, c.Status.Backup.Verification)
}

func TestAFailedVerificationSaysWhy(t *testing.T) {
	c := verifiedCluster()
	b := dbBackup()
	job := resources.VerifyJob(resources.RestoreRun{Cluster: c, Backup: resources.SourceOfBackup(b), OperatorImage: "op:1"}, verifyNow.Add(-30*time.Second))
	job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, mysqlv1beta1.GroupVersion.WithKind("MySQLCluster"))}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}}
	corrupted := string(backup.EncodeRestored(backup.Restored{}, backup.Fail(mysqlv1beta1.ReasonBackupCorrupted,
		errStr("s3://b/k holds 10 bytes with SHA-256 aa; the backup is 1234 bytes with SHA-256 feed")), ""))
	c.Status.Backup.Verification.LastScheduleTime = &metav1.Time{Time: verifyNow.Truncate(time.Hour)}
	r, rec := fakeReconciler(t, c, b, job, restorePod(job, corrupted))
	r.OperatorImage, r.Now = "op:1", func() time.Time { return verifyNow }
	got, _ := reconcileCluster(t, r)
	cond := verified(got)
	require.Equal(t, metav1.ConditionFalse, cond.Status)
	require.Equal(t, mysqlv1beta1.ReasonBackupCorrupted, cond.Reason)
	require.Contains(t, cond.Message, "verification of MySQLBackup nightly failed: s3://b/k holds 10 bytes")
	require.Nil(t, got.Status.Backup.Verification.LastSucceeded)
	require.Contains(t, <-rec.Events, "Warning BackupCorrupted")
}

func TestAVerificationDueWithoutABackupSaysSo(t *testing.T) {
	r, _ := fakeReconciler(t, verifiedCluster())
	r.OperatorImage, r.Now = "op:1", func() time.Time { return verifyNow }
	c, _ := reconcileCluster(t, r)
	require.Equal(t, mysqlv1beta1.ReasonNoBackupToVerify, verified(c).Reason)
	jobs := &batchv1.JobList{}
	require.NoError(t, r.List(context.Background(), jobs))
	require.Empty(t, jobs.Items)
}
