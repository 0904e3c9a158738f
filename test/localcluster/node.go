package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Node is a real Kubernetes node of the local cluster: its own containerd (with runc and
// the CNI bridge plugin) and kubelet, its own cgroup subtree, CNI bridge, pod subnet and
// IP. Nodes share the cluster's network namespace, as machines share a network; one
// kube-proxy programs it for all of them.
type Node struct {
	Name string
	// IP is the node's address (10.250.0.<index+1>, on lo; 10.250.0.1 is the API server's).
	IP string
	// PodCIDR is its pods' subnet (10.244.<index>.0/24, on bridge cni<index>).
	PodCIDR string
	index   int
	dir     string
	cgroup  string
	mu      sync.Mutex
	procs   []*process
	// kubeletRetries counts kubelet starts after a lost device plugin socket race.
	kubeletRetries int
	stopped        bool
	// remote is the line to the cluster's owner, which runs the node, when this process
	// attached to the cluster.
	remote *owner
}

func (n *Node) bridge() string  { return fmt.Sprintf("cni%d", n.index) }
func (n *Node) gateway() string { return fmt.Sprintf("10.244.%d.1", n.index) }

// bridgeMAC is the node's bridge's own address (locally administered, one per node).
func (n *Node) bridgeMAC() string { return fmt.Sprintf("02:64:6f:6c:%02x:01", n.index) }

// BridgeAddresses returns the address the node's bridge has now and the one it was given.
func (n *Node) BridgeAddresses() (now, given string, err error) {
	out, err := exec.Command("ip", "-o", "link", "show", n.bridge()).CombinedOutput()
	if err != nil {
		return "", n.bridgeMAC(), fmt.Errorf("ip link show %s: %w: %s", n.bridge(), err, out)
	}
	f := strings.Fields(string(out))
	for i := range f[:len(f)-1] {
		if f[i] == "link/ether" {
			return f[i+1], n.bridgeMAC(), nil
		}
	}
	return "", n.bridgeMAC(), fmt.Errorf("no address in %q", out)
}
func (n *Node) socket() string { return filepath.Join(n.dir, "containerd", "containerd.sock") }
func (n *Node) logDir() string { return filepath.Join(n.dir, "logs") }

func newNode(clusterDir, clusterCgroup string, index int) *Node {
	name := fmt.Sprintf("node%d", index)
	return &Node{Name: name, IP: fmt.Sprintf("10.250.0.%d", index+1), PodCIDR: fmt.Sprintf("10.244.%d.0/24", index),
		index: index, dir: filepath.Join(clusterDir, "nodes", name), cgroup: clusterCgroup + "/" + name}
}

// prepare creates the node's folders, cgroups, address, bridge and CNI configuration.
func (n *Node) prepare() error {
	for _, d := range []string{"logs", "containerd/root", "containerd/state", "cni/net.d", "cni/ipam",
		"kubelet/root", "kubelet/pods-logs", "pki"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return fmt.Errorf("while creating %s's folders: %w", n.Name, err)
		}
	}
	if err := makeCgroup(n.cgroup + "/system"); err != nil {
		return err
	}
	_ = ip("link", "del", n.bridge()) // left by an earlier cluster of this process
	steps := [][]string{
		{"addr", "replace", n.IP + "/32", "dev", "lo"},
		// The bridge's MAC address is set: a bridge whose address was not takes its lowest
		// port's, so each new pod whose veth sorts lower moved the gateway's address and
		// the node's running pods, their neighbour entry now stale, lost every peer off
		// the node (dials timing out) until it was probed again — a primary "unreachable"
		// from an operator pod that had just started, and failed over.
		{"link", "add", n.bridge(), "address", n.bridgeMAC(), "type", "bridge"},
		{"addr", "add", n.gateway() + "/24", "dev", n.bridge()},
		{"link", "set", n.bridge(), "up"},
	}
	if n.index == 1 {
		// ClusterIPs need a route for kube-proxy's DNAT to happen on; any interface does.
		steps = append(steps, []string{"route", "replace", "default", "dev", n.bridge()})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	conf := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "podnet", "plugins": [
 {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]],
           "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
 {"type": "portmap", "capabilities": {"portMappings": true}}]}
