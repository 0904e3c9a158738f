package e2e_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	runner  *localcluster.PodRunner
	k8s     client.Client
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	bin := os.Getenv("DOLPHIN_MANAGER_BIN")
	if bin == "" {
		return fail(fmt.Errorf("DOLPHIN_MANAGER_BIN names the manager binary (make test-e2e builds it)"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := localcluster.StartDolphin(ctx, localcluster.DolphinOptions{RepoRoot: envtest.RepoRoot(), Manager: bin, Log: os.Stderr})
	if err != nil {
		return fail(err)
	}
	defer d.Stop()
	cluster, runner = d.Cluster, d.Runner
	if k8s, err = client.New(cluster.RESTConfig(), client.Options{Scheme: envtest.Scheme()}); err != nil {
		return fail(err)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "operator log (end):\n%s\n", d.Operator.LogTail())
	}
	return code
}
