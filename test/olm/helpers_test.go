package olm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/test/bundle"
	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/olm"
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// versions reads the version under development and the release it replaces from bundle/.
func versions(t *testing.T) (previous, next string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "bundle", "manifests", "dolphin-operator.clusterserviceversion.yaml"))
	require.NoError(t, err)
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.Unmarshal(raw, csv))
	require.NotEmpty(t, csv.Spec.Replaces, "the bundle under development replaces a release")
	return csv.Spec.Replaces, csv.Name
}

// operatorEnv is what the test's Subscriptions add to the operator's container through
// spec.config.env, as a platform team would for its cluster: instances are reached at their
// pod IPs (there is no cluster DNS here), and the leader-election namespace comes from the
// downward API (a real pod reads it from its ServiceAccount mount, a file a process on this
// ground cannot have at its absolute path).
var operatorEnv = []corev1.EnvVar{
	{Name: "DOLPHIN_MYSQL_ADDRESSES", Value: "pod-ip"},
	{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
}

func installOLM(t *testing.T, c *localcluster.Cluster) *olm.OLM {
	t.Helper()
	m, err := olm.Install(context.Background(), c, olm.Options{Log: os.Stderr})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("OLM logs (end):\n%s", m.LogTails())
		}
	})
	return m
}

func readTemplate(t *testing.T) *olm.Template {
	t.Helper()
	tmpl, err := olm.ReadTemplate(filepath.Join(envtest.RepoRoot(), "config", "catalog", "template.yaml"))
	require.NoError(t, err)
	return tmpl
}

// serve renders tmpl with the repository's bundles inline, checks its upgrade graph with
// the distribution's graph test, and serves it with opm on port.
func serve(t *testing.T, m *olm.OLM, name string, tmpl *olm.Template, port int) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), name)
	renderBin := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), "catalog-render")
	require.NoError(t, tmpl.Render(ctx, renderBin, envtest.RepoRoot(), dir))
	cat, err := bundle.LoadCatalog(filepath.Join(dir, "dolphin-operator", "catalog.yaml"))
	require.NoError(t, err)
	for ch := range cat.Channels[olm.Package] {
		head, err := cat.CheckChannel(olm.Package, ch)
		require.NoError(t, err, "catalog %s, channel %s", name, ch)
		t.Logf("catalog %s: channel %s, head %s", name, ch, head)
	}
	addr, err := m.ServeCatalog(ctx, name, dir, port)
	require.NoError(t, err)
	return addr
}

// publish serves tmpl as the catalog name on port and points the CatalogSource at it.
func publish(t *testing.T, m *olm.OLM, name string, tmpl *olm.Template, port int) {
	t.Helper()
	took, err := m.SetCatalogSource(context.Background(), catalogSource, serve(t, m, name, tmpl, port))
	require.NoError(t, err)
	t.Logf("CatalogSource %s READY on catalog %s after %s", catalogSource, name, took.Round(10*time.Millisecond))
}

// waitInstalled waits for csv to succeed and its InstallPlan to complete.
func waitInstalled(t *testing.T, m *olm.OLM, csv string) {
	t.Helper()
	_, err := m.WaitForCSV(context.Background(), csv, 3*time.Minute)
	require.NoError(t, err)
	requirePlanComplete(t, m, csv)
}

// runOperator runs the manager binary as the container of the pod OLM's Deployment made
// (not the pod with UID skip, the one a rollout replaced), under the CSV's ServiceAccount,
// and waits until the API server reaches its webhooks through OLM's Service and certificate.
func runOperator(t *testing.T, c *localcluster.Cluster, k8s client.Client, skip string) (*localcluster.Process, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	envtest.WaitFor(t, 2*time.Minute, "the operator Deployment's pod", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(olm.OperatorsNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if string(p.UID) != skip && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("%d pods, none new with an IP", len(pods.Items))
	})
	bin := os.Getenv("DOLPHIN_MANAGER_BIN")
	require.NotEmpty(t, bin, "DOLPHIN_MANAGER_BIN names the manager binary (make test-olm builds it)")
	// As the kubelet would, wait for the Secrets the pod mounts: during an upgrade OLM
	// writes the webhook certificate's Secret for the new CSV after its Deployment changed.
	var p *localcluster.Process
	mounted := envtest.WaitFor(t, time.Minute, "the pod's volumes to be there", func() error {
		var err error
		if p, err = c.RunAsPod(ctx, pod, "manager", bin); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("running the operator as pod %s: %v", pod.Name, err)
		}
		return err
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator %s log (end):\n%s", pod.Name, p.LogTail())
		}
		p.Stop(5 * time.Second)
	})
	took := envtest.WaitFor(t, time.Minute, "the API server to call the operator's webhooks", func() error {
		if err := p.Exited(); err != nil {
			return fmt.Errorf("the operator exited: %w\n%s", err, p.LogTail())
		}
		return localcluster.ProbeDolphinWebhooks(c.RESTConfig())(ctx)
	})
	t.Logf("operator running as pod %s (image %s) after its volumes waited %s; webhooks answer after %s", pod.Name,
		pod.Spec.Containers[0].Image, mounted.Round(10*time.Millisecond), took.Round(10*time.Millisecond))
	return p, pod
}

