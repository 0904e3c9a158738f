package localcluster

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"k8s.io/client-go/kubernetes"

	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// DolphinOptions describe a local cluster running Dolphin as it runs for real.
type DolphinOptions struct {
	// RepoRoot is the repository: CRDs from config/crd/bases, webhooks from config/webhook.
	RepoRoot string
	// Manager is the operator binary; empty starts no operator (a cluster to run one
	// against by hand, from a debugger say).
	Manager string
	// Dir is the cluster's folder (default: a temporary one).
	Dir string
	// BinDir holds the control-plane binaries (default: as Config.BinDir).
	BinDir string
	// Log receives progress lines.
	Log io.Writer
	// WithoutCRDs leaves Dolphin's CRDs out, for whoever installs them (OLM); with it,
	// Manager must be empty.
	WithoutCRDs bool
}

// Dolphin is a running local cluster with the pod runner and the operator (nil when
// none was asked for).
type Dolphin struct {
	*Cluster
	Runner   *PodRunner
	Operator *Operator
}

func logOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// StartDolphin starts the control plane with Dolphin's CRDs, the MySQL pod runner, and
// the operator in a pod's place with its admission and conversion webhooks registered.
func StartDolphin(ctx context.Context, o DolphinOptions) (*Dolphin, error) {
	mysql, err := mysqld.Locate()
	if err != nil {
		return nil, err
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "MySQL: %s\n", mysql.Version)
	}
	if o.WithoutCRDs && o.Manager != "" {
		return nil, fmt.Errorf("localcluster: an operator needs its CRDs: set Manager or WithoutCRDs, not both")
	}
	cfg := Config{Dir: o.Dir, BinDir: o.BinDir, Log: o.Log}
	if !o.WithoutCRDs {
		cfg.CRDPaths = []string{filepath.Join(o.RepoRoot, "config", "crd", "bases")}
	}
	c, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d := &Dolphin{Cluster: c}
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	if d.Runner, err = c.StartPodRunner(PodRunnerOptions{MySQL: mysql, Log: o.Log, Init: dolphinInit(cs),
		ExtraArgs: dolphinArgs(cs, c.Dir(), logOrDiscard(o.Log))}); err != nil {
		c.Stop()
		return nil, err
	}
	if o.Manager == "" {
		return d, nil
	}
	d.Operator, err = c.StartOperator(ctx, OperatorOptions{
		Binary: o.Manager,
		// No cluster DNS here: instances are reached at their pod IPs.
		Args:             []string{"--mysql-addresses=pod-ip"},
		WebhookManifests: filepath.Join(o.RepoRoot, "config", "webhook", "manifests.yaml"),
		ConversionCRDs:   []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"},
		Ready:            ProbeDolphinWebhooks(c.RESTConfig()),
	})
	if err != nil {
		c.Stop()
		return nil, err
	}
	return d, nil
}
