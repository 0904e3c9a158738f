package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Image is a container image tarball (OCI layout) and the name it carries.
type Image struct {
	Name    string `json:"name"`
	Tarball string `json:"tarball"`
}

// ReadImages reads a list of images as hack/images writes it.
func ReadImages(manifest string) ([]Image, error) {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return nil, fmt.Errorf("image list: %w (run `make images`)", err)
	}
	var imgs []Image
	if err := json.Unmarshal(raw, &imgs); err != nil {
		return nil, fmt.Errorf("image list %s: %w", manifest, err)
	}
	return imgs, nil
}

var clusterSeq atomic.Int32

// startNodes brings up cfg.Nodes real nodes and kube-proxy, and waits until every node is
// Ready.
func (c *Cluster) startNodes(ctx context.Context) error {
	if c.cfg.PauseImage == "" || c.cfg.CoreDNSImage == "" {
		return errors.New("localcluster: real nodes need Config.PauseImage and Config.CoreDNSImage")
	}
	sweepCgroups()
	c.cgroup = fmt.Sprintf("%s/%d-%d", cgroupParent, os.Getpid(), clusterSeq.Add(1))
	for i := 1; i <= c.cfg.Nodes; i++ {
		n := newNode(c.cfg.Dir, c.cgroup, i)
		c.Nodes = append(c.Nodes, n)
		if err := n.prepare(); err != nil {
			return err
		}
		if c.Registry != nil {
			if err := writeMirrors(n.mirrorsDir(), c.cfg.Mirrors, c.Registry.Addr); err != nil {
				return err
			}
		}
	}
	tarballs := make([]string, 0, len(c.cfg.Images))
	for _, img := range c.cfg.Images {
		tarballs = append(tarballs, img.Tarball)
	}
	start := time.Now()
	err := forEachNode(c.Nodes, func(n *Node) error {
		if err := n.startContainerd(ctx, c.cfg.BinDir, c.cfg.PauseImage); err != nil {
			return err
		}
		return n.importImages(ctx, c.cfg.BinDir, tarballs)
	})
	if err != nil {
		return err
	}
	c.logf("%d node(s): containerd up, %d image(s) imported after %s", len(c.Nodes), len(tarballs), since(start))
	for _, n := range c.Nodes {
		if err := n.startKubelet(c); err != nil {
			return err
		}
	}
	if err := c.startKubeProxy(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	return poll(ctx, "every node Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			if err := n.retrySocketRace(c); err != nil {
				return false, err
			}
		}
		if err := c.Healthy(); err != nil {
			return false, err
		}
		for _, n := range c.Nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false, nil //nolint:nilerr // not registered yet: poll again
			}
		}
		return true, nil
	})
}

