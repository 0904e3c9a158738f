package envtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// Env is a running API server with Dolphin's CRDs, and optionally its webhooks served by
// a manager in this process.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// Manager is set when webhooks were asked for; register controllers before Start.
	Manager ctrl.Manager
	// EtcdURL is the API server's etcd, for reading what it stored (EtcdValue).
	EtcdURL string
	// Requests counts what the manager (its client, caches and REST mapper) sends to the
	// API server; set with Manager.
	Requests *RequestCounter
}

// Options select what the environment runs.
type Options struct {
	// Webhooks serves the defaulting, validating and conversion webhooks through a manager
	// (the CRDs' conversion is pointed at it). Without them only the CRD schema and its CEL
	// rules guard the objects.
	Webhooks bool
	// Setup registers more with the manager (controllers) before it starts.
	Setup func(ctrl.Manager) error
}

// Start runs an API server for the test and stops it at cleanup. setupWebhooks registers
// the webhooks with the manager (it is passed in so this package need not import them).
func Start(t testing.TB, o Options, setupWebhooks func(ctrl.Manager) error) *Env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the envtest tier with `make test-envtest`")
	}
	s := ground.Scheme()
	root := ground.RepoRoot()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{Scheme: s},
	}
	if o.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
	}
	cfg, err := env.Start()
	// Registered first so it runs last: the manager stops before the API server.
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	e := &Env{Config: cfg, Scheme: s, EtcdURL: env.ControlPlane.Etcd.URL.String()}
	if e.Client, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		t.Fatalf("creating a client: %v", err)
	}
	if o.Webhooks || o.Setup != nil {
		e.startManager(t, env, o, setupWebhooks)
	}
	return e
}

func (e *Env) startManager(t testing.TB, env *envtest.Environment, o Options, setupWebhooks func(ctrl.Manager) error) {
	t.Helper()
	wo := &env.WebhookInstallOptions
	opts := ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0"}
	if o.Webhooks {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wo.LocalServingHost,
			Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	}
	e.Requests = &RequestCounter{}
	cfg := rest.CopyConfig(e.Config)
	cfg.Wrap(e.Requests.wrap)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	if o.Webhooks {
		if err := setupWebhooks(mgr); err != nil {
			t.Fatalf("registering webhooks: %v", err)
		}
	}
	if o.Setup != nil {
		if err := o.Setup(mgr); err != nil {
			t.Fatalf("setting up the manager: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with an error: %v", err)
		}
	})
	if o.Webhooks {
		if err := waitForTLS(net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))); err != nil {
			t.Fatal(err)
		}
	}
	e.Manager = mgr
}

// waitForTLS waits until the webhook server completes a TLS handshake.
func waitForTLS(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that it listens
		if err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the webhook server on %s did not start", addr)
}
