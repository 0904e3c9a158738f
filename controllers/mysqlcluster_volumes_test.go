package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGrowPlan(t *testing.T) {
	claim := func(name, class, request, capacity string) corev1.PersistentVolumeClaim {
		pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if class != "" {
			pvc.Spec.StorageClassName = &class
		}
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}
		if capacity != "" {
			pvc.Status.Phase = corev1.ClaimBound
			pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		return pvc
	}
	classes := map[string]*storagev1.StorageClass{
		"grows": {AllowVolumeExpansion: new(true)},
		"fixed": {AllowVolumeExpansion: new(false)},
		"unset": {},
		"gone":  nil,
	}
	want := resource.MustParse("20Gi")
	cases := []struct {
		name   string
		claims []corev1.PersistentVolumeClaim
		plan   volumeGrowth
	}{
		{"claims as large as the spec: nothing to do",
			[]corev1.PersistentVolumeClaim{claim("d-0", "fixed", "20Gi", "20Gi"), claim("d-1", "fixed", "30Gi", "30Gi")}, volumeGrowth{}},
		{"smaller claims of a class that allows expansion grow",
			[]corev1.PersistentVolumeClaim{claim("d-0", "grows", "10Gi", "10Gi"), claim("d-1", "grows", "20Gi", "20Gi"), claim("d-2", "grows", "10Gi", "")},
			volumeGrowth{grow: []int{0, 2}}},
		{"a class that does not allow expansion (or says nothing) is named, and its claims keep their size",
			[]corev1.PersistentVolumeClaim{claim("d-0", "fixed", "10Gi", "10Gi"), claim("d-1", "unset", "10Gi", "10Gi"), claim("d-2", "grows", "10Gi", "10Gi")},
			volumeGrowth{grow: []int{2}, refused: "spec.storage.size 20Gi cannot be applied: d-0's StorageClass fixed does not allow volume expansion, " +
				"d-1's StorageClass unset does not allow volume expansion; the claims keep their size"}},
		{"no class, or one that does not exist",
			[]corev1.PersistentVolumeClaim{claim("d-0", "", "10Gi", ""), claim("d-1", "gone", "10Gi", "")},
			volumeGrowth{refused: "spec.storage.size 20Gi cannot be applied: d-0 has no StorageClass, d-1's StorageClass gone does not exist; the claims keep their size"}},
		{"a bound claim its provisioner has not grown yet is waited for",
			[]corev1.PersistentVolumeClaim{claim("d-0", "grows", "20Gi", "10Gi"), claim("d-1", "grows", "20Gi", "")},
			volumeGrowth{growing: "waiting for the volumes to grow: d-0 (10Gi of 20Gi)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.plan, growPlan(want, tc.claims, classes))
		})
	}
}
