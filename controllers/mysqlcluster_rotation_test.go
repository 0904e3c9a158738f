package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
