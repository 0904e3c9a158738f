package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// One cluster of two real nodes serves every test of the package; each test works in its
// own namespace.
var (
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	// pauseImage runs the tests' pods: it holds still until stopped.
	pauseImage string
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
	imgs, err := localcluster.ReadImages(os.Getenv("DOLPHIN_IMAGES"))
	if err != nil {
		return fail(err)
	}
	cfg := localcluster.Config{Log: os.Stderr, Nodes: 2, Images: imgs,
		// Dolphin's CRDs go in before the controller-manager starts, as Start documents.
		CRDPaths: []string{filepath.Join(ground.RepoRoot(), "config", "crd", "bases")}}
	for _, img := range imgs {
		switch {
		case strings.Contains(img.Name, "/pause:"):
			cfg.PauseImage, pauseImage = img.Name, img.Name
		case strings.Contains(img.Name, "/coredns:"):
			cfg.CoreDNSImage = img.Name
		}
	}
	if cluster, err = localcluster.Start(context.Background(), cfg); err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	if kube, err = kubernetes.NewForConfig(cluster.RESTConfig()); err != nil {
		return fail(err)
	}
	return m.Run()
}
