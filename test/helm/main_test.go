package helm_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// This package's tests install the operator themselves, one after the other, on a ground
// of their own that starts without one.
var (
	g   *ground.Ground
	k8s client.Client
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	if g, err = ground.Start(ctx, ground.Options{Log: os.Stderr, WithoutOperator: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer g.Stop()
	if k8s, err = g.Client(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return ground.WaitFor(t, timeout, what, cond)
}
