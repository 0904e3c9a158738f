// Package ground is Dolphin on the local test ground: a cluster of real nodes
// (test/localcluster) running the images hack/images built, with the operator installed as
// a user installs it without OLM — `make deploy`, its Deployment's pod on a node, its
// ServiceAccount's RBAC, its self-issued webhook certificate — pointed at the ground's
// MySQL image through its RELATED_IMAGE_MYSQL_<series> setting.
//
// It also holds what every cluster tier shares: the repository's root, the API scheme and
// the polling helper.
package ground

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// Where `make deploy` puts the operator.
const (
	OperatorNamespace  = "dolphin-system"
	OperatorDeployment = "dolphin-controller-manager"
	// DefaultNodes lets each instance of a 3-instance cluster have a node of its own (the
	// operator prefers that), so that losing a node loses one instance.
	DefaultNodes = 3
)

// Options say what to start.
type Options struct {
	// Nodes is the number of nodes; default DefaultNodes.
	Nodes int
	// Dir is the cluster's folder (default: a temporary one); BinDir holds the tools
	// (default: $DOLPHIN_BIN_DIR).
	Dir, BinDir string
	// Images is the list hack/images wrote; default $DOLPHIN_IMAGES.
	Images string
	// Log receives progress lines.
	Log io.Writer
	// WithoutOperator starts the cluster only: no CRDs, no operator (for tiers that
	// install it their own way: `make deploy` under test, OLM).
	WithoutOperator bool
	// MoreImages are lists (as hack/images writes them) of further images the nodes hold,
	// such as the previous build's operator (hack/previous-image).
	MoreImages []string
	// Mirrors are registry hosts the nodes pull from the cluster's own registry
	// (localcluster.Config.Mirrors): the OLM tier pushes release images there.
	Mirrors []string
}

// Ground is a running cluster, with the operator unless asked otherwise.
type Ground struct {
	*localcluster.Cluster
	// OperatorImage and MySQLImage are the images' names; MySQLVersion what the MySQL
	// image runs (e.g. 9.7.4).
	OperatorImage, MySQLImage, MySQLVersion string
	// ExporterImage is mysqld_exporter's image.
	ExporterImage string
	log           io.Writer
}

