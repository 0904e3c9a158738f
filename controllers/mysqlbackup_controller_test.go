package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

var backupNow = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

func backupReconciler(t *testing.T, objs ...client.Object) (*MySQLBackupReconciler, *events.FakeRecorder) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, mysqlv1beta1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&mysqlv1beta1.MySQLBackup{}).Build()
	rec := events.NewFakeRecorder(10)
	return &MySQLBackupReconciler{Client: c, Scheme: s, Recorder: rec, OperatorImage: "op:1",
		Now: func() time.Time { return backupNow }}, rec
}

func testBackup(created time.Time, phase mysqlv1beta1.BackupPhase) *mysqlv1beta1.MySQLBackup {
	return &mysqlv1beta1.MySQLBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: "ns", UID: "uid-b1", Generation: 1, CreationTimestamp: metav1.Time{Time: created}},
		Spec:       mysqlv1beta1.MySQLBackupSpec{Cluster: "db"},
		Status:     mysqlv1beta1.MySQLBackupStatus{Phase: phase},
	}
}

func testBackupCluster(target bool) *mysqlv1beta1.MySQLCluster {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	if target {
		c.Spec.Backup = &mysqlv1beta1.BackupSpec{Suspend: true, Target: &mysqlv1beta1.BackupTarget{
			S3: &mysqlv1beta1.S3Target{Bucket: "b", CredentialsSecret: corev1.LocalObjectReference{Name: "s"}}}}
	}
	return c
}

// endedJob is b's Job, ended with cond, and its pod with the backup container's message.
func endedJob(b *mysqlv1beta1.MySQLBackup, cond batchv1.JobConditionType, reason, message string) []client.Object {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupJobName(b), Namespace: b.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(b, mysqlv1beta1.GroupVersion.WithKind("MySQLBackup"))}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: reason}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: b.Namespace,
		Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.BackupContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message}}}}}}
	return []client.Object{job, pod}
}

func reconcileBackup(t *testing.T, r *MySQLBackupReconciler) (*mysqlv1beta1.MySQLBackup, ctrl.Result) {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b1"}})
	require.NoError(t, err)
	b := &mysqlv1beta1.MySQLBackup{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, b))
	return b, res
}

func failedReason(b *mysqlv1beta1.MySQLBackup) string {
	if c := meta.FindStatusCondition(b.Status.Conditions, mysqlv1beta1.BackupConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

func TestABackupThatCannotStartFailsAtOnceWithItsReason(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []client.Object
		reason  string
		noImage bool
	}{
		{name: "no cluster", reason: mysqlv1beta1.ReasonClusterNotFound},
		{name: "no target", objs: []client.Object{testBackupCluster(false)}, reason: mysqlv1beta1.ReasonNoBackupTarget},
		{name: "no operator image", objs: []client.Object{testBackupCluster(true)}, reason: mysqlv1beta1.ReasonNoOperatorImage, noImage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := backupReconciler(t, append(tc.objs, testBackup(backupNow, ""))...)
			if tc.noImage {
				r.OperatorImage = ""
			}
			b, _ := reconcileBackup(t, r)
			require.Equal(t, mysqlv1beta1.BackupPhaseFailed, b.Status.Phase)
			require.Equal(t, tc.reason, failedReason(b))
			require.NotNil(t, b.Status.CompletedAt)
			require.Contains(t, <-rec.Events, "Warning "+tc.reason)
		})
	}
}

func TestABackupWaitsForASourceUntilItsTimeout(t *testing.T) {
	r, _ := backupReconciler(t, testBackupCluster(true), testBackup(backupNow.Add(-time.Minute), ""))
	b, res := reconcileBackup(t, r)
	require.Equal(t, mysqlv1beta1.BackupPhasePending, b.Status.Phase)
	require.Equal(t, mysqlv1beta1.ReasonNoBackupSource, meta.FindStatusCondition(b.Status.Conditions, mysqlv1beta1.BackupConditionComplete).Reason)
	require.Equal(t, pendingRecheck, res.RequeueAfter)

	r, _ = backupReconciler(t, testBackupCluster(true), testBackup(backupNow.Add(-resources.DefaultBackupTimeout-time.Second), mysqlv1beta1.BackupPhasePending))
	b, _ = reconcileBackup(t, r)
	require.Equal(t, mysqlv1beta1.BackupPhaseFailed, b.Status.Phase)
	require.Equal(t, mysqlv1beta1.ReasonNoBackupSource, failedReason(b))
}

