package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// restoringCluster is a new three-instance cluster restored from MySQLBackup "nightly".
func restoringCluster() *mysqlv1beta1.MySQLCluster {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-db", Generation: 1},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)),
			Bootstrap: &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: "nightly"}}}}
	c.Default()
	return c
}

// completedBackup is the backup "nightly" of another cluster, with what a restore reads.
func completedBackup(phase mysqlv1beta1.BackupPhase) *mysqlv1beta1.MySQLBackup {
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns",
		CreationTimestamp: metav1.Time{Time: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}},
		Spec:   mysqlv1beta1.MySQLBackupSpec{Cluster: "shop"},
		Status: mysqlv1beta1.MySQLBackupStatus{Phase: phase}}
	if phase == mysqlv1beta1.BackupPhaseCompleted {
		size := resource.MustParse("1234")
		b.Status.Size, b.Status.SHA256, b.Status.GTIDSet = &size, "feed", "u:1-9"
		b.Status.Method, b.Status.Location = mysqlv1beta1.BackupMethodPhysical, "s3://b/ns/shop/base/x/data.tar.zst"
		b.Status.CompletedAt = &metav1.Time{Time: time.Date(2026, 12, 1, 2, 5, 0, 0, time.UTC)}
		b.Status.Target = &mysqlv1beta1.BackupTarget{S3: &mysqlv1beta1.S3Target{Bucket: "b",
			CredentialsSecret: corev1.LocalObjectReference{Name: "s3"}}}
	}
	if phase == mysqlv1beta1.BackupPhaseFailed {
		b.Status.Conditions = []metav1.Condition{{Type: mysqlv1beta1.BackupConditionFailed, Status: metav1.ConditionTrue,
			Reason: mysqlv1beta1.ReasonStorageAccessDenied, Message: "AccessDenied"}}
	}
	return b
}

func reconcileCluster(t *testing.T, r *MySQLClusterReconciler) (*mysqlv1beta1.MySQLCluster, ctrl.Result) {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "db"}})
	require.NoError(t, err)
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c))
	return c, res
}

func restored(c *mysqlv1beta1.MySQLCluster) metav1.Condition {
	if got := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionRestored); got != nil {
		return *got
	}
	return metav1.Condition{}
}

func hasStatefulSet(t *testing.T, r *MySQLClusterReconciler) bool {
	err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, &appsv1.StatefulSet{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestARestoreWaitsForACompletedBackupAndStartsNoInstanceBefore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backup  *mysqlv1beta1.MySQLBackup
		reason  string
		requeue bool
		phase   mysqlv1beta1.ClusterPhase
	}{
		{name: "no such backup", reason: mysqlv1beta1.ReasonBackupNotFound, requeue: true, phase: mysqlv1beta1.PhaseProvisioning},
		{name: "backup running", backup: completedBackup(mysqlv1beta1.BackupPhaseRunning), reason: mysqlv1beta1.ReasonBackupNotCompleted,
			requeue: true, phase: mysqlv1beta1.PhaseProvisioning},
		{name: "backup failed", backup: completedBackup(mysqlv1beta1.BackupPhaseFailed), reason: mysqlv1beta1.ReasonBackupNotCompleted,
			phase: mysqlv1beta1.PhaseFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{restoringCluster()}
			if tc.backup != nil {
				objs = append(objs, tc.backup)
			}
			r, _ := fakeReconciler(t, objs...)
			r.OperatorImage = "op:1"
			c, res := reconcileCluster(t, r)
			got := restored(c)
			require.Equal(t, metav1.ConditionFalse, got.Status)
			require.Equal(t, tc.reason, got.Reason, got.Message)
			require.Equal(t, tc.requeue, res.RequeueAfter > 0, "%v", res)
			require.Equal(t, tc.phase, c.Status.Phase)
			require.False(t, meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady))
			require.False(t, hasStatefulSet(t, r), "no instance before the data is in place")
			err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: resources.RestoreJobName(c)}, &batchv1.Job{})
			require.True(t, apierrors.IsNotFound(err), "no Job: %v", err)
		})
	}
}

