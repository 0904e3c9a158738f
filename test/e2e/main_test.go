package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

var (
	cluster *localcluster.Cluster
	runner  *localcluster.PodRunner
	k8s     client.Client
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

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
	mysql, err := mysqld.Locate()
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "MySQL under test: %s\n", mysql.Version)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := repoRoot()
	cluster, err = localcluster.Start(ctx, localcluster.Config{Log: os.Stderr,
		CRDPaths: []string{filepath.Join(root, "config", "crd", "bases")}})
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	if runner, err = cluster.StartPodRunner(localcluster.PodRunnerOptions{MySQL: mysql, Log: os.Stderr}); err != nil {
		return fail(err)
	}
	op, err := cluster.StartOperator(ctx, localcluster.OperatorOptions{
		Binary:           bin,
		WebhookManifests: filepath.Join(root, "config", "webhook", "manifests.yaml"),
		ConversionCRDs:   []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"},
		Ready:            localcluster.ProbeDolphinWebhooks(cluster.RESTConfig()),
	})
	if err != nil {
		return fail(err)
	}
	if k8s, err = client.New(cluster.RESTConfig(), client.Options{Scheme: envtest.Scheme()}); err != nil {
		return fail(err)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "operator log (end):\n%s\n", op.LogTail())
	}
	return code
}