`, n.bridge(), n.PodCIDR, n.gateway(), filepath.Join(n.dir, "cni", "ipam"))
	return writeFile(filepath.Join(n.dir, "cni", "net.d", "10-bridge.conflist"), conf)
}

// containerdConfig: CRI with runc through the runc v2 shim, cgroupfs, overlayfs, the local
// pause image pinned. restrict_oom_score_adj because this machine's capability bounding
// set lacks CAP_SYS_RESOURCE (runc cannot raise a container's oom_score_adj: every pod
// failed with "can't get final child's PID from pipe" without it). The NRI socket is the
// node's own: at its default path (/var/run/nri) the second containerd on the machine
// failed to start ("bind: address already in use").
func (n *Node) containerdConfig(pauseImage string) string {
	d := filepath.Join(n.dir, "containerd")
	return fmt.Sprintf(`version = 3
root = %q
state = %q
[grpc]
  address = %q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %q
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
[plugins.'io.containerd.nri.v1.nri']
  socket_path = %q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.socket(), n.mirrorsDir(), pauseImage, runcPath, cniBinDir,
		filepath.Join(n.dir, "cni", "net.d"), filepath.Join(d, "nri.sock"))
}

// mirrorsDir is containerd's config_path: one <host>/hosts.toml per mirrored registry.
func (n *Node) mirrorsDir() string { return filepath.Join(n.dir, "containerd", "certs.d") }

// Host programs the nodes use, from Debian's packages (hack/host-deps.sh installs them).
const (
	runcPath  = "/usr/sbin/runc"
	cniBinDir = "/usr/lib/cni"
)

// startContainerd starts containerd in the node's cgroup (its shims, and so the
// containers' monitors, inherit it) and waits until its CRI service is up.
func (n *Node) startContainerd(ctx context.Context, binDir, pauseImage string) error {
	cfg := filepath.Join(n.dir, "containerd", "config.toml")
	if err := writeFile(cfg, n.containerdConfig(pauseImage)); err != nil {
		return err
	}
	// The runc shim is found on PATH.
	env := []string{"PATH=" + binDir + ":/usr/sbin:/usr/bin:/sbin:/bin"}
	p, err := startProcessEnv(n.logDir(), "containerd", filepath.Join(binDir, "containerd"), env, "--config", cfg)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	if err := moveToCgroup(n.cgroup+"/system", p.cmd.Process.Pid); err != nil {
		return err
	}
	// kubelet started before the CRI plugin has booted exits ("server is not initialized yet").
	return poll(ctx, "containerd on "+n.Name, time.Minute, func(context.Context) (bool, error) {
		if done, _ := p.exited(); done {
			return false, p.errExited()
		}
		return logHas(p.log, "containerd successfully booted"), nil
	})
}

// importImages loads OCI layout tarballs into the node's containerd, in the namespace the
// CRI uses.
func (n *Node) importImages(ctx context.Context, binDir string, tarballs []string) error {
	for _, t := range tarballs {
		// A 450 MB image imports in ~10 s; a stuck containerd must not hold the test.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "ctr"), "--address", n.socket(), "--namespace", "k8s.io",
			"images", "import", "--local", t)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("node %s: importing %s: %w: %s", n.Name, t, err, out)
		}
	}
	return nil
}

// TagImage gives an image every node holds a second name, as pushing it under another tag
// would (an operator release that moves its default image to another tag).
func (c *Cluster) TagImage(ctx context.Context, src, dst string) error {
	return forEachNode(c.Nodes, func(n *Node) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.bin("ctr"), "--address", n.socket(), "--namespace", "k8s.io",
			"images", "tag", "--force", src, dst)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("node %s: tagging %s as %s: %w: %s", n.Name, src, dst, err, out)
		}
		return nil
	})
}

