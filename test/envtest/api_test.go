package envtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	webhookv1beta1 "github.com/dolphin-operator/dolphin/internal/webhook/v1beta1"
	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// startWithWebhooks runs an API server whose CRDs convert through, and whose objects are
// defaulted and validated by, Dolphin's webhooks served over TLS by this process.
func startWithWebhooks(t *testing.T) *envtest.Env {
	return envtest.Start(t, envtest.Options{Webhooks: true}, func(mgr ctrl.Manager) error {
		if err := webhookv1beta1.SetupMySQLClusterWebhookWithManager(mgr, resources.ImagesFromEnv(func(string) string { return "" })); err != nil {
			return err
		}
		return webhookv1beta1.SetupMySQLBackupWebhookWithManager(mgr)
	})
}

func namespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	return ns.Name
}

func v1beta1Cluster(ns, name string) *mysqlv1beta1.MySQLCluster {
	return &mysqlv1beta1.MySQLCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3))},
	}
}

func TestWebhooksThroughARealAPIServer(t *testing.T) {
	env := startWithWebhooks(t)
	c := env.Client
	ctx := context.Background()
	ns := namespace(t, c)

	t.Run("a v1alpha1 object is read back as v1beta1, converted and defaulted", func(t *testing.T) {
		old := &mysqlv1alpha1.MySQLCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
			Spec: mysqlv1alpha1.MySQLClusterSpec{Replicas: new(int32(3)), Version: "8.4",
				StorageSize: new(resource.MustParse("100Gi")),
				Backup:      &mysqlv1alpha1.BackupSpec{Enabled: true, Schedule: "0 2 * * *", Retention: new(int32(7))}},
		}
		require.NoError(t, c.Create(ctx, old))
		got := &mysqlv1beta1.MySQLCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(old), got))
		require.Equal(t, int32(3), *got.Spec.Instances)
		require.Equal(t, "8.4", got.Spec.MySQL.Version)
		require.Equal(t, "100Gi", got.Spec.Storage.Size.String())
		require.NotNil(t, got.Spec.Backup)
		require.Equal(t, "0 2 * * *", got.Spec.Backup.Schedule)
		require.Equal(t, int32(7), *got.Spec.Backup.Retention.Count)
		require.False(t, got.Spec.Backup.Suspend)
		// Defaults the webhook filled on the way in:
		require.True(t, *got.Spec.TLS.Enabled)
		require.Equal(t, mysqlv1beta1.DeletionPolicyRetain, got.Spec.DeletionPolicy)
		require.True(t, *got.Spec.Replication.SemiSync.Enabled)
		require.Equal(t, "100Gi", got.Spec.Backup.Target.PVC.Size.String(), "backup volume defaults to the data volume's size")
		require.NotContains(t, got.Annotations, mysqlv1alpha1.AnnotationHubData, "the hub never carries the spoke's annotation")
	})

	t.Run("a v1beta1 object is read as v1alpha1 and survives an update through it", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "modern")
		cl.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 3e9}
		cl.Spec.MySQL.Config = map[string]string{"max_connections": "500"}
		require.NoError(t, c.Create(ctx, cl))
		old := &mysqlv1alpha1.MySQLCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cl), old))
		require.Equal(t, int32(3), *old.Spec.Replicas)
		require.Equal(t, "8.4", old.Spec.Version)
		require.Contains(t, old.Annotations, mysqlv1alpha1.AnnotationHubData, "what v1alpha1 cannot say is kept")

		old.Spec.Replicas = new(int32(5))
		require.NoError(t, c.Update(ctx, old))
		got := &mysqlv1beta1.MySQLCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cl), got))
		require.Equal(t, int32(5), *got.Spec.Instances, "the v1alpha1 change arrived")
		require.Equal(t, "3s", got.Spec.Replication.Failover.DetectionDelay.Duration.String(), "v1beta1-only settings survived")
		require.Equal(t, "500", got.Spec.MySQL.Config["max_connections"])
	})

	t.Run("a downgrade is refused naming the field", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "newer")
		cl.Spec.MySQL.Version = "9.7"
		require.NoError(t, c.Create(ctx, cl))
		cl.Spec.MySQL.Version = "8.4"
		err := c.Update(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.mysql.version")
		require.Contains(t, err.Error(), "downgrading MySQL from 9.7 to 8.4")
	})

	t.Run("unpinning a release the operator's image is older than is refused", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "pinned")
		cl.Spec.MySQL.Version = "9.7.99"
		require.NoError(t, c.Create(ctx, cl))
		cl.Status.Version = "9.7.99" // what the instances report once rolled out
		require.NoError(t, c.Status().Update(ctx, cl))
		cl.Spec.MySQL.Version = "9.7"
		err := c.Update(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.mysql.version")
		require.Contains(t, err.Error(), "older than the 9.7.99 the instances run")
	})

	t.Run("a scale-down below the semi-sync minimum is refused naming spec.instances", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "acked")
		cl.Spec.Instances = new(int32(5))
		cl.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(3))
		require.NoError(t, c.Create(ctx, cl))
		cl.Spec.Instances = new(int32(3))
		err := c.Update(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.instances")
		require.Contains(t, err.Error(), "waitForReplicaCount")
	})

	t.Run("a shrink is refused naming the field", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "big")
		cl.Spec.Storage.Size = new(resource.MustParse("20Gi"))
		require.NoError(t, c.Create(ctx, cl))
		cl.Spec.Storage.Size = new(resource.MustParse("10Gi"))
		err := c.Update(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.storage")
		require.Contains(t, err.Error(), "shrink")
	})

	t.Run("an invalid cron is refused naming the field", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "cron")
		cl.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "at two every night"}
		err := c.Create(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.backup.schedule")
		require.Contains(t, err.Error(), "not a cron schedule")
	})

	t.Run("every problem is reported at once", func(t *testing.T) {
		cl := v1beta1Cluster(ns, "many")
		cl.Spec.Primary = "many-7"
		cl.Spec.MySQL.Config = map[string]string{"gtid_mode": "OFF"}
		err := c.Create(ctx, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.primary")
		require.Contains(t, err.Error(), "spec.mysql.config[gtid_mode]")
	})

	t.Run("a null where a number is required is refused", func(t *testing.T) {
		for _, tc := range []struct{ apiVersion, field string }{
			{"mysql.dolphin-operator.io/v1alpha1", "replicas"},
			{"mysql.dolphin-operator.io/v1beta1", "instances"},
		} {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": tc.apiVersion, "kind": "MySQLCluster",
				"metadata": map[string]any{"name": "null-" + tc.field, "namespace": ns},
				"spec":     map[string]any{tc.field: nil},
			}}
			err := c.Create(ctx, u)
			require.Error(t, err, "%s spec.%s: null was accepted", tc.apiVersion, tc.field)
			require.Contains(t, err.Error(), "spec."+tc.field)
		}
	})

	t.Run("the samples are accepted in both versions", func(t *testing.T) {
		for _, u := range samples(t, ns) {
			require.NoError(t, c.Create(ctx, u), "sample %s %s", u.GetAPIVersion(), u.GetName())
		}
	})

	t.Run("backups convert too", func(t *testing.T) {
		b := &mysqlv1alpha1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec: mysqlv1alpha1.MySQLBackupSpec{ClusterName: "legacy"}}
		require.NoError(t, c.Create(ctx, b))
		got := &mysqlv1beta1.MySQLBackup{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(b), got))
		require.Equal(t, "legacy", got.Spec.Cluster)
		require.Equal(t, mysqlv1beta1.BackupMethodPhysical, got.Spec.Method, "defaulted")
		got.Spec.Cluster = "other"
		err := c.Update(ctx, got)
		require.Error(t, err)
		require.Contains(t, err.Error(), "immutable")
	})
}

