// Command manager runs the Dolphin operator: the controller-runtime manager that hosts the
// MySQLCluster and MySQLBackup reconcilers and, when enabled, their webhooks.
//
// This file stays thin: flags, the scheme, the manager and its servers. Reconcile logic
// lives in controllers/, webhook logic in internal/webhook/.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	stdlog "log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/controllers"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/storageversion"
	"github.com/dolphin-operator/dolphin/internal/topology"
	"github.com/dolphin-operator/dolphin/internal/version"
	webhookv1beta1 "github.com/dolphin-operator/dolphin/internal/webhook/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/webhookcert"
	// +kubebuilder:scaffold:imports
)

var scheme = runtime.NewScheme()

// eventSource is the reporting controller of every Event the operator records.
const eventSource = "dolphin-operator"

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(mysqlv1alpha1.AddToScheme(scheme))
	utilruntime.Must(mysqlv1beta1.AddToScheme(scheme))
	// +kubebuilder:scaffold:scheme
}

// options are the manager's command-line settings.
type options struct {
	metricsAddr      string
	probeAddr        string
	pprofAddr        string
	secureMetrics    bool
	enableHTTP2      bool
	leaderElect      bool
	leaderElectionNS string
	webhookCertDir   string
	webhookPort      int
	selfIssueCert    bool
	injectCA         bool
	mysqlAddresses   string
	maxConcurrent    int
	apiQPS           float64
	apiBurst         int
	cloneTimeout     time.Duration
	watchInterval    time.Duration
	enableWebhooks   bool
	watchNamespaces  []string
}

func parseOptions(args []string) (options, *zap.Options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to (:8443 for HTTPS, :8080 for HTTP, 0 to disable).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address Go's profiler (net/http/pprof) binds to; empty: off. Keep it off the network: it is not authenticated.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS behind Kubernetes authentication and authorization.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 for the metrics and webhook servers (off by default: CVE-2023-44487, CVE-2023-39325).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so that only one replica of the manager reconciles at a time.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader-election Lease (default: the manager's own namespace).")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "",
		"Folder holding tls.crt and tls.key for the webhook server (default: controller-runtime's).")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	// The environment can set it too, so that an OLM install changes it through the
	// Subscription's spec.config.env instead of editing the CSV's Deployment.
	addresses := os.Getenv("DOLPHIN_MYSQL_ADDRESSES")
	if addresses == "" {
		addresses = string(topology.AddressDNS)
	}
	fs.StringVar(&o.mysqlAddresses, "mysql-addresses", addresses,
		"How replicas reach their source and clone recipients their donor: dns (the headless Service's "+
			"names) or pod-ip (default from $DOLPHIN_MYSQL_ADDRESSES, else dns). The operator itself dials pod IPs.")
	fs.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 16,
		"How many MySQLClusters are reconciled at once. A reconcile waits only on the API server (replication "+
			"is looked after apart from this, by one loop per cluster), so the workers bound how many of its "+
			"round trips overlap: 16 create a thousand clusters' objects as fast as a small API server takes them.")
	fs.Float64Var(&o.apiQPS, "kube-api-qps", 200,
		"Requests a second the operator sends the API server, at most, beyond the burst (0 or less: no client-side limit).")
	fs.IntVar(&o.apiBurst, "kube-api-burst", 400, "Requests the operator may send at once above --kube-api-qps.")
	fs.DurationVar(&o.cloneTimeout, "clone-timeout", topology.DefaultCloneTimeout,
		"The longest one CLONE (seeding or re-seeding a replica) may take before it is abandoned.")
	fs.DurationVar(&o.watchInterval, "primary-watch-interval", topology.DefaultWatchInterval,
		"How often each settled cluster's primary is pinged between topology passes (one a second), so that "+
			"a failed primary is found sooner; 0 turns the pings off.")
	fs.BoolVar(&o.selfIssueCert, "self-issue-webhook-cert", false,
		"Issue the webhook certificate and inject its CA (installs without OLM or cert-manager).")
	fs.BoolVar(&o.injectCA, "inject-webhook-ca", false,
		"Inject the CA of a webhook certificate someone else issues (ca.crt in --webhook-cert-dir, as cert-manager "+
			"writes it) into the webhook configurations and the CRDs' conversion webhooks, at start and every hour.")
	zapOpts := &zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, nil, err
	}
	if a := topology.Addresses(o.mysqlAddresses); a != topology.AddressDNS && a != topology.AddressPodIP {
		return o, nil, fmt.Errorf("--mysql-addresses: %q is neither %q nor %q", o.mysqlAddresses, topology.AddressDNS, topology.AddressPodIP)
	}
	if o.maxConcurrent < 1 {
		return o, nil, fmt.Errorf("--max-concurrent-reconciles: %d is less than 1", o.maxConcurrent)
	}
	if o.apiQPS > 0 && o.apiBurst < 1 {
		return o, nil, fmt.Errorf("--kube-api-burst: %d is less than 1 while --kube-api-qps limits requests", o.apiBurst)
	}
	if o.cloneTimeout <= 0 {
		return o, nil, fmt.Errorf("--clone-timeout: %s is not positive", o.cloneTimeout)
	}
	if o.watchInterval < 0 {
		return o, nil, fmt.Errorf("--primary-watch-interval: %s is negative", o.watchInterval)
	}
	if o.selfIssueCert && o.injectCA {
		return o, nil, errors.New("--inject-webhook-ca: the certificate is either self-issued (--self-issue-webhook-cert) or someone else's, not both")
	}
	if o.injectCA && o.webhookCertDir == "" {
		return o, nil, errors.New("--inject-webhook-ca: needs --webhook-cert-dir, where the issuer's Secret (with ca.crt) is mounted")
	}
	// ENABLE_WEBHOOKS=false runs the manager without its webhook server (e.g. `make run`
	// without certificates); the reconcilers apply defaults themselves, so nothing breaks.
	o.enableWebhooks = os.Getenv("ENABLE_WEBHOOKS") != "false"
	// In a pod, controller-runtime finds its namespace in the ServiceAccount mount; POD_NAMESPACE
	// (downward API, set by config/default) says the same and also works where no mount exists.
	if o.leaderElectionNS == "" {
		o.leaderElectionNS = os.Getenv("POD_NAMESPACE")
	}
	// WATCH_NAMESPACE is set by OLM from olm.targetNamespaces; empty means all namespaces.
	for ns := range strings.SplitSeq(os.Getenv("WATCH_NAMESPACE"), ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.watchNamespaces = append(o.watchNamespaces, ns)
		}
	}
	return o, zapOpts, nil
}