// startKubelet writes the kubelet's configuration, credentials and serving certificate
// and starts it in the node's cgroup.
func (n *Node) startKubelet(c *Cluster) error {
	client, err := issueClient(c.creds.ca, "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	if err := clientcmd.WriteToFile(*c.kubeconfigFor(client), kubeconfig); err != nil {
		return fmt.Errorf("while writing %s: %w", kubeconfig, err)
	}
	serving, err := issueServing(c.creds.ca, n.Name, []string{n.Name}, []net.IP{net.ParseIP(n.IP)})
	if err != nil {
		return err
	}
	cert, key, err := writePair(serving, filepath.Join(n.dir, "pki"), "kubelet")
	if err != nil {
		return err
	}
	cfg := filepath.Join(n.dir, "kubelet", "config.yaml")
	if err := writeFile(filepath.Join(n.dir, "kubelet", "resolv.conf"), "# no upstream name server\n"); err != nil {
		return err
	}
	if err := writeFile(cfg, n.kubeletConfig(c.creds.caFile, cert, key)); err != nil {
		return err
	}
	p, err := startProcess(n.logDir(), "kubelet", c.bin("kubelet"), "--config="+cfg, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.dir, "kubelet", "root"), "--hostname-override="+n.Name, "--node-ip="+n.IP)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return moveToCgroup(n.cgroup+"/system", p.cmd.Process.Pid)
}

// kubeletConfig: what this machine needs (each setting failed first without it):
// cgroup v1 allowed, the cgroupfs driver under the node's own cgroup root, swap not
// refused; image garbage collection off (images are imported, not pulled); the serving
// certificate for the node IP; x509 client authentication against the cluster CA. The
// crash-loop back-off is capped at 10 s (see docs/design/test-ground.md).
func (n *Node) kubeletConfig(ca, cert, key string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /%s
enforceNodeAllocatable: ["pods"]
containerRuntimeEndpoint: unix://%s
failSwapOn: false
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: %s
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
podLogsDir: %s
clusterDomain: cluster.local
clusterDNS: [%q]
resolvConf: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
maxPods: 110
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
crashLoopBackOff:
  maxContainerRestartPeriod: 10s
`, n.cgroup, n.socket(), n.IP, n.IP, cert, key, ca, filepath.Join(n.dir, "kubelet", "pods-logs"), DNSServiceIP,
		filepath.Join(n.dir, "kubelet", "resolv.conf"))
}

// Stop takes the node off the network and kills its kubelet, containerd and every
// container it ran, as a machine that loses power: its pods' addresses stop answering
// (packets to them are dropped, so clients time out rather than being refused) and the
// API server is left to notice. It is safe to call more than once.
func (n *Node) Stop() error {
	if n.remote != nil {
		_, err := n.remote.call(context.Background(), http.MethodPost, "/nodes/"+n.Name+"/stop", time.Minute)
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return nil
	}
	n.stopped = true
	errs := []error{n.dropTraffic("-I")}
	killErr := killCgroup(n.cgroup, 30*time.Second)
	if killErr == nil {
		for _, p := range n.procs {
			<-p.done // killed with the cgroup: the wait only collects the exit
		}
	}
	return errors.Join(append(errs, killErr)...)
}

// healthy returns an error naming the node's first process that exited, unless the node
// was stopped.
func (n *Node) healthy() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return nil
	}
	for _, p := range n.procs {
		if done, _ := p.exited(); done {
			return fmt.Errorf("node %s: %w", n.Name, p.errExited())
		}
	}
	return nil
}

// dropTraffic inserts (-I) or deletes (-D) the rules that drop every packet to the node's
// IP and pod subnet.
func (n *Node) dropTraffic(op string) error {
	var errs []error
	for _, chain := range []string{"FORWARD", "OUTPUT"} {
		for _, dst := range []string{n.PodCIDR, n.IP + "/32"} {
			if out, err := exec.Command("iptables", "-w", op, chain, "-d", dst, "-j", "DROP").CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("node %s: iptables %s: %w: %s", n.Name, op, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// Running reports whether the node has not been stopped.
func (n *Node) Running() bool {
	if n.remote != nil {
		running, err := n.remote.call(context.Background(), http.MethodGet, "/nodes/"+n.Name+"/running", 10*time.Second)
		return err == nil && running == "true"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.stopped
}

func writeFile(p, content string) error {
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", p, err)
	}
	return nil
}

// logHas reports whether a log file has a line containing s.
func logHas(path, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}