func TestARestoreRunsItsJobIntoTheFirstClaimThenCreatesTheInstances(t *testing.T) {
	r, rec := fakeReconciler(t, restoringCluster(), completedBackup(mysqlv1beta1.BackupPhaseCompleted))
	r.OperatorImage = "op:1"
	c, _ := reconcileCluster(t, r)
	require.Equal(t, mysqlv1beta1.ReasonRestoring, restored(c).Reason, restored(c).Message)
	require.True(t, meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionProgressing))
	require.False(t, hasStatefulSet(t, r))
	require.NotNil(t, c.Status.Restore)
	require.Equal(t, "nightly", c.Status.Restore.Backup)
	require.Equal(t, resources.RestoreJobName(c), c.Status.Restore.Job)
	require.NotNil(t, c.Status.Restore.StartedAt)
	require.Nil(t, c.Status.Restore.CompletedAt)
	require.Contains(t, <-rec.Events, "Normal Restoring")

	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "data-db-0"}, pvc))
	require.Equal(t, c.Spec.Storage.Size.String(), pvc.Spec.Resources.Requests.Storage().String())
	require.Empty(t, pvc.OwnerReferences, "the claim is the StatefulSet's to own, as its others")
	job := &batchv1.Job{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: resources.RestoreJobName(c)}, job))
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Command, " ")
	for _, want := range []string{"restore", "--sha256=feed", "--gtid-set=u:1-9", "--size=1234", "--method=Physical",
		"--key=ns/shop/base/20261201T020000Z-nightly/data.tar.zst", "--s3-bucket=b"} {
		require.Contains(t, args, want)
	}
	require.Equal(t, "data-db-0", job.Spec.Template.Spec.Volumes[3].PersistentVolumeClaim.ClaimName)

	// The Job's pod reports the data in place: the instances are created.
	done := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	require.NoError(t, r.Status().Update(context.Background(), job))
	require.NoError(t, r.Create(context.Background(), restorePod(job, string(backup.EncodeRestored(
		backup.Restored{GTIDSet: "u:1-9", CompletedAt: done}, nil, "")))))
	c, _ = reconcileCluster(t, r)
	got := restored(c)
	require.Equal(t, metav1.ConditionTrue, got.Status, got.Message)
	require.Equal(t, mysqlv1beta1.ReasonRestoreCompleted, got.Reason)
	require.Equal(t, "u:1-9", c.Status.Restore.GTIDSet)
	require.True(t, c.Status.Restore.CompletedAt.Time.Equal(done))
	require.True(t, hasStatefulSet(t, r), "the instances start on the restored data")

	// Later passes keep the record without reading the Job again.
	require.NoError(t, r.Delete(context.Background(), job))
	again, _ := reconcileCluster(t, r)
	require.Equal(t, c.Status.Restore, again.Status.Restore)
	require.Equal(t, metav1.ConditionTrue, restored(again).Status)
}

func restorePod(job *batchv1.Job, message string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: job.Namespace,
		Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.RestoreContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message}}}}}}
}

func TestAFailedRestoreSaysWhyAndStartsNoInstance(t *testing.T) {
	corrupted := string(backup.EncodeRestored(backup.Restored{}, backup.Fail(mysqlv1beta1.ReasonBackupCorrupted,
		errStr("s3://b/k holds 10 bytes with SHA-256 aa; the backup is 1234 bytes with SHA-256 feed")), ""))
	for _, tc := range []struct {
		name, jobReason, message, reason string
	}{
		{name: "corrupted", jobReason: batchv1.JobReasonBackoffLimitExceeded, message: corrupted, reason: mysqlv1beta1.ReasonBackupCorrupted},
		{name: "deadline", jobReason: batchv1.JobReasonDeadlineExceeded, reason: mysqlv1beta1.ReasonDeadlineExceeded},
		{name: "killed", jobReason: batchv1.JobReasonBackoffLimitExceeded, reason: mysqlv1beta1.ReasonRestorePodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := restoringCluster()
			job := resources.RestoreJob(resources.RestoreRun{Cluster: c, Backup: resources.SourceOfBackup(completedBackup(mysqlv1beta1.BackupPhaseCompleted)), OperatorImage: "op:1"})
			job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, mysqlv1beta1.GroupVersion.WithKind("MySQLCluster"))}
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: tc.jobReason}}
			r, rec := fakeReconciler(t, c, completedBackup(mysqlv1beta1.BackupPhaseCompleted), job, restorePod(job, tc.message))
			r.OperatorImage = "op:1"
			got, res := reconcileCluster(t, r)
			cond := restored(got)
			require.Equal(t, metav1.ConditionFalse, cond.Status)
			require.Equal(t, tc.reason, cond.Reason, cond.Message)
			require.Contains(t, cond.Message, "delete Job db-restore to try again")
			require.Equal(t, mysqlv1beta1.PhaseFailed, got.Status.Phase)
			require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, mysqlv1beta1.ConditionDegraded))
			require.Zero(t, res.RequeueAfter)
			require.False(t, hasStatefulSet(t, r))
			require.Contains(t, <-rec.Events, "Warning "+tc.reason)

			// Deleting the Job tries again.
			require.NoError(t, r.Delete(context.Background(), job))
			got, _ = reconcileCluster(t, r)
			require.Equal(t, mysqlv1beta1.ReasonRestoring, restored(got).Reason, restored(got).Message)
			require.Equal(t, mysqlv1beta1.PhaseProvisioning, got.Status.Phase)
			again := &batchv1.Job{}
			require.NoError(t, r.Get(context.Background(), client.ObjectKeyFromObject(job), again))
			require.Empty(t, again.Status.Conditions, "a new Job")
		})
	}
}

