package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func TestBackupMetricsFollowTheNewestBackups(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "metrics-db"}}
	l := prometheus.Labels{"namespace": "ns", "cluster": "metrics-db"}
	done := ended("b2", mysqlv1beta1.BackupPhaseCompleted, "2026-12-02T02:00:00Z")
	done.Status.StartedAt = &metav1.Time{Time: at("2026-12-02T01:59:10Z")}
	size := resource.MustParse("4096")
	done.Status.Size = &size
	older := ended("b1", mysqlv1beta1.BackupPhaseCompleted, "2026-12-01T02:00:00Z")
	failed := ended("b3", mysqlv1beta1.BackupPhaseFailed, "2026-12-02T03:00:00Z")
	recordBackupMetrics(c, []mysqlv1beta1.MySQLBackup{older, done, failed})

	require.Equal(t, float64(at("2026-12-02T02:00:00Z").Unix()), testutil.ToFloat64(metrics.BackupLastSuccess.With(l)))
	require.Equal(t, float64(at("2026-12-02T03:00:00Z").Unix()), testutil.ToFloat64(metrics.BackupLastFailure.With(l)))
	require.Equal(t, 50.0, testutil.ToFloat64(metrics.BackupDuration.With(l)))
	require.Equal(t, 4096.0, testutil.ToFloat64(metrics.BackupSize.With(l)))

	// Only a failure left: no success series; the cluster gone: no series at all.
	recordBackupMetrics(c, []mysqlv1beta1.MySQLBackup{failed})
	require.Equal(t, 0, testutil.CollectAndCount(metrics.BackupLastSuccess))
	require.Equal(t, 0, testutil.CollectAndCount(metrics.BackupSize))
	require.Equal(t, 1, testutil.CollectAndCount(metrics.BackupLastFailure))
	metrics.ForgetCluster(c)
	for _, m := range metrics.BackupMetrics {
		require.Equal(t, 0, testutil.CollectAndCount(m))
	}
}

func TestTheScheduleIntervalIsItsLongestGap(t *testing.T) {
	now := at("2026-12-02T12:00:00Z")
	for spec, want := range map[string]time.Duration{
		"0 2 * * *":    24 * time.Hour,
		"*/15 * * * *": 15 * time.Minute,
		"0 2 * * 1-5":  72 * time.Hour, // Friday to Monday
		"@weekly":      7 * 24 * time.Hour,
	} {
		s, err := mysqlv1beta1.ParseSchedule(spec)
		require.NoError(t, err)
		require.Equal(t, want, scheduleInterval(s, now), spec)
	}
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sched-db"},
		Spec: mysqlv1beta1.MySQLClusterSpec{Backup: &mysqlv1beta1.BackupSpec{Schedule: "0 2 * * *"}}}
	l := prometheus.Labels{"namespace": "ns", "cluster": "sched-db"}
	recordScheduleMetrics(c, now)
	require.Equal(t, 86400.0, testutil.ToFloat64(metrics.BackupScheduleInterval.With(l)))
	c.Spec.Backup.Suspend = true
	recordScheduleMetrics(c, now)
	require.False(t, metrics.BackupScheduleInterval.Delete(l), "a suspended schedule has no interval")
}

func TestAFailedVerificationIsCountedUntilOneSucceeds(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "verify-db"}}
	l := prometheus.Labels{"namespace": "ns", "cluster": "verify-db"}
	ok := &metav1.Time{Time: at("2026-12-01T03:00:00Z")}
	failedAt := &metav1.Time{Time: at("2026-12-02T03:00:00Z")}
	recordVerifyMetrics(c, &mysqlv1beta1.VerificationStatus{LastSucceeded: ok,
		Last: &mysqlv1beta1.BackupVerification{Backup: "b", CompletedAt: failedAt, Reason: mysqlv1beta1.ReasonBackupCorrupted}})
	require.Equal(t, float64(failedAt.Unix()), testutil.ToFloat64(metrics.VerifyLastFailure.With(l)))
	require.Equal(t, float64(ok.Unix()), testutil.ToFloat64(metrics.VerifyLastSuccess.With(l)))
	recordVerifyMetrics(c, &mysqlv1beta1.VerificationStatus{LastSucceeded: failedAt,
		Last: &mysqlv1beta1.BackupVerification{Backup: "b", CompletedAt: failedAt, Reason: mysqlv1beta1.ReasonVerified}})
	require.False(t, metrics.VerifyLastFailure.Delete(l), "the newest verification succeeded")
}

// Each account's password-set series follows its Secret: the operator's accounts when the
// credentials Secret was made, the application account at its last rotation; the series
// go with the cluster.
func TestPasswordMetricsFollowTheSecrets(t *testing.T) {
	c := testCluster()
	c.Name = "pw-db"
	c.Finalizers = []string{mysqlv1beta1.ClusterFinalizer}
	c.Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop"}
	made, rotated := at("2026-11-01T08:00:00Z"), at("2026-12-01T09:30:00Z")
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.CredentialsSecretName(c),
		CreationTimestamp: metav1.NewTime(made)}}
	app := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.ApplicationSecretName(c),
		CreationTimestamp: metav1.NewTime(made), Annotations: map[string]string{resources.AnnotationRotatedAt: rotated.Format(time.RFC3339)}},
		Data: map[string][]byte{resources.KeyAppPassword: []byte("pw")}}
	r, _ := fakeReconciler(t, c, credentials, app)
	r.Now = func() time.Time { return at("2026-12-05T00:00:00Z") }
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
		t.Fatal(err)
	}
	value := func(account string) float64 {
		return testutil.ToFloat64(metrics.PasswordSet.With(prometheus.Labels{"namespace": c.Namespace, "cluster": c.Name, "account": account}))
	}
	for _, account := range resources.CredentialAccounts {
		require.Equal(t, float64(made.Unix()), value(account), account)
	}
	require.Equal(t, float64(rotated.Unix()), value("shop"))
	require.Equal(t, len(resources.CredentialAccounts)+1, testutil.CollectAndCount(metrics.PasswordSet))
	metrics.ForgetCluster(c)
	require.Equal(t, 0, testutil.CollectAndCount(metrics.PasswordSet))
}
