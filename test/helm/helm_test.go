package helm_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/pki"
	"github.com/dolphin-operator/dolphin/test/chart"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// helmNS is not config/default's namespace: the CRDs in the chart's crds/ name
// dolphin-system, and the operator must point their conversion webhook at its own Service.
// cmNS is where the release with certManager.enabled goes.
const (
	helmNS = "dolphin-helm"
	cmNS   = "dolphin-cm"
)

// TestHelmInstallUpgradeUninstall installs the chart with the Helm SDK on real nodes (the
// operator is the chart's Deployment, under the chart's ServiceAccount and RBAC), runs the
// v1alpha1 sample to Ready through the conversion webhook, upgrades the release with a
// changed value, and uninstalls it: the CRDs and the cluster, its pods' volumes included,
// stay. Installed again, with certManager.enabled and into another namespace, the operator
// takes the orphaned cluster back and serves its webhooks with the certificate mounted from
// the Secret cert-manager would keep.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", g.OperatorLogsIn(context.Background(), helmNS))
		}
	})
	chrt, err := loader.Load(chart.Dir())
	require.NoError(t, err)
	cfg := helmConfig(t, g, helmNS)
	vals := helmValues(g, 16)

	start := time.Now()
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "dolphin", helmNS, true
	install.WaitStrategy, install.Timeout = kube.StatusWatcherStrategy, 3*time.Minute
	_, err = install.RunWithContext(ctx, chrt, vals)
	require.NoError(t, err)
	waitFor(t, 2*time.Minute, "the webhooks to answer", func() error { return ground.ProbeWebhooks(ctx, g.RESTConfig()) })
	t.Logf("helm install to webhooks answering: %s", time.Since(start).Round(time.Millisecond))
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: helmNS, Name: ground.WebhookCertSecret}, secret))
	require.NoError(t, ground.CAInjected(ctx, k8s, secret.Data["ca.crt"]))
	requireConversionService(t, k8s, helmNS)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "helm-sample",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	require.NoError(t, k8s.Create(ctx, ns))
	sample, err := ground.V1alpha1Sample()
	require.NoError(t, err)
	sample.Namespace = ns.Name
	require.NoError(t, k8s.Create(ctx, sample))
	took := waitFor(t, 3*time.Minute, "the v1alpha1 sample to be Ready", func() error {
		return readyCluster(ctx, k8s, client.ObjectKeyFromObject(sample))
	})
	t.Logf("v1alpha1 sample Ready after %s", took.Round(10*time.Millisecond))

	// An upgrade with a changed value rolls the operator; the certificate, the injected CA
	// and the running cluster are kept.
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = helmNS
	upgrade.WaitStrategy, upgrade.Timeout = kube.StatusWatcherStrategy, 3*time.Minute
	_, err = upgrade.RunWithContext(ctx, "dolphin", chrt, helmValues(g, 4))
	require.NoError(t, err)
	waitFor(t, 2*time.Minute, "one operator pod with the new value, answering the webhooks", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(helmNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || !slices.Contains(pods.Items[0].Spec.Containers[0].Args, "--max-concurrent-reconciles=4") {
			return fmt.Errorf("%d operator pods, not yet only the upgraded one", len(pods.Items))
		}
		return ground.ProbeWebhooks(ctx, g.RESTConfig())
	})
	again := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), again))
	require.Equal(t, secret.ResourceVersion, again.ResourceVersion, "a valid certificate is kept across upgrades")
	require.NoError(t, ground.CAInjected(ctx, k8s, secret.Data["ca.crt"]))
	require.NoError(t, readyCluster(ctx, k8s, client.ObjectKeyFromObject(sample)))
	require.Empty(t, ground.Forbidden(g.OperatorLogsIn(ctx, helmNS)), "the operator was refused API calls")

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy, uninstall.Timeout = kube.StatusWatcherStrategy, 2*time.Minute
	_, err = uninstall.Run("dolphin")
	require.NoError(t, err)
	requireUninstalled(t, k8s, client.ObjectKeyFromObject(sample))

	reinstallWithCertManager(t, g, k8s, client.ObjectKeyFromObject(sample))
}