func main() {
	if ok, code := runTool(os.Args[1:]); ok {
		os.Exit(code)
	}
	o, zapOpts, err := parseOptions(os.Args[1:])
	if err != nil {
		// The flag package has printed its own errors with the usage; ours it has not.
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
		os.Exit(2)
	}
	logger := zap.New(zap.UseFlagOptions(zapOpts))
	ctrl.SetLogger(logger)
	// client-go's and the MySQL driver's own lines (leader election, API warnings, dropped
	// idle connections) go through the same logger, so that a production log is JSON
	// throughout.
	klog.SetLogger(logger)
	mysql.SetDriverLogger(logger.WithName("mysql-driver"))
	stdlog.SetFlags(0) // the standard library's (an HTTP server's TLS handshake errors)
	stdlog.SetOutput(logWriter{logger.WithName("stdlib")})
	log := ctrl.Log.WithName("setup")
	ctx := ctrl.SetupSignalHandler()
	log.Info("Starting Dolphin", "version", version.Version, "gitCommit", version.GitCommit,
		"webhooks", o.enableWebhooks, "watchNamespaces", o.watchNamespaces)

	var certClient client.Client
	if o.keepsWebhookCert() {
		if certClient, err = ensureWebhookCert(ctrl.LoggerInto(ctx, log), &o); err != nil {
			log.Error(err, "Failed to set up the webhook certificate")
			os.Exit(1)
		}
	}
	mgr, err := newManager(o)
	if err != nil {
		log.Error(err, "Failed to create the manager")
		os.Exit(1)
	}
	if err := setup(mgr, o, certClient); err != nil {
		log.Error(err, "Failed to set up the manager")
		os.Exit(1)
	}
	log.Info("Starting the manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// restConfig is the API server's address and credentials with the operator's client-side
// limit: a deliberate ceiling (a runaway loop cannot flood the API server) set well above
// what creating a thousand clusters at once needs, so that it never paces normal work.
// controller-runtime's own default is no limit at all.
func restConfig(o options) *rest.Config {
	cfg := ctrl.GetConfigOrDie()
	if o.apiQPS > 0 {
		cfg.QPS, cfg.Burst = float32(o.apiQPS), o.apiBurst
	}
	return cfg
}

// setup registers the controllers, webhooks, runnables and health checks with the manager.
func setup(mgr ctrl.Manager, o options, certClient client.Client) error {
	topo := &topology.Manager{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(eventSource),
		Addresses: topology.Addresses(o.mysqlAddresses), CloneTimeout: o.cloneTimeout, WatchInterval: o.watchInterval}
	if err := topology.IndexPods(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// A runnable that needs the leader: only the elected operator runs the loops.
	if err := mgr.Add(topo); err != nil {
		return fmt.Errorf("the topology manager: %w", err)
	}
	image := operatorImage(mgr.GetAPIReader())
	watchdog := &controllers.Watchdog{}
	if err := (&controllers.MySQLClusterReconciler{
		Client:                  mgr.GetClient(),
		Scheme:                  mgr.GetScheme(),
		Recorder:                mgr.GetEventRecorder(eventSource),
		Images:                  resources.ImagesFromEnv(os.Getenv),
		OperatorImage:           image,
		Topology:                topo,
		MaxConcurrentReconciles: o.maxConcurrent,
		Watchdog:                watchdog,
		OperatorNamespace:       os.Getenv("POD_NAMESPACE"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("the MySQLCluster controller: %w", err)
	}
	if err := (&controllers.MySQLBackupReconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Scheme:        mgr.GetScheme(),
		Recorder:      mgr.GetEventRecorder(eventSource),
		Images:        resources.ImagesFromEnv(os.Getenv),
		OperatorImage: image,
		Watchdog:      watchdog,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("the MySQLBackup controller: %w", err)
	}
	if o.enableWebhooks {
		if err := setupWebhooks(mgr); err != nil {
			return fmt.Errorf("the webhooks: %w", err)
		}
	}
	// After an upgrade that changes a CRD's storage version, objects still stored in the old
	// one are rewritten so a later release can stop serving it.
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("a discovery client: %w", err)
	}
	if err := mgr.Add(&storageversion.Migrator{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(),
		Discovery: disco, CRDs: storageversion.CRDs, Recorder: mgr.GetEventRecorder(eventSource)}); err != nil {
		return fmt.Errorf("the storage version migrator: %w", err)
	}
	if o.keepsWebhookCert() {
		if err := mgr.Add(&webhookcert.Rotator{Client: certClient, Options: webhookCertOptions(o), Now: time.Now}); err != nil {
			return fmt.Errorf("the webhook certificate rotator: %w", err)
		}
	}
	// +kubebuilder:scaffold:builder

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("the health check: %w", err)
	}
	// A topology pass that outlives every deadline it has means a bug: the liveness probe
	// then restarts the operator rather than leave failover frozen.
	if err := mgr.AddHealthzCheck("topology", func(*http.Request) error { return topo.Check() }); err != nil {
		return fmt.Errorf("the topology health check: %w", err)
	}
	// A reconcile that outlives every bound its calls have holds its worker: restart.
	if err := mgr.AddHealthzCheck("reconcilers", func(*http.Request) error { return watchdog.Check() }); err != nil {
		return fmt.Errorf("the reconcilers' health check: %w", err)
	}
	readyCheck := healthz.Ping
	if o.enableWebhooks {
		// Ready only once the webhook server serves: the API server calls it as soon as the
		// pod is an endpoint of the webhook Service.
		readyCheck = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", readyCheck); err != nil {
		return fmt.Errorf("the readiness check: %w", err)
	}
	if o.enableWebhooks {
		// ... and serves the certificate on disk now, the one the API server's CA bundle
		// was made for: after a rotation the server's file watcher must have loaded it.
		serving := webhookcert.Serving(fmt.Sprintf("127.0.0.1:%d", o.webhookPort), filepath.Join(webhookCertDir(o), "tls.crt"))
		if err := mgr.AddReadyzCheck("webhook-certificate", serving); err != nil {
			return fmt.Errorf("the webhook certificate's readiness check: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("topology", func(*http.Request) error { return topo.Check() }); err != nil {
		return fmt.Errorf("the topology readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("the caches' readiness check: %w", err)
	}
	return nil
}

// cacheSyncWait bounds how long one readiness probe waits for the informer caches.
const cacheSyncWait = time.Second

// cachesSynced is ready once every informer cache has synced: before, the operator would
// act (and answer webhooks that read through the cache) on a partial view of the cluster.
func cachesSynced(c interface{ WaitForCacheSync(context.Context) bool }) healthz.Checker {
	return func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced yet")
		}
		return nil
	}
}

func newManager(o options) (ctrl.Manager, error) {
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	// managedFields are the bulk of a cached Pod or StatefulSet and nothing here reads
	// them (apply compares values, not owners): dropped, a thousand clusters' children
	// cost less memory.
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "dolphin.mysql.dolphin-operator.io",
		LeaderElectionNamespace: o.leaderElectionNS,
		// The manager exits right after losing the lease, so releasing it on a clean
		// shutdown is safe and lets the next replica take over without waiting it out.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		PprofBindAddress:              o.pprofAddr,
	}
	if o.enableWebhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{
			Port:    o.webhookPort,
			CertDir: o.webhookCertDir,
			TLSOpts: tlsOpts,
		})
	}
	mgr, err := ctrl.NewManager(restConfig(o), mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("while creating the manager: %w", err)
	}
	return mgr, nil
}

// webhookCertOptions names what config/default and the Helm chart install: the operator's
// own certificate, or with --inject-webhook-ca the one cert-manager keeps in the same Secret
// (OLM brings its own and sets neither flag).
func webhookCertOptions(o options) webhookcert.Options {
	return webhookcert.Options{
		Namespace:   os.Getenv("POD_NAMESPACE"),
		ServiceName: "dolphin-webhook-service",
		SecretName:  "dolphin-webhook-server-cert",
		CertDir:     o.webhookCertDir,
		Mutating:    "dolphin-mutating-webhook-configuration",
		Validating:  "dolphin-validating-webhook-configuration",
		CRDs:        []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"},
		External:    o.injectCA,
	}
}

// webhookCertDir is where the webhook server reads its certificate: the flag's directory, or
// controller-runtime's default (where OLM mounts the certificate it issues).
func webhookCertDir(o options) string {
	if o.webhookCertDir != "" {
		return o.webhookCertDir
	}
	return filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
}

// keepsWebhookCert: the operator issues its webhook certificate (--self-issue-webhook-cert)
// or injects the CA of one mounted for it (--inject-webhook-ca), at start and every hour.
func (o options) keepsWebhookCert() bool { return o.enableWebhooks && (o.selfIssueCert || o.injectCA) }

// ensureWebhookCert runs before the manager so the webhook server starts with a certificate
// and the API server already trusts it. It returns the uncached client it used: the rotator
// reads a handful of named objects once an hour, no reason to watch them all.
func ensureWebhookCert(ctx context.Context, o *options) (client.Client, error) {
	o.webhookCertDir = webhookCertDir(*o)
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	return c, webhookcert.Ensure(ctx, c, webhookCertOptions(*o), time.Now())
}

// setupWebhooks registers the defaulting, validating and conversion webhooks.
func setupWebhooks(mgr ctrl.Manager) error {
	if err := webhookv1beta1.SetupMySQLClusterWebhookWithManager(mgr, resources.ImagesFromEnv(os.Getenv)); err != nil {
		return fmt.Errorf("while registering the MySQLCluster webhooks: %w", err)
	}
	if err := webhookv1beta1.SetupMySQLBackupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("while registering the MySQLBackup webhooks: %w", err)
	}
	return nil
}

// logWriter turns each line the standard library's logger writes into a line of l.
type logWriter struct{ l logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