func TestARecoveryToATargetTheBackupCannotReachFailsAtOnce(t *testing.T) {
	completed := completedBackup(mysqlv1beta1.BackupPhaseCompleted).Status.CompletedAt.Time
	const uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	withGTIDs := completedBackup(mysqlv1beta1.BackupPhaseCompleted)
	withGTIDs.Status.GTIDSet = uuid + ":1-9"
	onVolume := completedBackup(mysqlv1beta1.BackupPhaseCompleted)
	onVolume.Status.Target = &mysqlv1beta1.BackupTarget{PVC: &mysqlv1beta1.PVCTarget{ClaimName: "nas"}}
	for _, tc := range []struct {
		name   string
		backup *mysqlv1beta1.MySQLBackup
		target time.Time
		gtid   string
		reason string
		msg    string
	}{
		{name: "a transaction after the backup", backup: withGTIDs, gtid: uuid + ":10", reason: mysqlv1beta1.ReasonRestoring},
		{name: "a transaction the backup holds", backup: withGTIDs, gtid: uuid + ":9",
			reason: mysqlv1beta1.ReasonTargetNotRecoverable, msg: "already holds transaction " + uuid + ":9"},
		{name: "reachable", backup: completedBackup(mysqlv1beta1.BackupPhaseCompleted), target: completed.Add(time.Hour),
			reason: mysqlv1beta1.ReasonRestoring},
		{name: "before the backup completed", backup: completedBackup(mysqlv1beta1.BackupPhaseCompleted), target: completed.Add(-time.Second),
			reason: mysqlv1beta1.ReasonTargetNotRecoverable, msg: "completed at 2026-12-01T02:05:00Z, after the target 2026-12-01T02:04:59Z"},
		{name: "a backup on a volume", backup: onVolume, target: completed.Add(time.Hour),
			reason: mysqlv1beta1.ReasonTargetNotRecoverable, msg: "needs a backup stored in S3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := restoringCluster()
			if tc.gtid != "" {
				c.Spec.Bootstrap.FromBackup.TargetGTID = tc.gtid
			} else {
				c.Spec.Bootstrap.FromBackup.TargetTime = &metav1.Time{Time: tc.target}
			}
			r, _ := fakeReconciler(t, c, tc.backup)
			r.OperatorImage = "op:1"
			got, _ := reconcileCluster(t, r)
			cond := restored(got)
			require.Equal(t, tc.reason, cond.Reason, cond.Message)
			require.Contains(t, cond.Message, tc.msg)
			require.NotNil(t, got.Status.Restore)
			require.True(t, got.Status.Restore.TargetTime.Equal(c.Spec.Bootstrap.FromBackup.TargetTime))
			require.Equal(t, tc.gtid, got.Status.Restore.TargetGTID)
			err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: resources.RestoreJobName(c)}, &batchv1.Job{})
			if tc.reason == mysqlv1beta1.ReasonRestoring {
				require.NoError(t, err)
				return
			}
			require.Equal(t, mysqlv1beta1.PhaseFailed, got.Status.Phase)
			require.True(t, apierrors.IsNotFound(err), "no Job: %v", err)
		})
	}
}

func TestARestoreNeedsTheOperatorsImage(t *testing.T) {
	r, _ := fakeReconciler(t, restoringCluster(), completedBackup(mysqlv1beta1.BackupPhaseCompleted))
	c, _ := reconcileCluster(t, r)
	require.Equal(t, mysqlv1beta1.ReasonNoOperatorImage, restored(c).Reason)
	require.False(t, hasStatefulSet(t, r))
}

func TestAClusterDeletedBeforeItsRestoreEndedTakesTheClaimWithIt(t *testing.T) {
	for _, policy := range []mysqlv1beta1.DeletionPolicy{mysqlv1beta1.DeletionPolicyDelete, mysqlv1beta1.DeletionPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) {
			c := restoringCluster()
			now := metav1.Now()
			c.Finalizers, c.DeletionTimestamp, c.Spec.DeletionPolicy = []string{mysqlv1beta1.ClusterFinalizer}, &now, policy
			r, _ := fakeReconciler(t, c, resources.FirstDataClaim(c))
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
			require.NoError(t, err)
			err = r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "data-db-0"}, &corev1.PersistentVolumeClaim{})
			if policy == mysqlv1beta1.DeletionPolicyDelete {
				require.True(t, apierrors.IsNotFound(err), "the claim no StatefulSet took goes: %v", err)
			} else {
				require.NoError(t, err, "Retain keeps it")
			}
		})
	}
}
