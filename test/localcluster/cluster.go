package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

// Config says what to run and where.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
	// kwok-stages.yaml. Default: $DOLPHIN_BIN_DIR, else $KUBEBUILDER_ASSETS.
	BinDir string
	// Dir is the cluster's folder (PKI, etcd data, logs, volumes, kubeconfig). Default: a
	// new temporary folder, removed by Stop.
	Dir string
	// CRDPaths are CRD manifests (files or folders) installed before the controller-manager
	// starts: its garbage collector then knows custom-resource owners from the beginning.
	CRDPaths []string
	// Log receives progress lines; default: discarded.
	Log io.Writer
	// Nodes is the number of real nodes (kubelet + containerd each). 0 means one kwok
	// node instead, whose pods run nothing: only for what simulation is the point of.
	Nodes int
	// Images are loaded into every real node's containerd; PauseImage and CoreDNSImage
	// name two of them (the pods' sandbox, the cluster DNS).
	Images                   []Image
	PauseImage, CoreDNSImage string
	// Mirrors are registry hosts (quay.io, ...) whose images the nodes pull from the
	// cluster's own Registry instead; with any, the registry runs (real nodes only).
	Mirrors []string
	// KwokPods is how many pods the kwok node takes (Nodes 0 only; default 250).
	KwokPods int
	// ControllerManagerQPS is kube-controller-manager's client QPS (its burst twice that);
	// 0 keeps its default (20), which at thousands of pods makes its StatefulSet controller
	// the slowest thing a benchmark measures.
	ControllerManagerQPS int
	// AuditPolicy, when set, is an audit policy (YAML) the API server applies, logging to
	// AuditLogPath.
	AuditPolicy []byte
}

// Cluster is a running local control plane.
type Cluster struct {
	cfg        Config
	ownDir     bool
	creds      *credentials
	procs      []*process
	etcd, api  *process
	restarts   int // of kube-apiserver
	provision  *provisioner
	cancel     context.CancelFunc
	restConfig *rest.Config
	cgroup     string
	// resolvMounted: /etc/resolv.conf is this cluster's (undone by Stop, so that a next
	// cluster of the process can mount its own).
	resolvMounted bool
	// remote is the line to the cluster's owner when this process attached to it.
	remote *owner
	// Kubeconfig is the path of an admin kubeconfig (valid inside the namespace).
	Kubeconfig string
	// Nodes are the real nodes (none with a kwok node).
	Nodes []*Node
	// Registry is the registry the nodes pull Config.Mirrors' images from (nil without
	// mirrors).
	Registry *Registry
}

// Fixed addresses: the namespace is private, so nothing else can hold these ports.
const (
	apiServerPort = "6443"
	etcdClientURL = "http://127.0.0.1:2379"
	kwokNodeName  = "kwok-node-0"
)

