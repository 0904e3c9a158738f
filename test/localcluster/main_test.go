package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// One control plane serves every test of the package; each test works in its own namespace.
var (
	cluster *localcluster.Cluster
	runner  *localcluster.PodRunner
	kube    kubernetes.Interface
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	mysql, err := mysqld.Locate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "MySQL under test: %s\n", mysql.Version)
	// Dolphin's CRDs go in before the controller-manager starts, as Start documents.
	cluster, err = localcluster.Start(context.Background(), localcluster.Config{Log: os.Stderr,
		CRDPaths: []string{filepath.Join(repoRoot(), "config", "crd", "bases")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	runner, err = cluster.StartPodRunner(localcluster.PodRunnerOptions{MySQL: mysql, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = kubernetes.NewForConfig(cluster.RESTConfig()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