// Start brings up the ground and, unless WithoutOperator, installs the operator with
// `make deploy` and waits until it runs and its webhooks answer.
func Start(ctx context.Context, o Options) (*Ground, error) {
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	g, imgs, err := withImages(&o)
	if err != nil {
		return nil, err
	}
	cfg := localcluster.Config{Dir: o.Dir, BinDir: o.BinDir, Log: o.Log, Nodes: o.Nodes, Images: imgs, Mirrors: o.Mirrors}
	for _, img := range imgs {
		switch repo, _, _ := strings.Cut(img.Name, ":"); {
		case repo == CoreDNSRepo:
			cfg.CoreDNSImage = img.Name
		case img.Name == PauseImage:
			cfg.PauseImage = img.Name
		}
	}
	for _, list := range o.MoreImages {
		more, err := localcluster.ReadImages(list)
		if err != nil {
			return nil, err
		}
		cfg.Images = append(cfg.Images, more...)
	}
	if g.Cluster, err = localcluster.Start(ctx, cfg); err != nil {
		return nil, err
	}
	if o.WithoutOperator {
		return g, nil
	}
	if err := g.Deploy(ctx); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// EnvGround names the folder of a running ground's cluster (its owner serving it): test
// packages started inside the ground's namespaces attach to it instead of starting one.
const EnvGround = "DOLPHIN_GROUND"

// Attach returns the ground whose cluster folder is dir, run by another process of these
// namespaces (`ground demo --run`, which sets EnvGround), with the operator as that process
// installed it. Stop ends only what this process started.
func Attach(dir string, o Options) (*Ground, error) {
	g, _, err := withImages(&o)
	if err != nil {
		return nil, err
	}
	if g.Cluster, err = localcluster.Attach(dir); err != nil {
		return nil, err
	}
	return g, nil
}

// withImages defaults o's image list and log and returns a Ground that knows the images'
// names, with the list.
func withImages(o *Options) (*Ground, []localcluster.Image, error) {
	if o.Images == "" {
		o.Images = os.Getenv("DOLPHIN_IMAGES")
	}
	if o.Images == "" {
		return nil, nil, errors.New("ground: no image list: set DOLPHIN_IMAGES (`make images` writes bin/images.json)")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// controller-runtime's clients log through its global logger (the API server's
	// warnings, for one); unset, it prints a stack trace on first use instead.
	ctrllog.SetLogger(zap.New(zap.WriteTo(o.Log)))
	imgs, err := localcluster.ReadImages(o.Images)
	if err != nil {
		return nil, nil, err
	}
	g := &Ground{log: o.Log}
	for _, img := range imgs {
		switch repo, tag, _ := strings.Cut(img.Name, ":"); repo {
		case OperatorRepo:
			g.OperatorImage = img.Name
		case MySQLRepo:
			g.MySQLImage, g.MySQLVersion = img.Name, tag
		case ExporterRepo:
			g.ExporterImage = img.Name
		}
	}
	if g.OperatorImage == "" || g.MySQLImage == "" || g.ExporterImage == "" {
		return nil, nil, fmt.Errorf("ground: %s lacks the operator, MySQL or exporter image (run `make images`)", o.Images)
	}
	return g, imgs, nil
}

// MySQLSeries is the series of the ground's MySQL (9.7 for 9.7.4): what a cluster's
// spec.mysql.version may say to run it.
func (g *Ground) MySQLSeries() string {
	parts := strings.SplitN(g.MySQLVersion, ".", 3)
	return parts[0] + "." + parts[1]
}

// DeployEnv is the environment `make deploy` needs to install the ground's images. The
// overlay goes to the cluster's folder and the generated manifests are not regenerated
// (the make target that runs the tests did that): grounds of one checkout deploy at once.
func (g *Ground) DeployEnv() []string {
	return []string{"KUBECONFIG=" + g.Kubeconfig, "IMG=" + g.OperatorImage,
		resources.EnvName(g.MySQLSeries()) + "=" + g.MySQLImage, resources.EnvExporterImage + "=" + g.ExporterImage,
		"DEPLOY_DIR=" + filepath.Join(g.Dir(), "deploy"), "DEPLOY_NO_REGEN=1"}
}

// Make runs a target of the repository's Makefile against the ground, with DeployEnv, for
// at most 5 minutes.
func (g *Ground) Make(ctx context.Context, target string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", RepoRoot(), target)
	cmd.Env = append(os.Environ(), g.DeployEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("make %s: %w\n%s", target, err, out)
	}
	return out, nil
}

// Deploy installs the operator with `make deploy` and waits until its Deployment is
// available and the API server calls its webhooks.
func (g *Ground) Deploy(ctx context.Context) error {
	start := time.Now()
	if _, err := g.Make(ctx, "deploy"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	var last error
	err = Poll(ctx, 3*time.Minute, func() error {
		d, err := cs.AppsV1().Deployments(OperatorNamespace).Get(ctx, OperatorDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("operator Deployment not available (%d ready)", d.Status.ReadyReplicas)
		}
		last = ProbeWebhooks(ctx, g.RESTConfig())
		return last
	})
	if err != nil {
		return fmt.Errorf("the operator did not come up: %w\n%s", err, g.OperatorLogs(ctx))
	}
	fmt.Fprintf(g.log, "ground: operator deployed and answering its webhooks after %s\n", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// OperatorLogs returns the end of the operator's log (the current container of each of
// its pods), for failure messages.
func (g *Ground) OperatorLogs(ctx context.Context) string {
	return g.operatorLogs(ctx, OperatorNamespace, new(int64(200)))
}

// OperatorLogsIn returns the whole log of the current container of each operator pod in
// namespace (an operator installed somewhere else than config/default's namespace).
func (g *Ground) OperatorLogsIn(ctx context.Context, namespace string) string {
	return g.operatorLogs(ctx, namespace, nil)
}

// FullOperatorLogs returns the whole log of the current container of each operator pod.
func (g *Ground) FullOperatorLogs(ctx context.Context) string {
	return g.operatorLogs(ctx, OperatorNamespace, nil)
}

func (g *Ground) operatorLogs(ctx context.Context, namespace string, tail *int64) string {
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
	if err != nil {
		return err.Error()
	}
	var b bytes.Buffer
	for _, p := range pods.Items {
		raw, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "manager", TailLines: tail}).DoRaw(ctx)
		fmt.Fprintf(&b, "--- operator pod %s (%v):\n%s\n", p.Name, err, raw)
	}
	return b.String()
}

// RepoRoot is the repository's top folder, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme knows the built-in kinds, CRDs and both versions of Dolphin's API.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		appsv1.AddToScheme, mysqlv1alpha1.AddToScheme, mysqlv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Client is a controller-runtime client for the ground with Scheme.
func (g *Ground) Client() (client.Client, error) {
	return client.New(g.RESTConfig(), client.Options{Scheme: Scheme()})
}