// requireNoForbidden fails on any API call the CSV's RBAC refused the operator.
func requireNoForbidden(t *testing.T, p *localcluster.Process) {
	t.Helper()
	refused, err := p.ForbiddenCalls()
	require.NoError(t, err)
	require.Empty(t, refused, "the operator was refused API calls under the CSV's RBAC")
}

// waitConversionByOLM waits until both CRDs send conversions to the Service OLM made for
// the operator's Deployment, with OLM's CA. The catalog operator applies the CRDs as the
// bundle has them (pointing at config/default's Service) and the olm operator then rewires
// them; until it has, a write through v1alpha1 fails, so a user (and this test) waits.
func waitConversionByOLM(t *testing.T, k8s client.Client) {
	t.Helper()
	took := envtest.WaitFor(t, time.Minute, "OLM to wire the CRDs' conversion webhook", func() error {
		for _, name := range []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			conv := crd.Spec.Conversion
			if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
				return fmt.Errorf("%s has no conversion webhook", name)
			}
			svc := conv.Webhook.ClientConfig.Service
			if svc.Namespace != olm.OperatorsNamespace || svc.Name != "dolphin-controller-manager-service" ||
				len(conv.Webhook.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("%s converts through %s/%s (CA: %d bytes)", name, svc.Namespace, svc.Name, len(conv.Webhook.ClientConfig.CABundle))
			}
		}
		return nil
	})
	t.Logf("conversion webhook wired by OLM after %s", took.Round(10*time.Millisecond))
}

// right is one verb on one resource of one API group.
type right struct{ group, resource, verb string }

// csvRights lists the rights a bundle's CSV asks for (cluster-wide and namespaced alike:
// for an AllNamespaces install OLM grants both cluster-wide).
func csvRights(t *testing.T, manifests string) map[right]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifests, "dolphin-operator.clusterserviceversion.yaml"))
	require.NoError(t, err)
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.Unmarshal(raw, csv))
	spec := csv.Spec.InstallStrategy.StrategySpec
	rights := map[right]bool{}
	for _, p := range append(spec.ClusterPermissions, spec.Permissions...) {
		for _, r := range p.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						rights[right{g, res, v}] = true
					}
				}
			}
		}
	}
	return rights
}

var refusal = regexp.MustCompile(`cannot (\w+) resource \\?"([^"\\]+)\\?" in API group \\?"([^"\\]*)\\?"`)

// requireRefusedOnlyWhatNextAdds checks the operator run under the previous release's CSV:
// it is this checkout's binary, so it may be refused the rights the next release's CSV adds
// (that is why the next release adds them), and nothing else.
func requireRefusedOnlyWhatNextAdds(t *testing.T, p *localcluster.Process, previous string) {
	t.Helper()
	root := envtest.RepoRoot()
	before := csvRights(t, filepath.Join(root, "config", "catalog", "bundles", strings.TrimPrefix(previous, olm.Package+".v"), "manifests"))
	after := csvRights(t, filepath.Join(root, "bundle", "manifests"))
	refused, err := p.ForbiddenCalls()
	require.NoError(t, err)
	for _, line := range refused {
		m := refusal.FindStringSubmatch(line)
		require.NotNil(t, m, "a refusal that names no right: %s", line)
		r := right{group: m[3], resource: m[2], verb: m[1]}
		require.True(t, after[r] && !before[r], "refused %v, which the next release does not add: %s", r, line)
	}
	t.Logf("under %s's RBAC: %d refused calls, each for a right the next release adds", previous, len(refused))
}

// succeededAt is when the timeline saw object reach Succeeded.
func succeededAt(t *testing.T, tl *olm.Timeline, object string) time.Duration {
	t.Helper()
	at, ok := tl.At(object, string(operatorsv1alpha1.CSVPhaseSucceeded))
	require.True(t, ok, "the timeline saw %s succeed", object)
	return at
}
