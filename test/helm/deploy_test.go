package helm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// TestUndeployRemovesWhatDeployInstalled installs the operator with `make deploy` and
// removes it with `make undeploy`: its namespace, webhook configurations and CRDs go. It
// runs first (its file sorts first): the Helm test then installs on a cluster with none
// of them.
func TestUndeployRemovesWhatDeployInstalled(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	require.NoError(t, g.Deploy(ctx))
	_, err := g.Make(ctx, "undeploy")
	require.NoError(t, err)
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ground.MutatingWebhooks}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ground.ValidatingWebhooks}},
	} {
		require.True(t, apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)), "%T is deleted", obj)
	}
	// The API server's CRD finalizer completes on its own schedule.
	took := waitFor(t, 5*time.Minute, "the CRDs and the operator's namespace to be gone", func() error {
		for _, name := range ground.CRDNames {
			err := k8s.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD %s still there (%w)", name, err)
			}
		}
		err := k8s.Get(ctx, client.ObjectKey{Name: ground.OperatorNamespace}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%w)", ground.OperatorNamespace, err)
		}
		return nil
	})
	t.Logf("undeployed: everything gone %s after make undeploy", took.Round(100*time.Millisecond))
}