func TestABackupEndsAsItsJobAndItsPodsReportSay(t *testing.T) {
	m := backup.Manifest{Size: 1234, SHA256: "abc", GTIDSet: "u:1-5", BinlogFile: "binlog.000002", BinlogPosition: 99,
		MySQLVersion: "9.7.4", Location: "s3://b/k"}
	good := string(backup.EncodeResult(m, nil, ""))
	refused := string(backup.EncodeResult(backup.Manifest{}, backup.Fail(mysqlv1beta1.ReasonStorageAccessDenied,
		errStr("storing s3://b/k: AccessDenied")), ""))
	for _, tc := range []struct {
		name, jobReason, message, reason string
		cond                             batchv1.JobConditionType
		phase                            mysqlv1beta1.BackupPhase
	}{
		{name: "completed", cond: batchv1.JobComplete, message: good, phase: mysqlv1beta1.BackupPhaseCompleted},
		{name: "refused by the store", cond: batchv1.JobFailed, jobReason: batchv1.JobReasonBackoffLimitExceeded, message: refused,
			phase: mysqlv1beta1.BackupPhaseFailed, reason: mysqlv1beta1.ReasonStorageAccessDenied},
		{name: "stopped at its deadline", cond: batchv1.JobFailed, jobReason: batchv1.JobReasonDeadlineExceeded,
			phase: mysqlv1beta1.BackupPhaseFailed, reason: mysqlv1beta1.ReasonDeadlineExceeded},
		{name: "complete without a readable report", cond: batchv1.JobComplete, message: "{}",
			phase: mysqlv1beta1.BackupPhaseFailed, reason: mysqlv1beta1.ReasonBackupPodFailed},
		{name: "killed", cond: batchv1.JobFailed, jobReason: batchv1.JobReasonBackoffLimitExceeded, message: "",
			phase: mysqlv1beta1.BackupPhaseFailed, reason: mysqlv1beta1.ReasonBackupPodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBackup(backupNow.Add(-time.Minute), mysqlv1beta1.BackupPhaseRunning)
			r, _ := backupReconciler(t, append(endedJob(b, tc.cond, tc.jobReason, tc.message), testBackupCluster(true), b)...)
			got, _ := reconcileBackup(t, r)
			require.Equal(t, tc.phase, got.Status.Phase, "%v", got.Status.Conditions)
			require.Equal(t, tc.reason, failedReason(got))
			if tc.phase == mysqlv1beta1.BackupPhaseCompleted {
				require.Equal(t, int64(1234), got.Status.Size.Value())
				require.Equal(t, "abc", got.Status.SHA256)
				require.Equal(t, "u:1-5", got.Status.GTIDSet)
				require.Equal(t, "binlog.000002", got.Status.BinlogFile)
				require.EqualValues(t, 99, got.Status.BinlogPosition)
				require.Equal(t, "s3://b/k", got.Status.Location)
				require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, mysqlv1beta1.BackupConditionComplete))
			}
			// An ended backup stays as it is.
			again, _ := reconcileBackup(t, r)
			require.Equal(t, got.Status, again.Status)
		})
	}
}

func TestARunningBackupWhoseJobWasDeletedFails(t *testing.T) {
	r, _ := backupReconciler(t, testBackupCluster(true), testBackup(backupNow.Add(-time.Minute), mysqlv1beta1.BackupPhaseRunning))
	b, _ := reconcileBackup(t, r)
	require.Equal(t, mysqlv1beta1.BackupPhaseFailed, b.Status.Phase)
	require.Equal(t, mysqlv1beta1.ReasonBackupPodFailed, failedReason(b))
	require.True(t, strings.Contains(meta.FindStatusCondition(b.Status.Conditions, mysqlv1beta1.BackupConditionFailed).Message, "deleted"))
}

// The pass after the one that created the Job may read a cache without it: the API
// server, which has it, decides.
func TestARunningBackupWhoseJobTheCacheHasNotSeenYetRunsOn(t *testing.T) {
	b := testBackup(backupNow.Add(-time.Minute), mysqlv1beta1.BackupPhaseRunning)
	b.Status.Job = resources.BackupJobName(b)
	r, _ := backupReconciler(t, testBackupCluster(true), b)
	job := endedJob(b, batchv1.JobComplete, "", "")[0].(*batchv1.Job)
	job.Status.Conditions = nil
	live, _ := backupReconciler(t, job)
	r.APIReader = live.Client
	got, _ := reconcileBackup(t, r)
	require.Equal(t, mysqlv1beta1.BackupPhaseRunning, got.Status.Phase, "%v", got.Status.Conditions)
	require.Nil(t, meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.BackupConditionFailed))
}