// reinstallWithCertManager installs the chart with certManager.enabled into cmNS. No
// cert-manager controller runs here (its module on the Go proxy has no controller command):
// its CRDs are installed, so the chart's Issuers and Certificates must pass the real schemas,
// and the test writes the Secret the serving Certificate names as cert-manager's CA Issuer
// would (tls.crt and tls.key signed by a CA, ca.crt that CA). The operator must mount it,
// inject that CA into the webhook configurations and the CRDs, and serve with it.
func reinstallWithCertManager(t *testing.T, g *ground.Ground, k8s client.Client, cluster client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	applyCertManagerCRDs(t, g)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cmNS}}))
	now := time.Now()
	ca, err := pki.NewCA("cert-manager stand-in CA", now, 24*time.Hour, nil)
	require.NoError(t, err)
	base := "dolphin-webhook-service." + cmNS + ".svc"
	serving, err := pki.IssueServer(ca, []string{base, base + ".cluster.local"}, now, time.Hour, nil)
	require.NoError(t, err)
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: ground.WebhookCertSecret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": ca.CertPEM, corev1.TLSCertKey: serving.CertPEM,
			corev1.TLSPrivateKeyKey: serving.KeyPEM},
	}))

	chrt, err := loader.Load(chart.Dir())
	require.NoError(t, err)
	cfg := helmConfig(t, g, cmNS)
	vals := helmValues(g, 16)
	vals["certManager"] = map[string]any{"enabled": true}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "dolphin", cmNS
	// The CRDs stayed (helm uninstall keeps crds/). Helm 4 applies crds/ server-side, and
	// the operator now owns their conversion Service's namespace: applying them again
	// conflicts, so a reinstall skips them (--skip-crds), as docs/install.md says.
	install.SkipCRDs = true
	install.WaitStrategy, install.Timeout = kube.HookOnlyStrategy, 3*time.Minute
	_, err = install.RunWithContext(ctx, chrt, vals)
	require.NoError(t, err)
	waitFor(t, 3*time.Minute, "the webhooks to answer with the mounted certificate", func() error {
		return ground.ProbeWebhooks(ctx, g.RESTConfig())
	})
	require.NoError(t, ground.CAInjected(ctx, k8s, ca.CertPEM))
	requireConversionService(t, k8s, cmNS)
	for _, name := range []string{"dolphin-serving-cert", "dolphin-webhook-ca"} {
		cert := &unstructured.Unstructured{}
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: name}, cert), "the chart's %s", name)
	}
	// The operator keeps no Secret of its own in this mode: the one the test wrote is as it was.
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: ground.WebhookCertSecret}, secret))
	require.Equal(t, ca.CertPEM, secret.Data["ca.crt"])
	// A change through v1alpha1 (the conversion webhook, with the mounted certificate) that
	// only the new operator can observe: it has taken the orphaned cluster back.
	old := &mysqlv1alpha1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, cluster, old))
	require.NoError(t, k8s.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"backup":{"retention":8}}}`))))
	waitFor(t, 2*time.Minute, "the orphaned cluster's change observed by the new operator", func() error {
		return readyCluster(ctx, k8s, cluster)
	})
	require.Empty(t, ground.Forbidden(g.OperatorLogsIn(ctx, cmNS)), "the operator was refused API calls")
}

// applyCertManagerCRDs creates cert-manager's cert-manager.io CRDs from the files `make
// cert-manager-crds` keeps, and waits until they are served.
func applyCertManagerCRDs(t *testing.T, g *ground.Ground) {
	t.Helper()
	dir := os.Getenv("DOLPHIN_CERT_MANAGER_CRDS")
	files, err := filepath.Glob(filepath.Join(dir, "cert-manager.io_*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no cert-manager CRDs in %q (make cert-manager-crds; DOLPHIN_CERT_MANAGER_CRDS names them)", dir)
	_, err = envtest.InstallCRDs(g.RESTConfig(), envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true})
	require.NoError(t, err)
}

// helmConfig is the SDK's configuration for the ground's API server, releases kept in
// Secrets in namespace (as the helm binary keeps them).
func helmConfig(t *testing.T, g *ground.Ground, namespace string) *action.Configuration {
	t.Helper()
	getter := genericclioptions.NewConfigFlags(false)
	getter.KubeConfig = new(g.Kubeconfig)
	getter.Namespace = new(namespace)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	require.NoError(t, cfg.Init(getter, namespace, "secret"))
	return cfg
}

// helmValues points the chart at the ground's images, with workers reconciles at once.
func helmValues(g *ground.Ground, workers int) map[string]any {
	repo, tag := splitImage(g.OperatorImage)
	return map[string]any{
		"image":                   map[string]any{"repository": repo, "tag": tag},
		"maxConcurrentReconciles": workers,
		"operandImages": map[string]any{
			"mysql":    map[string]any{g.MySQLSeries(): g.MySQLImage},
			"exporter": g.ExporterImage,
		},
	}
}

func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// readyCluster is nil once the cluster's phase is Ready for its generation.
func readyCluster(ctx context.Context, k8s client.Client, key client.ObjectKey) error {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := k8s.Get(ctx, key, c); err != nil {
		return err
	}
	if c.Status.ObservedGeneration != c.Generation || c.Status.Phase != mysqlv1beta1.PhaseReady {
		return fmt.Errorf("phase %s, observed generation %d of %d", c.Status.Phase, c.Status.ObservedGeneration, c.Generation)
	}
	return nil
}

// requireConversionService checks both CRDs' conversion webhook leads to the operator's
// Service in namespace, whatever namespace crds/ was generated with.
func requireConversionService(t *testing.T, k8s client.Client, namespace string) {
	t.Helper()
	for _, name := range ground.CRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, crd))
		svc := crd.Spec.Conversion.Webhook.ClientConfig.Service
		require.Equal(t, namespace, svc.Namespace, name)
		require.Equal(t, "dolphin-webhook-service", svc.Name, name)
	}
}

// requireUninstalled checks the release's objects are gone and what the chart leaves is
// there: the CRDs (Helm never deletes crds/), the cluster, its StatefulSet and its volumes.
func requireUninstalled(t *testing.T, k8s client.Client, cluster client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, 2*time.Minute, "the operator's objects to be deleted", func() error {
		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: helmNS, Name: ground.OperatorDeployment}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: helmNS, Name: "dolphin-controller-manager"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dolphin-manager-role"}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dolphin-validating-webhook-configuration"}},
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "dolphin-mutating-webhook-configuration"}},
		} {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there (%w)", obj, obj.GetName(), err)
			}
		}
		return nil
	})
	for _, name := range ground.CRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, crd))
		require.Nil(t, crd.DeletionTimestamp, name)
	}
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, cluster, c), "the cluster outlives the operator")
	require.Nil(t, c.DeletionTimestamp)
	sts := &appsv1.StatefulSet{}
	require.NoError(t, k8s.Get(ctx, cluster, sts))
	pvcs := &corev1.PersistentVolumeClaimList{}
	require.NoError(t, k8s.List(ctx, pvcs, client.InNamespace(cluster.Namespace)))
	data := 0
	for _, p := range pvcs.Items {
		if strings.HasPrefix(p.Name, "data-"+cluster.Name+"-") && p.DeletionTimestamp == nil {
			data++
		}
	}
	require.Equal(t, int(*c.Spec.Instances), data, "every instance's data volume is kept")
}
