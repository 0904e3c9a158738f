package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func TestStalePodsAreThoseThatMayUseTheOldPasswords(t *testing.T) {
	setAt := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	pod := func(name, rotation string, created time.Time, job bool, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{}},
			Status: corev1.PodStatus{Phase: phase}}
		if rotation != "" {
			p.Annotations = map[string]string{resources.AnnotationCredentials: rotation}
		}
		if job {
			p.Labels[batchv1.JobNameLabel] = name
		}
		return p
	}
	pods := []corev1.Pod{
		pod("db-0", "r1", setAt.Add(time.Minute), false, corev1.PodRunning),
		pod("db-1", "r0", setAt.Add(-time.Hour), false, corev1.PodRunning),
		pod("db-2", "", setAt.Add(-time.Hour), false, corev1.PodPending),
		pod("db-archive-x", "r1", setAt.Add(time.Minute), false, corev1.PodRunning),
		pod("backup-old", "", setAt.Add(-time.Minute), true, corev1.PodRunning),
		pod("backup-same-second", "", setAt, true, corev1.PodRunning),
		pod("backup-new", "", setAt.Add(time.Second), true, corev1.PodRunning),
		pod("backup-done", "", setAt.Add(-time.Hour), true, corev1.PodSucceeded),
		pod("db-3", "r0", setAt.Add(-time.Hour), false, corev1.PodFailed),
	}
	require.Equal(t, []string{"db-1", "db-2", "backup-old", "backup-same-second"}, stalePods(pods, "r1", setAt))
	require.Empty(t, stalePods(pods[:1], "r1", setAt))
}

func TestTheReconcilerTakesARotationsStepsAndNeverOnAStaleSecret(t *testing.T) {
	ctx := context.Background()
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(1))}}
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	initial, err := resources.CredentialsSecret(c, nil, nil, resources.RotationProgress{}, now)
	require.NoError(t, err)
	initial.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	initial.Data["EXTRA"] = []byte("the user's")
	r, rec := fakeReconciler(t, c, initial)
	r.Now = func() time.Time { return now }
	pass := func() *state {
		t.Helper()
		st := &state{cluster: c}
		require.NoError(t, r.reconcileCredentials(ctx, st))
		return st
	}
	secret := func() *corev1.Secret {
		s := &corev1.Secret{}
		require.NoError(t, r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-credentials"}, s))
		return s
	}
	pass()
	made := secret()

	c.Annotations = map[string]string{mysqlv1beta1.AnnotationRotateOperatorPasswords: "r1"}
	st := pass()
	require.Equal(t, resources.Rotation{Phase: resources.RotationRetaining, Ask: "r1"}, st.rotation)
	retaining := secret()
	require.Equal(t, []byte("the user's"), retaining.Data["EXTRA"], "a key that is not the operator's stays")
	require.Len(t, retaining.Data[resources.NextKey(resources.KeyAdminPassword)], resources.PasswordLength)
	require.Contains(t, <-rec.Events, "Rotation r1 of the operator's passwords started")
	require.Error(t, r.writeCredentials(ctx, &state{cluster: c}, retaining, made), "an update built on a stale copy is refused")
	pass()
	require.Equal(t, retaining.Data, secret().Data, "the new passwords are generated once")

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-primary",
		Annotations: map[string]string{resources.AnnotationPasswordsRetained: "r1"}}}
	require.NoError(t, r.Create(ctx, lease))
	st = pass()
	require.Equal(t, "r1", st.credentials, "the pod templates carry the rotation")
	rolling := secret()
	require.Equal(t, retaining.Data[resources.NextKey(resources.KeyAdminPassword)], rolling.Data[resources.KeyAdminPassword])
	require.Equal(t, now, st.passwordsSetAt[resources.AdminUser])
	require.Equal(t, made.CreationTimestamp.Time, st.passwordsSetAt["root"], "root is not rotated")
	require.Contains(t, <-rec.Events, "Rotation r1: every account accepts its new password")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Labels: resources.SelectorLabels(c)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	require.NoError(t, r.Create(ctx, pod))
	pass()
	require.Equal(t, resources.RotationRolling, resources.CredentialsRotation(secret()).Phase, "db-0 runs the old passwords")
	pod.Annotations = map[string]string{resources.AnnotationCredentials: "r1"}
	require.NoError(t, r.Update(ctx, pod))
	pass()
	require.Equal(t, resources.RotationDiscarding, resources.CredentialsRotation(secret()).Phase)
	require.Contains(t, <-rec.Events, "the old ones are being discarded")

	lease.Annotations[resources.AnnotationPasswordsDiscarded] = "r1"
	require.NoError(t, r.Update(ctx, lease))
	st = pass()
	done := secret()
	require.Equal(t, resources.Rotation{}, st.rotation)
	require.NotContains(t, done.Data, resources.PreviousKey(resources.KeyAdminPassword))
	require.Equal(t, rolling.Data[resources.KeyAdminPassword], done.Data[resources.KeyAdminPassword])
	require.Equal(t, []byte("the user's"), done.Data["EXTRA"])
	require.Contains(t, <-rec.Events, "Rotation r1 of the operator's passwords is done")
}
