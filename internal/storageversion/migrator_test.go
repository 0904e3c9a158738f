package storageversion

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Our copy must give what the API server publishes, or the guard would never let a
// migration through.
func TestStorageVersionHashIsTheAPIServers(t *testing.T) {
	for _, gvk := range [][3]string{{"mysql.dolphin-operator.io", "v1beta1", "MySQLCluster"}, {"", "v1", "Pod"}} {
		require.Equal(t, apidiscovery.StorageVersionHash(gvk[0], gvk[1], gvk[2]), storageVersionHash(gvk[0], gvk[1], gvk[2]))
	}
}

func crd(stored []string, storage string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}, {Name: "v2", Served: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == storage
	}
	return c
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Widget"})
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

func newClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&apiextensionsv1.CustomResourceDefinition{}).WithInterceptorFuncs(funcs).Build()
}

func TestMigrateRewritesEachObjectAndSkipsOneDeletedMeanwhile(t *testing.T) {
	var updated []string
	c := newClient(t, interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if obj.GetName() == "gone" {
			return apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "gone")
		}
		updated = append(updated, obj.GetName())
		return cl.Update(ctx, obj, opts...)
	}}, crd([]string{"v1", "v2"}, "v2"), widget("a"), widget("gone"), widget("b"))
	m := &Migrator{Reader: c, Writer: c}
	res, err := m.Migrate(context.Background(), "widgets.example.com")
	require.NoError(t, err)
	require.Equal(t, Result{Rewritten: 3, Dropped: []string{"v1"}, Storage: "v2"}, res)
	require.ElementsMatch(t, []string{"a", "b"}, updated)
	got := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "widgets.example.com"}, got))
	require.Equal(t, []string{"v2"}, got.Status.StoredVersions)
}

func TestMigrateKeepsStoredVersionsWhenARewriteFails(t *testing.T) {
	c := newClient(t, interceptor.Funcs{Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "a", nil)
	}}, crd([]string{"v1", "v2"}, "v2"), widget("a"))
	m := &Migrator{Reader: c, Writer: c}
	_, err := m.Migrate(context.Background(), "widgets.example.com")
	require.ErrorContains(t, err, "rewriting Widget default/a")
	got := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "widgets.example.com"}, got))
	require.Equal(t, []string{"v1", "v2"}, got.Status.StoredVersions, "v1 may still be in etcd")
}

func TestMigrateRefusesACRDWithoutAStorageVersion(t *testing.T) {
	c := newClient(t, interceptor.Funcs{}, crd([]string{"v1"}, ""))
	_, err := (&Migrator{Reader: c, Writer: c}).Migrate(context.Background(), "widgets.example.com")
	require.ErrorContains(t, err, "widgets.example.com has no storage version")
}

// What the migrator did, and a migration that keeps failing, are Events on the CRD: a user
// sees them with kubectl get events, not only in the operator's log.
func TestTheMigratorReportsThroughEvents(t *testing.T) {
	var fails atomic.Bool
	fails.Store(true)
	c := newClient(t, interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if fails.Load() {
			return apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, obj.GetName(), nil)
		}
		return cl.Update(ctx, obj, opts...)
	}}, crd([]string{"v1", "v2"}, "v2"), widget("a"))
	rec := events.NewFakeRecorder(10)
	m := &Migrator{Reader: c, Writer: c, CRDs: []string{"widgets.example.com"}, Recorder: rec, Retry: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()
	require.Contains(t, <-rec.Events, "Warning StorageVersionMigrationFailed Storage version migration failed (retried every 50ms): rewriting Widget default/a")
	time.Sleep(200 * time.Millisecond) // retries: the Warning is not repeated within WarnEvery
	require.Empty(t, rec.Events)
	fails.Store(false)
	require.Equal(t, "Normal StorageVersionMigrated Rewrote 1 objects in storage version v2; status.storedVersions no longer lists v1", <-rec.Events)
	cancel()
	require.NoError(t, <-done)
}
