package olm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/bundle"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/olm"
	"github.com/dolphin-operator/dolphin/test/release"
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// operatorDeployment is the Deployment OLM makes from the CSV (config/manager's name).
const operatorDeployment = "dolphin-controller-manager"

// versions reads the version under development and the release it replaces from bundle/.
func versions(t *testing.T) (previous, next string) {
	t.Helper()
	csv := readCSV(t, filepath.Join(ground.RepoRoot(), "bundle", "manifests"))
	require.NotEmpty(t, csv.Spec.Replaces, "the bundle under development replaces a release")
	return csv.Spec.Replaces, csv.Name
}

// version is a CSV name's version: dolphin-operator.v0.1.0 -> 0.1.0.
func version(csv string) string { return strings.TrimPrefix(csv, olm.Package+".v") }

// operatorEnv is what the test's Subscriptions add to the operator's container through
// spec.config.env, as a platform team mirroring images would: the ground's MySQL image for
// its series (RELATED_IMAGE_MYSQL_<series>) and its exporter image, and the namespace from
// the downward API.
func operatorEnv(g *ground.Ground) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: resources.EnvName(g.MySQLSeries()), Value: g.MySQLImage},
		{Name: resources.EnvExporterImage, Value: g.ExporterImage},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
}

// startGround starts real nodes without Dolphin (OLM installs it) whose containerd pulls
// quay.io's images from the ground's registry, and pushes there every release image
// `make release-images` built: each release's operator and bundle, opm's and OLM's.
func startGround(t *testing.T, nodes int) (*ground.Ground, *olm.Images) {
	t.Helper()
	ctx := context.Background()
	g, err := ground.Start(ctx, ground.Options{Log: os.Stderr, Nodes: nodes, WithoutOperator: true,
		Mirrors: []string{release.Host}})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	start := time.Now()
	imgs, err := olm.PushImages(ctx, g.Registry, "", t.TempDir())
	require.NoError(t, err)
	t.Logf("release images pushed to the ground's registry in %s", time.Since(start).Round(10*time.Millisecond))
	return g, imgs
}

func readCSV(t *testing.T, manifests string) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifests, "dolphin-operator.clusterserviceversion.yaml"))
	require.NoError(t, err)
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.Unmarshal(raw, csv))
	return csv
}

func installOLM(t *testing.T, c *localcluster.Cluster, imgs *olm.Images) *olm.OLM {
	t.Helper()
	m, err := olm.Install(context.Background(), c, olm.Options{Log: os.Stderr, OPMImage: imgs.OPM(), UtilImage: imgs.Util()})
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

// publish renders tmpl as `make catalog` does (bundles by image), checks its upgrade graph
// with the distribution's graph test, builds and pushes its catalog image tagged tag, and
// points the CatalogSource at it.
func publish(t *testing.T, m *olm.OLM, imgs *olm.Images, tag string, tmpl *olm.Template) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), tag)
	renderBin := filepath.Join(os.Getenv("DOLPHIN_BIN_DIR"), "catalog-render")
	require.NoError(t, tmpl.Render(ctx, renderBin, ground.RepoRoot(), dir))
	cat, err := bundle.LoadCatalog(filepath.Join(dir, "dolphin-operator", "catalog.yaml"))
	require.NoError(t, err)
	for ch := range cat.Channels[olm.Package] {
		head, err := cat.CheckChannel(olm.Package, ch)
		require.NoError(t, err, "catalog %s, channel %s", tag, ch)
		t.Logf("catalog %s: channel %s, head %s", tag, ch, head)
	}
	image, built, err := imgs.PublishCatalog(ctx, dir, tag)
	require.NoError(t, err)
	took, err := m.SetCatalogSource(ctx, catalogSource, image)
	require.NoError(t, err)
	t.Logf("catalog image %s built and pushed in %s; CatalogSource %s READY on it after %s", image,
		built.Round(10*time.Millisecond), catalogSource, took.Round(10*time.Millisecond))
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

// settledOperator waits for the operator's Deployment to have rolled out (one available
// pod of its latest ReplicaSet, no other) and returns that pod and its log.
func settledOperator(t *testing.T, g *ground.Ground, k8s client.Client) (*corev1.Pod, *ground.Log) {
	t.Helper()
	ctx := context.Background()
	var uid string
	ground.WaitFor(t, 3*time.Minute, "the operator's Deployment to have rolled out", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: olm.OperatorsNamespace, Name: operatorDeployment}, d); err != nil {
			return err
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.Replicas != 1 || st.UpdatedReplicas != 1 || st.AvailableReplicas != 1 {
			return fmt.Errorf("deployment status %+v", st)
		}
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(olm.OperatorsNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
			return fmt.Errorf("%d operator pods", len(pods.Items))
		}
		uid = string(pods.Items[0].UID)
		return nil
	})
	pod, log := waitOperator(t, g, k8s, "")
	require.Equal(t, uid, string(pod.UID), "the rolled-out pod")
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

// requireUnpackedByJob checks that OLM unpacked csv's bundle from its image with one of its
// Jobs (in the catalog's namespace) and that the Job succeeded: the pull init container
// runs the bundle image itself, on a node.
func requireUnpackedByJob(t *testing.T, k8s client.Client, csv string) {
	t.Helper()
	bundleImage := release.BundleRepo + ":v" + version(csv)
	jobs := &batchv1.JobList{}
	require.NoError(t, k8s.List(context.Background(), jobs, client.InNamespace(olm.Namespace)))
	var seen []string
	for _, j := range jobs.Items {
		for _, c := range j.Spec.Template.Spec.InitContainers {
			seen = append(seen, c.Image)
			if c.Name == "pull" && c.Image == bundleImage {
				require.Positive(t, j.Status.Succeeded, "unpack Job %s of %s succeeded", j.Name, bundleImage)
				t.Logf("bundle %s unpacked by Job %s", bundleImage, j.Name)
				return
			}
		}
	}
	t.Fatalf("no unpack Job ran %s (init containers seen: %v)", bundleImage, seen)
}

// succeededAt is when the timeline saw object reach Succeeded.
func succeededAt(t *testing.T, tl *olm.Timeline, object string) time.Duration {
	t.Helper()
	at, ok := tl.At(object, string(operatorsv1alpha1.CSVPhaseSucceeded))
	require.True(t, ok, "the timeline saw %s succeed", object)
	return at
}