// forEachNode runs f for every node at once and joins the errors.
func forEachNode(nodes []*Node, f func(*Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startKubeProxy runs one kube-proxy (iptables mode) for the namespace all nodes share.
// It leaves the machine's global conntrack sysctls alone.
func (c *Cluster) startKubeProxy() error {
	kp, err := issueClient(c.creds.ca, "system:kube-proxy")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.cfg.Dir, "kube-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*c.kubeconfigFor(kp), kubeconfig); err != nil {
		return fmt.Errorf("while writing %s: %w", kubeconfig, err)
	}
	p, err := startProcess(filepath.Join(c.cfg.Dir, "logs"), "kube-proxy", c.bin("kube-proxy"),
		"--kubeconfig="+kubeconfig, "--hostname-override="+c.Nodes[0].Name, "--proxy-mode=iptables",
		"--cluster-cidr="+PodCIDR, "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0", "--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// Node returns the node of that name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NodeOf returns the node a pod runs on.
func (c *Cluster) NodeOf(pod *corev1.Pod) (*Node, error) {
	if n := c.Node(pod.Spec.NodeName); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("pod %s/%s is on no node of this cluster (%q)", pod.Namespace, pod.Name, pod.Spec.NodeName)
}

// stopNodes kills every node (containers included) and unmounts what they mounted under
// the cluster folder.
func (c *Cluster) stopNodes() {
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil {
			c.logf("stopping %s: %v", n.Name, err)
		}
		// The namespace outlives the cluster when its process starts another: leave no
		// rule or bridge behind.
		_ = n.dropTraffic("-D")
		_ = ip("addr", "del", n.IP+"/32", "dev", "lo")
		_ = ip("link", "del", n.bridge())
	}
	if c.cgroup != "" {
		if err := killCgroup(c.cgroup, 30*time.Second); err != nil {
			c.logf("%v", err)
		}
	}
	unmountUnder(c.cfg.Dir)
}

// unmountUnder detaches every mount below dir (containers' root file systems, volumes,
// network namespaces), deepest first, so that the folder can be removed.
func unmountUnder(dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// ContainerPID is the host process ID of a running container's first process (an init
// container's too), read from its node's containerd.
func (c *Cluster) ContainerPID(pod *corev1.Pod, container string) (int, error) {
	n, err := c.NodeOf(pod)
	if err != nil {
		return 0, err
	}
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if st.Name != container || st.State.Running == nil {
			continue
		}
		_, id, ok := strings.Cut(st.ContainerID, "://")
		if !ok {
			return 0, fmt.Errorf("container %s of %s/%s has ID %q", container, pod.Namespace, pod.Name, st.ContainerID)
		}
		raw, err := os.ReadFile(filepath.Join(n.dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id, "init.pid"))
		if err != nil {
			return 0, fmt.Errorf("container %s of %s/%s: %w", container, pod.Namespace, pod.Name, err)
		}
		var pid int
		if _, err := fmt.Sscan(string(raw), &pid); err != nil {
			return 0, fmt.Errorf("init.pid of %s: %w", id, err)
		}
		return pid, nil
	}
	return 0, fmt.Errorf("container %s of %s/%s is not running", container, pod.Namespace, pod.Name)
}

// RestartNode brings a stopped node back, as a machine that reboots: its network
// returns, containerd and kubelet start again on the same folders, and kubelet restarts
// the pods the API server still binds to it (with new sandboxes and addresses).
func (c *Cluster) RestartNode(ctx context.Context, n *Node) error {
	if c.remote != nil {
		_, err := c.remote.call(ctx, http.MethodPost, "/nodes/"+n.Name+"/restart", 3*time.Minute)
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.stopped {
		return fmt.Errorf("node %s is running", n.Name)
	}
	if err := n.dropTraffic("-D"); err != nil {
		return err
	}
	if err := makeCgroup(n.cgroup + "/system"); err != nil {
		return err
	}
	n.procs = nil
	if err := n.startContainerd(ctx, c.cfg.BinDir, c.cfg.PauseImage); err != nil {
		return err
	}
	if err := n.startKubelet(c); err != nil {
		return err
	}
	n.stopped = false
	return nil
}

// ProcessPID is the host process ID of the process named name (its comm) in a running
// container: what a test kills or stops to crash or hang a program without its kubelet or
// runtime knowing beforehand. The container's first process may be a shell that runs it.
func (c *Cluster) ProcessPID(pod *corev1.Pod, container, name string) (int, error) {
	first, err := c.ContainerPID(pod, container)
	if err != nil {
		return 0, err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", first))
	if err != nil {
		return 0, fmt.Errorf("container %s of %s/%s: %w", container, pod.Namespace, pod.Name, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		if other, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && other == ns {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %s in container %s of %s/%s", name, container, pod.Namespace, pod.Name)
}

// socketRace is how a kubelet fails when another of the ground took devicePluginDir's
// one socket at the same moment: each removes it and listens on it at start.
const socketRace = "device-plugins/kubelet.sock: bind: address already in use"

// retrySocketRace starts the node's kubelet again (at most twice) when it exited over
// the device plugin socket: the kubelets start side by side, and rarely two reach that
// step together.
func (n *Node) retrySocketRace(c *Cluster) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := slices.IndexFunc(n.procs, func(p *process) bool { return p.name == "kubelet" })
	if k < 0 || n.stopped || n.kubeletRetries >= 2 {
		return nil
	}
	if done, _ := n.procs[k].exited(); !done || !strings.Contains(n.procs[k].tail(), socketRace) {
		return nil
	}
	n.procs = slices.Delete(n.procs, k, k+1)
	n.kubeletRetries++
	c.logf("node %s: kubelet lost the device plugin socket to another; starting it again", n.Name)
	return n.startKubelet(c) // as RestartNode does, under the node's lock
}