// Start brings the control plane up and returns once a fake node is Ready. On error it
// stops whatever it had started.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if !InNetNS() {
		return nil, ErrNotInNetNS
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.BinDir == "" {
		cfg.BinDir = os.Getenv("DOLPHIN_BIN_DIR")
	}
	if cfg.BinDir == "" {
		cfg.BinDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if cfg.BinDir == "" {
		return nil, errors.New("localcluster: no binaries: set Config.BinDir or DOLPHIN_BIN_DIR (`make cluster-tools` builds them into ./bin)")
	}
	c = &Cluster{cfg: cfg}
	if cfg.Dir == "" {
		if c.cfg.Dir, err = os.MkdirTemp("", "dolphin-localcluster-"); err != nil {
			return nil, fmt.Errorf("while creating the cluster folder: %w", err)
		}
		c.ownDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	start := time.Now()
	for _, d := range []string{"logs", "etcd", "volumes"} {
		if err := os.MkdirAll(filepath.Join(c.cfg.Dir, d), 0o755); err != nil {
			return c, fmt.Errorf("while creating %s: %w", d, err)
		}
	}
	if c.creds, err = newCredentials(filepath.Join(c.cfg.Dir, "pki")); err != nil {
		return c, err
	}
	if err := c.writeKubeconfig(); err != nil {
		return c, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return c, err
	}
	c.logf("etcd and kube-apiserver ready after %s", since(start))
	if len(cfg.CRDPaths) > 0 {
		if _, err := envtest.InstallCRDs(c.restConfig, envtest.CRDInstallOptions{
			Paths: cfg.CRDPaths, ErrorIfPathMissing: true,
		}); err != nil {
			return c, fmt.Errorf("while installing CRDs: %w", err)
		}
	}
	if err := c.startControllers(); err != nil {
		return c, err
	}
	if cfg.Nodes > 0 && len(cfg.Mirrors) > 0 {
		if c.Registry, err = startRegistry(filepath.Join(c.cfg.Dir, "registry")); err != nil {
			return c, err
		}
		c.logf("registry serving on %s, the nodes' mirror of %s", c.Registry.Addr, strings.Join(cfg.Mirrors, ", "))
	}
	if cfg.Nodes > 0 {
		if err := c.startNodes(ctx); err != nil {
			return c, err
		}
		c.logf("%d node(s) Ready after %s", cfg.Nodes, since(start))
	}
	if err := c.prepareNodeAndStorage(ctx); err != nil {
		return c, err
	}
	if cfg.Nodes > 0 {
		if err := c.startDNS(ctx); err != nil {
			return c, err
		}
	}
	c.logf("cluster ready after %s (folder %s)", since(start), c.cfg.Dir)
	return c, nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	logs := filepath.Join(c.cfg.Dir, "logs")
	etcd, err := startProcess(logs, "etcd", c.bin("etcd"),
		"--name=local", "--data-dir="+filepath.Join(c.cfg.Dir, "etcd"),
		"--listen-client-urls="+etcdClientURL, "--advertise-client-urls="+etcdClientURL,
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=local=http://127.0.0.1:2380",
		// A test cluster's data is thrown away: fsync buys nothing and costs seconds.
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, etcd)
	c.etcd = etcd
	return c.startAPI(ctx)
}

// startAPI starts kube-apiserver (etcd runs) and waits until it is ready.
func (c *Cluster) startAPI(ctx context.Context) error {
	logs := filepath.Join(c.cfg.Dir, "logs")
	p := c.creds
	var audit []string
	if len(c.cfg.AuditPolicy) > 0 {
		policy := filepath.Join(c.cfg.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, c.cfg.AuditPolicy, 0o600); err != nil {
			return fmt.Errorf("while writing the audit policy: %w", err)
		}
		// One line a request, written as it ends (the blocking backend: nothing is dropped).
		audit = []string{"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-maxsize=0"}
	}
	api, err := startProcess(logs, "kube-apiserver", c.bin("kube-apiserver"), append([]string{
		"--etcd-servers=" + etcdClientURL,
		"--bind-address=0.0.0.0", "--advertise-address=" + HostIP, "--secure-port=" + apiServerPort,
		"--tls-cert-file=" + p.apiserverCert, "--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.caFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub, "--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR, "--allow-privileged=true",
		// Webhook and aggregated-API calls go to endpoint IPs (our local processes), not to
		// ClusterIPs that nothing here routes.
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file=" + c.creds.frontProxyFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyCert, "--proxy-client-key-file=" + p.frontProxyKey,
		// logs, exec and port-forward reach kubelets at their node IPs (the node names
		// resolve nowhere), with a client certificate they trust.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + p.kubeletClientCert, "--kubelet-client-key=" + p.kubeletClientKey,
		"--kubelet-certificate-authority=" + p.caFile}, audit...)...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, api)
	c.api = api
	return poll(ctx, "kube-apiserver /readyz", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, pr := range []*process{c.etcd, api} {
			if done, _ := pr.exited(); done {
				return false, pr.errExited()
			}
		}
		cs, err := kubernetes.NewForConfig(c.restConfig)
		if err != nil {
			return false, fmt.Errorf("while creating a client: %w", err)
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling control-plane upgrade
// does) and starts it again on the same etcd, waiting until it is ready. Its earlier log
// is kept as kube-apiserver.log.<n>.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if c.remote != nil {
		_, err := c.remote.call(ctx, http.MethodPost, "/apiserver/restart", 3*time.Minute)
		return err
	}
	if c.api == nil {
		return errors.New("localcluster: no kube-apiserver to restart")
	}
	c.api.stop(30 * time.Second)
	c.restarts++
	logs := filepath.Join(c.cfg.Dir, "logs")
	if err := os.Rename(filepath.Join(logs, "kube-apiserver.log"), filepath.Join(logs, fmt.Sprintf("kube-apiserver.log.%d", c.restarts))); err != nil {
		return fmt.Errorf("while keeping the kube-apiserver log: %w", err)
	}
	return c.startAPI(ctx)
}

func (c *Cluster) startControllers() error {
	logs := filepath.Join(c.cfg.Dir, "logs")
	p := c.creds
	kcmArgs := []string{"--kubeconfig=" + c.Kubeconfig, "--secure-port=0", "--leader-elect=false",
		"--controllers=*", "--use-service-account-credentials=false",
		"--service-account-private-key-file=" + p.saKey, "--root-ca-file=" + p.caFile,
		"--cluster-cidr=" + PodCIDR, "--allocate-node-cidrs=false"}
	if q := c.cfg.ControllerManagerQPS; q > 0 {
		kcmArgs = append(kcmArgs, fmt.Sprintf("--kube-api-qps=%d", q), fmt.Sprintf("--kube-api-burst=%d", 2*q))
	}
	kcm, err := startProcess(logs, "kube-controller-manager", c.bin("kube-controller-manager"), kcmArgs...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kcm)
	sched, err := startProcess(logs, "kube-scheduler", c.bin("kube-scheduler"),
		"--kubeconfig="+c.Kubeconfig, "--secure-port=0", "--leader-elect=false")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, sched)
	if c.cfg.Nodes > 0 {
		return nil
	}
	kwok, err := startProcess(logs, "kwok", c.bin("kwok"),
		"--kubeconfig="+c.Kubeconfig, "--config="+c.bin("kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip="+HostIP, "--cidr="+PodCIDR, "--server-address=127.0.0.1:10247")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kwok)
	return nil
}

// kubeconfig is a kubeconfig for the local API server that authenticates with the admin
// certificate, impersonating as (and its groups) when as is not empty.
func (c *Cluster) kubeconfig(as string, groups ...string) (*clientcmdapi.Config, error) {
	var kc *clientcmdapi.Config
	if c.creds != nil {
		kc = c.kubeconfigFor(c.creds.admin)
	} else { // attached: the owner's admin kubeconfig holds the certificate
		var err error
		if kc, err = clientcmd.LoadFromFile(c.Kubeconfig); err != nil {
			return nil, fmt.Errorf("while reading %s: %w", c.Kubeconfig, err)
		}
	}
	kc.AuthInfos["user"].Impersonate = as
	kc.AuthInfos["user"].ImpersonateGroups = groups
	return kc, nil
}

// kubeconfigFor is a kubeconfig for the local API server that authenticates with kp.
func (c *Cluster) kubeconfigFor(kp *pki.KeyPair) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{
		Server:                   "https://" + HostIP + ":" + apiServerPort,
		CertificateAuthorityData: c.creds.ca.CertPEM,
	}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	return kc
}