type errStr string

func (e errStr) Error() string { return string(e) }

func TestABackupCompletedInS3KeepsItsDataUntilItIsDeleted(t *testing.T) {
	m := backup.Manifest{Size: 1, SHA256: "abc", GTIDSet: "u:1", Location: "s3://b/k"}
	b := testBackup(backupNow.Add(-time.Minute), mysqlv1beta1.BackupPhaseRunning)
	b.Status.Target = testBackupCluster(true).Spec.Backup.Target
	r, _ := backupReconciler(t, append(endedJob(b, batchv1.JobComplete, "", string(backup.EncodeResult(m, nil, ""))), b)...)
	got, _ := reconcileBackup(t, r)
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, got.Status.Phase)
	require.Contains(t, got.Finalizers, BackupDataFinalizer)

	// Its credentials Secret is gone: the data cannot be deleted, so the backup stays.
	require.NoError(t, r.Delete(context.Background(), got))
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(got)})
	require.ErrorContains(t, err, "credentials Secret s")
	require.NoError(t, r.Get(context.Background(), client.ObjectKeyFromObject(got), got))
	require.Contains(t, got.Finalizers, BackupDataFinalizer)
}

// A pass that learns nothing new writes nothing: a running backup whose Job has not ended.
func TestARunningBackupIsNotWrittenUntilSomethingChanges(t *testing.T) {
	b := testBackup(backupNow.Add(-time.Minute), mysqlv1beta1.BackupPhaseRunning)
	b.Status.ObservedGeneration, b.Status.Job = 1, resources.BackupJobName(b)
	job := endedJob(b, batchv1.JobComplete, "", "")[0].(*batchv1.Job)
	job.Status.Conditions = nil
	r, _ := backupReconciler(t, job, testBackupCluster(true), b)
	before := &mysqlv1beta1.MySQLBackup{}
	require.NoError(t, r.Get(context.Background(), client.ObjectKeyFromObject(b), before))
	after, _ := reconcileBackup(t, r)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "no write")
	require.Equal(t, mysqlv1beta1.BackupPhaseRunning, after.Status.Phase)
}

// instancePod is one of testBackupCluster's pods with role, ready or not.
func instancePod(name string, role resources.Role, ready bool) *corev1.Pod {
	labels := resources.SelectorLabels(testBackupCluster(true))
	labels[resources.LabelRole] = string(role)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

func TestABackupReadsAReplicaOnlyWhileReplicationIsHealthy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		healthy metav1.ConditionStatus
		pods    []client.Object
		want    string
	}{
		{name: "healthy: the last ready replica", healthy: metav1.ConditionTrue, want: "db-2",
			pods: []client.Object{instancePod("db-0", resources.RolePrimary, true), instancePod("db-1", resources.RoleReplica, true),
				instancePod("db-2", resources.RoleReplica, true)}},
		{name: "healthy, the replica not ready: the primary", healthy: metav1.ConditionTrue, want: "db-0",
			pods: []client.Object{instancePod("db-0", resources.RolePrimary, true), instancePod("db-1", resources.RoleReplica, false)}},
		{name: "replication broken: the primary", healthy: metav1.ConditionFalse, want: "db-0",
			pods: []client.Object{instancePod("db-0", resources.RolePrimary, true), instancePod("db-1", resources.RoleReplica, true)}},
		{name: "health unknown: the primary", healthy: metav1.ConditionUnknown, want: "db-0",
			pods: []client.Object{instancePod("db-0", resources.RolePrimary, true), instancePod("db-1", resources.RoleReplica, true)}},
		{name: "nothing ready: none", healthy: metav1.ConditionFalse,
			pods: []client.Object{instancePod("db-0", resources.RolePrimary, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testBackupCluster(true)
			c.Status.Conditions = []metav1.Condition{{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: tc.healthy, Reason: "X"}}
			r, _ := backupReconciler(t, tc.pods...)
			got, why, err := r.pickSource(context.Background(), c)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if tc.want == "" {
				require.Contains(t, why, "no instance of db is ready")
			}
		})
	}
}
