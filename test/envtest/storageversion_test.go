package envtest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/storageversion"
	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/ground"
)

const clustersCRD = "mysqlclusters.mysql.dolphin-operator.io"

// setStorage makes version the CRD's storage version, as an upgrade's CRD would.
func setStorage(t *testing.T, c client.Client, version string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: clustersCRD}, crd))
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
	}
	require.NoError(t, c.Update(context.Background(), crd))
}

// rewriteUntilStoredAs touches obj until etcd holds it in version: the API server switches
// storage a moment after the CRD update.
func rewriteUntilStoredAs(t *testing.T, env *envtest.Env, obj *mysqlv1beta1.MySQLCluster, version string) {
	t.Helper()
	key := "/registry/mysql.dolphin-operator.io/mysqlclusters/" + obj.Namespace + "/" + obj.Name
	n := 0
	ground.WaitFor(t, 30*time.Second, obj.Name+" stored as "+version, func() error {
		if got := storedAPIVersion(t, env.EtcdURL, key); got != "mysql.dolphin-operator.io/"+version {
			n++
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			obj.Labels = map[string]string{"touch": fmt.Sprint(n)}
			if err := env.Client.Update(context.Background(), obj); err != nil {
				return err
			}
			return fmt.Errorf("stored as %s", got)
		}
		return nil
	})
}

// Objects an older release stored in v1alpha1 are rewritten in the storage version, v1beta1,
// and only then is v1alpha1 dropped from the CRD's storedVersions.
func TestStorageVersionMigrationRewritesObjectsStoredInAnOlderVersion(t *testing.T) {
	env := startWithWebhooks(t)
	ctx := context.Background()
	c := env.Client
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	m := &storageversion.Migrator{Reader: c, Writer: c, Discovery: disco, CRDs: []string{clustersCRD}}
	ns := namespace(t, c)

	res, err := m.Migrate(ctx, clustersCRD)
	require.NoError(t, err)
	require.Equal(t, storageversion.Result{Storage: "v1beta1"}, res, "nothing to migrate on a fresh install")

	// The state an older release would leave: objects written while v1alpha1 was stored.
	setStorage(t, c, "v1alpha1")
	legacy := v1beta1Cluster(ns, "legacy")
	require.NoError(t, c.Create(ctx, legacy))
	rewriteUntilStoredAs(t, env, legacy, "v1alpha1")
	want := legacy.Spec
	setStorage(t, c, "v1beta1")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: clustersCRD}, crd))
	require.ElementsMatch(t, []string{"v1alpha1", "v1beta1"}, crd.Status.StoredVersions)

	key := "/registry/mysql.dolphin-operator.io/mysqlclusters/" + ns + "/legacy"
	ground.WaitFor(t, 30*time.Second, "the migration", func() error {
		res, err = m.Migrate(ctx, clustersCRD) // refused while discovery says v1alpha1 is stored
		return err
	})
	require.Equal(t, []string{"v1alpha1"}, res.Dropped)
	require.Equal(t, 1, res.Rewritten)
	require.Equal(t, "mysql.dolphin-operator.io/v1beta1", storedAPIVersion(t, env.EtcdURL, key))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: clustersCRD}, crd))
	require.Equal(t, []string{"v1beta1"}, crd.Status.StoredVersions)
	after := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(legacy), after))
	require.Equal(t, want, after.Spec, "the migration changed nothing but the encoding")

	// Once migrated, a second run writes nothing.
	rv := after.ResourceVersion
	res, err = m.Migrate(ctx, clustersCRD)
	require.NoError(t, err)
	require.Equal(t, storageversion.Result{Storage: "v1beta1"}, res)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(legacy), after))
	require.Equal(t, rv, after.ResourceVersion)
	require.True(t, slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}))
}

// storedAPIVersion is the apiVersion etcd holds under key (read through its JSON gateway).
func storedAPIVersion(t *testing.T, etcdURL, key string) string {
	t.Helper()
	v, err := ground.StoredAPIVersion(etcdURL, key)
	require.NoError(t, err)
	return v
}
