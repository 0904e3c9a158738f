package webhookcert

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

var names = []string{"svc.ns.svc", "svc.ns.svc.cluster.local"}

func secretOf(ca, server []byte, caKey, serverKey []byte) *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{keyCACert: ca, keyCAKey: caKey,
		corev1.TLSCertKey: server, corev1.TLSPrivateKeyKey: serverKey}}
}

func TestChainKeepsAValidChainAndRenewsInTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ca, server, changed, err := Chain(nil, names, now)
	require.NoError(t, err)
	require.True(t, changed, "nothing stored: issue")
	stored := secretOf(ca.CertPEM, server.CertPEM, ca.KeyPEM, server.KeyPEM)

	_, _, changed, err = Chain(stored, names, now.Add(300*24*time.Hour))
	require.NoError(t, err)
	require.False(t, changed, "valid and outside the renewal window: keep")

	ca2, server2, changed, err := Chain(stored, names, now.Add(ServerLifetime-RenewBefore+time.Hour))
	require.NoError(t, err)
	require.True(t, changed, "inside the renewal window: renew the serving certificate")
	require.Equal(t, ca.CertPEM, ca2.CertPEM, "the CA is kept, so clients keep trusting")
	require.NotEqual(t, server.CertPEM, server2.CertPEM)

	_, _, changed, err = Chain(stored, append(names, "other.ns.svc"), now)
	require.NoError(t, err)
	require.True(t, changed, "a name is missing: reissue")

	_, server3, changed, err := Chain(secretOf(ca.CertPEM, []byte("garbage"), ca.KeyPEM, nil), names, now)
	require.NoError(t, err)
	require.True(t, changed, "an unreadable pair is replaced, not an error")
	require.NoError(t, server3.Cert.CheckSignatureFrom(ca.Cert))
}

func TestOptionsValidateNamesTheMissingOne(t *testing.T) {
	err := Options{ServiceName: "s", SecretName: "x", CertDir: "/d"}.Validate()
	require.ErrorContains(t, err, "POD_NAMESPACE")
}

func TestEnsureInjectsTheCAAndWritesTheFiles(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	path := "/convert"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.example.io"}, {Name: "b.example.io"}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "c.example.io"}}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "things.example.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
						Namespace: "dolphin-system", Name: "svc", Path: &path}}}}}},
	).Build()
	o := Options{Namespace: "ns", ServiceName: "svc", SecretName: "cert", CertDir: t.TempDir(),
		Mutating: "m", Validating: "v", CRDs: []string{"things.example.io"}}
	ctx := context.Background()
	require.NoError(t, Ensure(ctx, c, o, time.Now()))

	secret := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cert"}, secret))
	ca := secret.Data[keyCACert]
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "m"}, m))
	for _, w := range m.Webhooks {
		require.Equal(t, ca, w.ClientConfig.CABundle)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "things.example.io"}, crd))
	require.Equal(t, ca, crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
	// The CRD was generated for another namespace (as a Helm chart's crds/ are): its
	// conversion webhook now leads to the operator's Service, path kept.
	require.Equal(t, &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "svc", Path: &path},
		crd.Spec.Conversion.Webhook.ClientConfig.Service)
	served, err := os.ReadFile(filepath.Join(o.CertDir, "tls.crt"))
	require.NoError(t, err)
	require.Equal(t, secret.Data[corev1.TLSCertKey], served)

	// A second pass with everything in place writes nothing.
	rv := secret.ResourceVersion
	require.NoError(t, Ensure(ctx, c, o, time.Now()))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(secret), secret))
	require.Equal(t, rv, secret.ResourceVersion)

	// A missing configuration is reported by name.
	o.Validating = "gone"
	require.ErrorContains(t, Ensure(ctx, c, o, time.Now()), "gone")
}

func TestEnsureWithAnExternalCertificateInjectsItsCAAndIssuesNothing(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "c.example.io"}}},
	).Build()
	dir := t.TempDir()
	o := Options{Namespace: "ns", ServiceName: "svc", CertDir: dir, Validating: "v", External: true}
	ctx := context.Background()

	// Nothing mounted yet (or the wrong Secret): an error naming the file, nothing changed.
	require.ErrorContains(t, Ensure(ctx, c, o, time.Now()), filepath.Join(dir, "ca.crt"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("not a certificate"), 0o600))
	require.ErrorContains(t, Ensure(ctx, c, o, time.Now()), "no PEM certificate")
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "v"}, v))
	require.Empty(t, v.Webhooks[0].ClientConfig.CABundle)

	ca, err := pki.NewCA("test CA", time.Now(), time.Hour, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o600))
	require.NoError(t, Ensure(ctx, c, o, time.Now()))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "v"}, v))
	require.Equal(t, ca.CertPEM, v.Webhooks[0].ClientConfig.CABundle)
	secrets := &corev1.SecretList{}
	require.NoError(t, c.List(ctx, secrets))
	require.Empty(t, secrets.Items, "cert-manager keeps the Secret; the operator writes none")
}
