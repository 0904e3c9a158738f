package chaos_test

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

var (
	g   *ground.Ground
	k8s client.Client
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(runMain(m))
}

// runMain starts the ground (three real nodes) with the operator installed by `make deploy`.
func runMain(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	if g, err = ground.Start(ctx, ground.Options{Log: os.Stderr}); err != nil {
		return fail(err)
	}
	defer g.Stop()
	if k8s, err = g.Client(); err != nil {
		return fail(err)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "operator log (end):\n%s\n", g.OperatorLogs(context.Background()))
	}
	return code
}
