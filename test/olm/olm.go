package olm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// Where OLM runs and where operators for all namespaces are installed, as OLM's own
// manifests lay it out on a real cluster.
const (
	Namespace           = "olm"
	OperatorsNamespace  = "operators"
	GlobalOperatorGroup = "global-operators"
	fieldOwner          = "dolphin-olm-test"
)

// Options say where OLM's binaries and CRDs are.
type Options struct {
	// BinDir holds olm, catalog-operator and opm; default $DOLPHIN_BIN_DIR.
	BinDir string
	// CRDDir is OLM's deploy/chart/crds from the pinned module; default $DOLPHIN_OLM_CRDS.
	CRDDir string
	// OPMImage and UtilImage are the images the catalog operator's bundle unpack Jobs
	// run (its --opmImage and --util-image), pulled from the ground's registry.
	OPMImage, UtilImage string
	// Log receives progress lines; default: discarded.
	Log io.Writer
}

// OLM is OLM running on a local cluster.
type OLM struct {
	cluster *localcluster.Cluster
	k8s     client.Client
	opts    Options
	procs   map[string]*localcluster.Process
}

// Scheme knows the core, CRD, OLM and Dolphin types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(operatorsv1alpha1.AddToScheme(s))
	utilruntime.Must(operatorsv1.AddToScheme(s))
	utilruntime.Must(mysqlv1alpha1.AddToScheme(s))
	utilruntime.Must(mysqlv1beta1.AddToScheme(s))
	return s
}

// Install applies OLM's CRDs, starts the olm and catalog operators and creates the
// namespace with the global OperatorGroup (AllNamespaces), as OLM's release manifests do.
func Install(ctx context.Context, c *localcluster.Cluster, o Options) (*OLM, error) {
	if o.BinDir == "" {
		o.BinDir = os.Getenv("DOLPHIN_BIN_DIR")
	}
	if o.CRDDir == "" {
		o.CRDDir = os.Getenv("DOLPHIN_OLM_CRDS")
	}
	if o.BinDir == "" || o.CRDDir == "" {
		return nil, errors.New("olm: set DOLPHIN_BIN_DIR and DOLPHIN_OLM_CRDS (`make test-olm` does)")
	}
	if o.OPMImage == "" || o.UtilImage == "" {
		return nil, errors.New("olm: Options.OPMImage and UtilImage are required (the unpack Jobs run them)")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	k8s, err := client.New(c.RESTConfig(), client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	m := &OLM{cluster: c, k8s: k8s, opts: o, procs: map[string]*localcluster.Process{}}
	start := time.Now()
	if err := m.applyCRDs(ctx); err != nil {
		return nil, err
	}
	for _, ns := range []string{Namespace, OperatorsNamespace} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("while creating namespace %s: %w", ns, err)
		}
	}
	// Both operators serve metrics on a fixed port (:8080 without TLS, :8443 with it) on
	// every address of the namespace. Neither is given TLS: :8443 stays free for the
	// operator under test, whose CSV puts its metrics there; the catalog operator then
	// finds :8080 taken, logs it and runs on without metrics, which nothing here reads.
	if err := m.run("olm", "olm", "--namespace", Namespace, "--writeStatusName", ""); err != nil {
		return nil, err
	}
	if err := m.run("catalog-operator", "catalog-operator", "--kubeconfig", c.Kubeconfig, "--namespace", Namespace,
		"--writeStatusName", "", "--opmImage", o.OPMImage, "--util-image", o.UtilImage); err != nil {
		return nil, err
	}
	og := &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: GlobalOperatorGroup, Namespace: OperatorsNamespace}}
	if err := k8s.Create(ctx, og); err != nil {
		return nil, fmt.Errorf("while creating the global OperatorGroup: %w", err)
	}
	m.logf("OLM's CRDs applied and its operators started in %s", time.Since(start).Round(10*time.Millisecond))
	return m, nil
}

// Client is an admin client that knows OLM's and Dolphin's types.
func (m *OLM) Client() client.Client { return m.k8s }

// Healthy returns an error when one of OLM's processes (or a catalog server) has exited.
func (m *OLM) Healthy() error {
	for name, p := range m.procs {
		if err := p.Exited(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// LogTails returns the end of each OLM process's log, for a failing test's report.
func (m *OLM) LogTails() string {
	names := make([]string, 0, len(m.procs))
	for n := range m.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", n, m.procs[n].LogTail())
	}
	return b.String()
}

// run starts bin from BinDir as the process name.
func (m *OLM) run(name, bin string, args ...string) error {
	p, err := m.cluster.Run(name, filepath.Join(m.opts.BinDir, bin), nil, args...)
	if err != nil {
		return fmt.Errorf("olm: %w (`make olm opm` builds it)", err)
	}
	m.procs[name] = p
	return nil
}

// applyCRDs applies OLM's CRDs server-side (the CSV's is too big for the annotation
// client-side apply keeps) and waits until each is established.
func (m *OLM) applyCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(m.opts.CRDDir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("olm: reading %s: %w", m.opts.CRDDir, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("olm: no CRDs in %s", m.opts.CRDDir)
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("while reading %s: %w", f, err)
		}
		u := &unstructured.Unstructured{}
		if err := k8syaml.Unmarshal(raw, &u.Object); err != nil {
			return fmt.Errorf("while parsing %s: %w", f, err)
		}
		if err := m.k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("while applying %s: %w", filepath.Base(f), err)
		}
		names = append(names, u.GetName())
	}
	return poll(ctx, time.Minute, "OLM's CRDs to be established", func() error {
		for _, n := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := m.k8s.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return err
			}
			if !established(crd) {
				return fmt.Errorf("%s is not established", n)
			}
		}
		return nil
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func (m *OLM) logf(format string, args ...any) {
	fmt.Fprintf(m.opts.Log, "olm: "+format+"\n", args...)
}

// poll waits with ground.Poll; the error says what was awaited.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	if err := ground.Poll(ctx, timeout, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
