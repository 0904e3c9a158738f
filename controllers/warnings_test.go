package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A step that keeps failing is retried pass after pass; its Warning is one Event for the
// episode (within warningRepeat), and another step's failure is an Event of its own.
func TestAFailingStepWarnsOncePerEpisodeNotOncePerPass(t *testing.T) {
	s := testScheme(t)
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-db", Generation: 1},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3))}}
	refuse := errors.New("the API server refused the StatefulSet")
	k8s := fake.NewClientBuilder().WithScheme(s).WithObjects(c).WithStatusSubresource(&mysqlv1beta1.MySQLCluster{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				if u, ok := obj.(interface{ GetKind() string }); ok && u.GetKind() == "StatefulSet" {
					return refuse
				}
				return cl.Apply(ctx, obj, opts...)
			},
		}).Build()
	rec := events.NewFakeRecorder(100)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &MySQLClusterReconciler{Client: k8s, Scheme: s, Recorder: rec, Topology: NoTopology{}, Now: func() time.Time { return now }}
	for range 50 {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		require.ErrorIs(t, err, refuse)
		now = now.Add(5 * time.Second)
	}
	require.Len(t, rec.Events, 1, "50 failing passes in %s: one Warning", 50*5*time.Second)
	require.Contains(t, <-rec.Events, "Step statefulset failed")
	now = now.Add(warningRepeat)
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	require.ErrorIs(t, err, refuse)
	require.Len(t, rec.Events, 1, "the episode still lasting, said again after warningRepeat")
}