// TestCELRulesHoldWithoutTheWebhooks: the cheap invariants are on the CRD as well, so a
// cluster without the operator's webhooks still refuses them.
func TestCELRulesHoldWithoutTheWebhooks(t *testing.T) {
	env := envtest.Start(t, envtest.Options{}, nil)
	c := env.Client
	ctx := context.Background()
	ns := namespace(t, c)
	cl := v1beta1Cluster(ns, "cel")
	cl.Spec.Storage.Size = new(resource.MustParse("20Gi"))
	cl.Spec.Storage.StorageClassName = new("fast")
	require.NoError(t, c.Create(ctx, cl))

	grow := cl.DeepCopy()
	grow.Spec.Storage.Size = new(resource.MustParse("30Gi"))
	require.NoError(t, c.Update(ctx, grow), "growing is fine")

	shrink := grow.DeepCopy()
	shrink.Spec.Storage.Size = new(resource.MustParse("1Gi"))
	err := c.Update(ctx, shrink)
	require.Error(t, err)
	require.Contains(t, err.Error(), "size may grow but never shrink")

	move := grow.DeepCopy()
	move.Spec.Storage.StorageClassName = new("slow")
	err = c.Update(ctx, move)
	require.Error(t, err)
	require.Contains(t, err.Error(), "storageClassName is immutable")

	// Where a cluster's data came from is fixed when it is created.
	restored := v1beta1Cluster(ns, "cel-restored")
	restored.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: "nightly"}}
	require.NoError(t, c.Create(ctx, restored))
	other := restored.DeepCopy()
	other.Spec.Bootstrap.FromBackup.Name = "weekly"
	err = c.Update(ctx, other)
	require.Error(t, err)
	require.Contains(t, err.Error(), "bootstrap cannot change after the cluster is created")
	removed := restored.DeepCopy()
	removed.Spec.Bootstrap = nil
	err = c.Update(ctx, removed)
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot be added or removed later")
	added := grow.DeepCopy()
	added.Spec.Bootstrap = restored.Spec.Bootstrap
	err = c.Update(ctx, added)
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot be added or removed later")

	for name, mutate := range map[string]func(*mysqlv1beta1.MySQLCluster){
		"too many instances": func(x *mysqlv1beta1.MySQLCluster) { x.Spec.Instances = new(int32(10)) },
		"unsupported series": func(x *mysqlv1beta1.MySQLCluster) { x.Spec.MySQL.Version = "8.0" },
		"two backup targets": func(x *mysqlv1beta1.MySQLCluster) {
			x.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "@daily", Target: &mysqlv1beta1.BackupTarget{
				PVC: &mysqlv1beta1.PVCTarget{ClaimName: "b"},
				S3:  &mysqlv1beta1.S3Target{Bucket: "b", CredentialsSecret: corev1.LocalObjectReference{Name: "s"}}}}
		},
		"no schedule": func(x *mysqlv1beta1.MySQLCluster) { x.Spec.Backup = &mysqlv1beta1.BackupSpec{} },
	} {
		bad := v1beta1Cluster(ns, "cel-"+strings.ReplaceAll(name, " ", "-"))
		mutate(bad)
		require.Error(t, c.Create(ctx, bad), name)
	}
}

// samples reads config/samples/*.yaml (not the kustomization) into objects in ns.
func samples(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(ground.RepoRoot(), "config", "samples", "mysql_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(raw, &u.Object), f)
		u.SetNamespace(ns)
		out = append(out, u)
	}
	return out
}