// WriteKubeconfigAs writes a kubeconfig that authenticates as the admin and impersonates
// user (in groups): what a program run under its own identity and RBAC uses, so that the
// API server authorises (and audits) its requests as that user's.
func (c *Cluster) WriteKubeconfigAs(path, user string, groups ...string) error {
	kc, err := c.kubeconfig(user, groups...)
	if err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("while writing the kubeconfig of %s: %w", user, err)
	}
	return nil
}

// AuditLogPath is the API server's audit log (written when Config.AuditPolicy is set).
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.cfg.Dir, "logs", "audit.log") }

// writeKubeconfig writes the admin kubeconfig and builds the REST config from it.
func (c *Cluster) writeKubeconfig() error {
	kc, err := c.kubeconfig("")
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.cfg.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return fmt.Errorf("while writing the kubeconfig: %w", err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("while building the REST config: %w", err)
	}
	rc.QPS, rc.Burst = 100, 200
	c.restConfig = rc
	return nil
}

// RESTConfig returns a copy of the admin REST config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Dir is the cluster's folder.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// NodeName is the fake node pods are scheduled to.
func (c *Cluster) NodeName() string { return kwokNodeName }

// Stop ends the nodes (and every container), the provisioner and every component (in
// reverse start order) and removes the folder if Start created it. It is safe to call
// more than once.
func (c *Cluster) Stop() {
	if c.remote != nil { // the owner stops the cluster: only what this process ran goes
		for k := len(c.procs) - 1; k >= 0; k-- {
			c.procs[k].stop(10 * time.Second)
		}
		c.procs = nil
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.stopNodes()
	c.Registry.stop()
	c.Registry = nil
	if c.resolvMounted {
		_ = syscall.Unmount("/etc/resolv.conf", syscall.MNT_DETACH)
		c.resolvMounted = false
	}
	for k := len(c.procs) - 1; k >= 0; k-- {
		c.procs[k].stop(10 * time.Second)
	}
	c.procs = nil
	if c.ownDir && os.Getenv("DOLPHIN_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(c.cfg.Dir)
	}
}

// Process is a program started by Run: the operator under test, for example.
type Process struct{ p *process }

// Run starts a program inside the namespace with KUBECONFIG pointing at this cluster
// (plus env), its output in <Dir>/logs/<name>.log; Stop ends it at the latest.
func (c *Cluster) Run(name, bin string, env []string, args ...string) (*Process, error) {
	env = append([]string{"KUBECONFIG=" + c.Kubeconfig}, env...)
	p, err := startProcessEnv(filepath.Join(c.cfg.Dir, "logs"), name, bin, env, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return &Process{p: p}, nil
}

// Stop ends the program: SIGTERM, then SIGKILL after the grace period.
func (p *Process) Stop(grace time.Duration) { p.p.stop(grace) }

// Exited returns an error describing the exit (with the log's end) once the program has
// ended, nil while it runs.
func (p *Process) Exited() error {
	if done, _ := p.p.exited(); done {
		return p.p.errExited()
	}
	return nil
}

// LogTail returns the end of the program's log.
func (p *Process) LogTail() string { return p.p.tail() }

// PID is the program's process ID (for sampling its memory and CPU time).
func (p *Process) PID() int { return p.p.cmd.Process.Pid }

// LogPath is the program's log file.
func (p *Process) LogPath() string { return p.p.log }

// Healthy returns an error naming the first component that has exited: a control-plane
// process or a program Run started, not stopped on purpose, or the containerd or kubelet
// of a node that was not stopped.
func (c *Cluster) Healthy() error {
	if c.remote != nil {
		if _, err := c.remote.call(context.Background(), http.MethodGet, "/healthy", 10*time.Second); err != nil {
			return err
		}
	}
	for _, p := range c.procs {
		if done, _ := p.exited(); done && !p.stopped.Load() {
			return p.errExited()
		}
	}
	if c.remote != nil {
		return nil
	}
	for _, n := range c.Nodes {
		if err := n.healthy(); err != nil {
			return err
		}
	}
	return nil
}

// LogTail returns the end of a component's log (etcd, kube-apiserver, kwok, ...).
func (c *Cluster) LogTail(component string) string {
	for _, p := range c.procs {
		if p.name == component {
			return p.tail()
		}
	}
	return ""
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.cfg.BinDir, name) }

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.cfg.Log, "localcluster: "+format+"\n", args...)
}

// poll calls cond every 100 ms until it is true, fails, or the timeout passes.
func poll(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("while waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("while waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
