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

	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/bundle"
	"github.com/dolphin-operator/dolphin/test/ground"
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
	csv := readCSV(t, filepath.Join(ground.RepoRoot(), "bundle", "manifests"))
	require.NotEmpty(t, csv.Spec.Replaces, "the bundle under development replaces a release")
	return csv.Spec.Replaces, csv.Name
}

// operatorEnv is what the test's Subscriptions add to the operator's container through
// spec.config.env, as a platform team mirroring images would: the ground's MySQL image for
// its series (RELATED_IMAGE_MYSQL_<series>), and the namespace from the downward API.
func operatorEnv(g *ground.Ground) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: resources.EnvName(g.MySQLSeries()), Value: g.MySQLImage},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
}

// startGround starts real nodes without Dolphin (OLM installs it) on which the operator
// image the CSVs name exists: this checkout's operator image, tagged as each bundle's
// containerImage (no registry serves the released images here).
func startGround(t *testing.T, nodes int) *ground.Ground {
	t.Helper()
	ctx := context.Background()
	g, err := ground.Start(ctx, ground.Options{Log: os.Stderr, Nodes: nodes, WithoutOperator: true})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	root := ground.RepoRoot()
	previous, _ := versions(t)
	for _, manifests := range []string{filepath.Join(root, "bundle", "manifests"),
		filepath.Join(root, "config", "catalog", "bundles", strings.TrimPrefix(previous, olm.Package+".v"), "manifests")} {
		require.NoError(t, g.TagImage(ctx, g.OperatorImage, readCSV(t, manifests).Annotations["containerImage"]))
	}
	return g
}

func readCSV(t *testing.T, manifests string) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifests, "dolphin-operator.clusterserviceversion.yaml"))
	require.NoError(t, err)
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.Unmarshal(raw, csv))
	return csv
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
	tmpl, err := olm.ReadTemplate(filepath.Join(ground.RepoRoot(), "config", "catalog", "template.yaml"))
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
	require.NoError(t, tmpl.Render(ctx, renderBin, ground.RepoRoot(), dir))
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

// waitOperator waits for the running pod of OLM's Deployment (not the pod with UID skip,
// the one a rollout replaced) and for the API server to reach its webhooks through OLM's
// Service and certificate; it follows the pod's log from then on.
func waitOperator(t *testing.T, g *ground.Ground, k8s client.Client, skip string) (*corev1.Pod, *ground.Log) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	took := ground.WaitFor(t, 3*time.Minute, "the operator Deployment's pod to run and its webhooks to answer", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(olm.OperatorsNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		var found *corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if string(p.UID) != skip && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				found = p
			}
		}
		if found == nil {
			return fmt.Errorf("%d pods, none new and running", len(pods.Items))
		}
		*pod = *found
		return ground.ProbeWebhooks(ctx, g.RESTConfig())
	})
	log, err := g.FollowLog(ctx, pod, "manager")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator %s log (end):\n%s", pod.Name, tail(log.String()))
		}
	})
	t.Logf("operator running as pod %s on %s (image %s); webhooks answer after %s", pod.Name, pod.Spec.NodeName,
		pod.Spec.Containers[0].Image, took.Round(10*time.Millisecond))
	return pod, log
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// forbidden lists the lines of an operator's log that report an API call refused by RBAC.
func forbidden(log *ground.Log) []string {
	var refused []string
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(line, "forbidden") {
			refused = append(refused, line)
		}
	}
	return refused
}

// requireNoForbidden fails on any API call the CSV's RBAC refused the operator.
func requireNoForbidden(t *testing.T, log *ground.Log) {
	t.Helper()
	require.Empty(t, forbidden(log), "the operator was refused API calls under the CSV's RBAC")
}

// waitConversionByOLM waits until both CRDs send conversions to the Service OLM made for
// the operator's Deployment, with OLM's CA. The catalog operator applies the CRDs as the
// bundle has them (pointing at config/default's Service) and the olm operator then rewires
// them; until it has, a write through v1alpha1 fails, so a user (and this test) waits.
func waitConversionByOLM(t *testing.T, k8s client.Client) {
	t.Helper()
	took := ground.WaitFor(t, time.Minute, "OLM to wire the CRDs' conversion webhook", func() error {
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
	spec := readCSV(t, manifests).Spec.InstallStrategy.StrategySpec
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
func requireRefusedOnlyWhatNextAdds(t *testing.T, log *ground.Log, previous string) {
	t.Helper()
	root := ground.RepoRoot()
	before := csvRights(t, filepath.Join(root, "config", "catalog", "bundles", strings.TrimPrefix(previous, olm.Package+".v"), "manifests"))
	after := csvRights(t, filepath.Join(root, "bundle", "manifests"))
	refused := forbidden(log)
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
