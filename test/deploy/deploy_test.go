package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

const (
	operatorNS = "dolphin-system"
	certSecret = "dolphin-webhook-server-cert"
)

var crds = []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"}

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return ground.WaitFor(t, timeout, what, cond)
}

// TestDeployWithSelfIssuedWebhookCertificates installs the operator with `make deploy` on
// real nodes (its Deployment's pod runs the operator image under its ServiceAccount's
// RBAC), runs the v1alpha1 sample to Ready through the conversion webhook, restarts the
// operator's pod, and removes everything with `make undeploy`.
func TestDeployWithSelfIssuedWebhookCertificates(t *testing.T) {
	ctx := context.Background()
	// No CRDs up front: `make deploy` installs them, as it would on a real cluster.
	g, err := ground.Start(ctx, ground.Options{Log: os.Stderr, WithoutOperator: true})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	k8s, err := g.Client()
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, g.Deploy(ctx))
	t.Logf("make deploy to webhooks answering: %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (end):\n%s", g.OperatorLogs(context.Background()))
		}
	})

	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: certSecret}, secret))
	requireCAInjected(t, k8s, secret.Data["ca.crt"])

	// Conversion: a v1alpha1 sample is stored as v1beta1, read back both ways, and runs.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploy-sample",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	require.NoError(t, k8s.Create(ctx, ns))
	sample := readSample(t)
	sample.Namespace = ns.Name
	require.NoError(t, k8s.Create(ctx, sample))
	took := waitFor(t, 3*time.Minute, "the v1alpha1 sample to be Ready", func() error {
		return readyCluster(ctx, k8s, client.ObjectKeyFromObject(sample))
	})
	t.Logf("v1alpha1 sample Ready after %s", took.Round(10*time.Millisecond))
	hub := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sample), hub))
	require.Equal(t, *sample.Spec.Replicas, *hub.Spec.Instances, "v1alpha1 replicas read as v1beta1 instances")
	back := &mysqlv1alpha1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sample), back))
	require.Equal(t, sample.Spec, back.Spec)

	// A restart (the pod deleted, the Deployment makes another) keeps the chain: the Secret
	// is not rewritten, the webhooks keep answering.
	old := operatorPod(t, k8s)
	require.NoError(t, k8s.Delete(ctx, old))
	waitFor(t, 2*time.Minute, "a new operator pod answering the webhooks", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(operatorNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].UID == old.UID {
			return fmt.Errorf("%d operator pods, the old one among them", len(pods.Items))
		}
		return ground.ProbeWebhooks(ctx, g.RESTConfig())
	})
	again := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), again))
	require.Equal(t, secret.ResourceVersion, again.ResourceVersion, "a valid certificate is kept across restarts")

	require.NoError(t, k8s.Delete(ctx, sample))
	waitFor(t, 2*time.Minute, "the sample to be deleted", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sample), back); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	requireNoForbidden(t, g.OperatorLogs(ctx))

	_, err = g.Make(ctx, "undeploy")
	require.NoError(t, err)
	requireUndeployed(t, k8s)
}

func operatorPod(t *testing.T, k8s client.Client) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(context.Background(), pods, client.InNamespace(operatorNS),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	require.Len(t, pods.Items, 1)
	return &pods.Items[0]
}

// requireUndeployed checks what undeploy deletes directly is gone and the CRDs are being
// removed. The API server's CRD finalizer completes that on its own schedule, which after a
// CRD update (the CA injection) has taken minutes upstream too ("storage is
// (re)initializing"), so the test checks the deletion is under way rather than waiting it out.
func requireUndeployed(t *testing.T, k8s client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dolphin-mutating-webhook-configuration"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dolphin-validating-webhook-configuration"}},
	} {
		require.True(t, apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)), "%T is deleted", obj)
	}
	for _, name := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd)
		require.True(t, apierrors.IsNotFound(err) || (err == nil && crd.DeletionTimestamp != nil), "%s is being deleted", name)
	}
}

func requireCAInjected(t *testing.T, k8s client.Client, ca []byte) {
	t.Helper()
	ctx := context.Background()
	require.True(t, bytes.HasPrefix(ca, []byte("-----BEGIN CERTIFICATE-----")), "the Secret holds a CA")
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "dolphin-mutating-webhook-configuration"}, m))
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "dolphin-validating-webhook-configuration"}, v))
	for _, w := range m.Webhooks {
		require.Equal(t, ca, w.ClientConfig.CABundle, w.Name)
	}
	for _, w := range v.Webhooks {
		require.Equal(t, ca, w.ClientConfig.CABundle, w.Name)
	}
	for _, name := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, crd))
		require.Equal(t, ca, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, name)
	}
}

func readSample(t *testing.T) *mysqlv1alpha1.MySQLCluster {
	t.Helper()
	raw, err := os.ReadFile(ground.RepoRoot() + "/config/samples/mysql_v1alpha1_mysqlcluster.yaml")
	require.NoError(t, err)
	c := &mysqlv1alpha1.MySQLCluster{}
	require.NoError(t, yaml.Unmarshal(raw, c))
	return c
}

// requireNoForbidden fails on any call the ServiceAccount's RBAC refused (in the logs of
// the operator's pods): the operator ran with exactly what its install grants it.
func requireNoForbidden(t *testing.T, logs string) {
	t.Helper()
	var refused []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "forbidden") {
			refused = append(refused, line)
		}
	}
	require.Empty(t, refused, "the operator was refused API calls")
}
