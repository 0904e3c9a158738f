package envtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// widgetCRD is a namespaced CRD with a schema that rejects a negative size.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.smoke.dolphin-operator.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "smoke.dolphin-operator.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget",
				Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer", Minimum: new(0.0)},
						}},
					},
				}},
			}},
		},
	}
}

func TestAPIServerServesACustomResource(t *testing.T) {
	require.NotEmpty(t, os.Getenv("KUBEBUILDER_ASSETS"), "KUBEBUILDER_ASSETS names the control-plane binaries (make test-envtest sets it)")
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	// Registered first so it runs last: whatever else a test starts stops before the API server.
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	require.NoError(t, err)

	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "smoke.dolphin-operator.io", Version: "v1", Kind: "Widget"}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(gvk)
	w.SetNamespace("default")
	w.SetName("first")
	require.NoError(t, unstructured.SetNestedField(w.Object, int64(3), "spec", "size"))
	require.NoError(t, c.Create(ctx, w))

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(gvk)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "first"}, got))
	size, found, err := unstructured.NestedInt64(got.Object, "spec", "size")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(3), size)
	require.NotEmpty(t, got.GetUID(), "the object was stored")

	bad := w.DeepCopy()
	bad.SetName("negative")
	bad.SetResourceVersion("")
	require.NoError(t, unstructured.SetNestedField(bad.Object, int64(-1), "spec", "size"))
	err = c.Create(ctx, bad)
	require.Error(t, err, "the CRD's schema is enforced")
	require.Contains(t, err.Error(), "spec.size")
}
