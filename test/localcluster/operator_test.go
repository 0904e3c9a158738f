package localcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// TestOperatorServesItsWebhooksThroughItsService runs the real manager binary in a pod's
// place; the API server must reach its admission and conversion webhooks through the
// Service, with a certificate for the Service's name, as it does in a real cluster.
func TestOperatorServesItsWebhooksThroughItsService(t *testing.T) {
	bin := os.Getenv("DOLPHIN_MANAGER_BIN")
	require.NotEmpty(t, bin, "DOLPHIN_MANAGER_BIN names the manager binary (make test-e2e builds it)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	op, err := cluster.StartOperator(ctx, localcluster.OperatorOptions{
		Binary:           bin,
		WebhookManifests: filepath.Join(repoRoot(), "config", "webhook", "manifests.yaml"),
		ConversionCRDs:   []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"},
		Ready:            localcluster.ProbeDolphinWebhooks(cluster.RESTConfig()),
	})
	require.NoError(t, err)
	t.Cleanup(func() { op.Stop(10 * time.Second) })

	ns := namespace(t)
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	require.NoError(t, err)
	v1alpha1 := schema.GroupVersionResource{Group: "mysql.dolphin-operator.io", Version: "v1alpha1", Resource: "mysqlclusters"}
	v1beta1 := v1alpha1.GroupResource().WithVersion("v1beta1")
	_, err = dyn.Resource(v1alpha1).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mysql.dolphin-operator.io/v1alpha1", "kind": "MySQLCluster",
		"metadata": map[string]any{"name": "old"},
		"spec":     map[string]any{"replicas": int64(2), "version": "9.7", "storageSize": "5Gi"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := dyn.Resource(v1beta1).Namespace(ns).Get(ctx, "old", metav1.GetOptions{})
	require.NoError(t, err)
	instances, _, _ := unstructured.NestedInt64(got.Object, "spec", "instances")
	version, _, _ := unstructured.NestedString(got.Object, "spec", "mysql", "version")
	tls, _, _ := unstructured.NestedBool(got.Object, "spec", "tls", "enabled")
	require.Equal(t, int64(2), instances, "converted by the operator's /convert")
	require.Equal(t, "9.7", version)
	require.True(t, tls, "defaulted by the operator's mutating webhook")
	require.NoError(t, op.Exited(), "the operator is still running")
}
