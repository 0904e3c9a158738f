package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/envtest"
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

func scheme() *runtime.Scheme {
	s := envtest.Scheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// make runs a target of the repository's Makefile against the local cluster.
func makeTarget(t *testing.T, cluster *localcluster.Cluster, target string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-C", envtest.RepoRoot(), target)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	t.Logf("make %s:\n%s", target, out)
	require.NoError(t, err, "make %s", target)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return envtest.WaitFor(t, timeout, what, cond)
}

func TestDeployWithSelfIssuedWebhookCertificates(t *testing.T) {
	bin := os.Getenv("DOLPHIN_MANAGER_BIN")
	require.NotEmpty(t, bin, "DOLPHIN_MANAGER_BIN names the manager binary (make test-e2e builds it)")
	ctx := context.Background()
	// No CRDs up front: `make deploy` installs them, as it would on a real cluster.
	cluster, err := localcluster.Start(ctx, localcluster.Config{Log: os.Stderr})
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	k8s, err := client.New(cluster.RESTConfig(), client.Options{Scheme: scheme()})
	require.NoError(t, err)

	start := time.Now()
	makeTarget(t, cluster, "deploy")
	pod, err := cluster.PodOf(ctx, operatorNS, map[string]string{"control-plane": "controller-manager"})
	require.NoError(t, err)
	operator := runOperator(t, cluster, pod, bin)
	took := waitFor(t, time.Minute, "the API server to call the operator's webhooks", func() error {
		if err := operator.Exited(); err != nil {
			return fmt.Errorf("the operator exited: %w\n%s", err, operator.LogTail())
		}
		return localcluster.ProbeDolphinWebhooks(cluster.RESTConfig())(ctx)
	})
	t.Logf("webhooks answer %s after the operator started (%s after make deploy began)", took, time.Since(start).Round(time.Millisecond))

	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: certSecret}, secret))
	requireCAInjected(t, k8s, secret.Data["ca.crt"])

	// Conversion: a v1alpha1 sample is stored as v1beta1 and read back both ways.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploy-sample"}}
	require.NoError(t, k8s.Create(ctx, ns))
	sample := readSample(t)
	sample.Namespace = ns.Name
	require.NoError(t, k8s.Create(ctx, sample))
	// Reconciled by the operator (its StatefulSet exists, status observed); reaching Ready
	// needs MySQL replication, which test/e2e covers: the pods here have no mysqld.
	hub := &mysqlv1beta1.MySQLCluster{}
	waitFor(t, time.Minute, "the v1alpha1 sample to be reconciled", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sample), hub); err != nil {
			return err
		}
		if hub.Status.ObservedGeneration != hub.Generation {
			return fmt.Errorf("observed generation %d of %d", hub.Status.ObservedGeneration, hub.Generation)
		}
		return k8s.Get(ctx, client.ObjectKeyFromObject(sample), &appsv1.StatefulSet{})
	})
	require.Equal(t, *sample.Spec.Replicas, *hub.Spec.Instances, "v1alpha1 replicas read as v1beta1 instances")
	back := &mysqlv1alpha1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sample), back))
	require.Equal(t, sample.Spec, back.Spec)

	// A restart keeps the chain: the Secret is not rewritten, the webhooks keep answering.
	operator.Stop(10 * time.Second)
	operator = runOperator(t, cluster, pod, bin)
	waitFor(t, time.Minute, "the webhooks after a restart", func() error {
		return localcluster.ProbeDolphinWebhooks(cluster.RESTConfig())(ctx)
	})
	again := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), again))
	require.Equal(t, secret.ResourceVersion, again.ResourceVersion, "a valid certificate is kept across restarts")

	require.NoError(t, k8s.Delete(ctx, sample))
	waitFor(t, time.Minute, "the sample to be deleted", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sample), back); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	requireNoForbidden(t, operator)
	operator.Stop(10 * time.Second)

	makeTarget(t, cluster, "undeploy")
	requireUndeployed(t, k8s)
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

func runOperator(t *testing.T, cluster *localcluster.Cluster, pod *corev1.Pod, bin string) *localcluster.Process {
	t.Helper()
	p, err := cluster.RunAsPod(context.Background(), pod, "manager", bin)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (end):\n%s", p.LogTail())
		}
		p.Stop(5 * time.Second)
	})
	return p
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
	raw, err := os.ReadFile(envtest.RepoRoot() + "/config/samples/mysql_v1alpha1_mysqlcluster.yaml")
	require.NoError(t, err)
	c := &mysqlv1alpha1.MySQLCluster{}
	require.NoError(t, yaml.Unmarshal(raw, c))
	return c
}

// requireNoForbidden fails on any call the ServiceAccount's RBAC refused: the operator ran
// with exactly what config/default grants it.
func requireNoForbidden(t *testing.T, p *localcluster.Process) {
	t.Helper()
	refused, err := p.ForbiddenCalls()
	require.NoError(t, err)
	require.Empty(t, refused, "the operator was refused API calls")
}
