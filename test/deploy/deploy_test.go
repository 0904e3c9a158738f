package deploy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
)

const (
	operatorNS = ground.OperatorNamespace
	certSecret = ground.WebhookCertSecret
)

var (
	g   *ground.Ground
	k8s client.Client
)

// TestMain attaches to the shared ground (or starts one), whose operator `make deploy`
// installed.
func TestMain(m *testing.M) { suite.Main(m, &g, &k8s) }

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return ground.WaitFor(t, timeout, what, cond)
}

// TestTheOperatorRestartsKeepingItsCertificate checks what `make deploy` set up on the
// ground (the operator's pod under its ServiceAccount's RBAC, its self-issued webhook
// certificate, whose CA is injected into the webhook configurations and the CRDs'
// conversion webhooks), then restarts the operator's pod: the certificate is kept and the
// webhooks answer again.
func TestTheOperatorRestartsKeepingItsCertificate(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: certSecret}, secret))
	require.NoError(t, ground.CAInjected(ctx, k8s, secret.Data["ca.crt"]))

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
	requireNoForbidden(t, g.OperatorLogs(ctx))
}

func operatorPod(t *testing.T, k8s client.Client) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(context.Background(), pods, client.InNamespace(operatorNS),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	require.Len(t, pods.Items, 1)
	return &pods.Items[0]
}

// requireNoForbidden fails on any call the ServiceAccount's RBAC refused (in the logs of
// the operator's pods): the operator ran with exactly what its install grants it.
func requireNoForbidden(t *testing.T, logs string) {
	t.Helper()
	require.Empty(t, ground.Forbidden(logs), "the operator was refused API calls")
}
