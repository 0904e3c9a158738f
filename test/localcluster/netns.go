package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// Network layout inside the namespace.
const (
	// PodCIDR holds every node's pod subnet: node i (from 1) has 10.244.i.0/24 on its own
	// bridge cni<i>.
	PodCIDR = "10.244.0.0/16"
	// ServiceCIDR holds ClusterIPs, which kube-proxy's rules translate.
	ServiceCIDR = "10.96.0.0/16"
	// DNSServiceIP is CoreDNS's ClusterIP, the pods' and the namespace's name server.
	DNSServiceIP = "10.96.0.10"
	// HostIP is the API server's advertise address (node i has 10.250.0.<i+1>, all on lo):
	// kube-apiserver refuses a loopback advertise address, and a stopped node's address
	// stops answering, so the control plane has one of its own.
	HostIP = "10.250.0.1"
)

// EnvInNetNS marks the re-executed child ("1") and, once it set the namespaces up, its
// children ("ready"), which share them and must not set them up again.
const EnvInNetNS = "DOLPHIN_LOCALCLUSTER_NETNS"

// ErrNotInNetNS means Start was called outside the private namespace: call EnterNetNS first.
var ErrNotInNetNS = errors.New("localcluster: not inside its network namespace (call EnterNetNS from TestMain or main)")

// InNetNS reports whether this process is the one EnterNetNS created.
func InNetNS() bool { v := os.Getenv(EnvInNetNS); return v == "1" || v == "ready" }

// EnterNetNS makes sure the rest of the program runs in a private network and mount
// namespace.
//
// Outside one, it starts this same program again (same arguments, same environment) in
// new network and mount namespaces, waits for it, and exits with its exit code; it never
// returns there. Signals it receives (^C) are passed on. It needs root: real nodes need
// cgroups, mounts and iptables.
//
// Inside the namespaces (the child), it makes every mount private (nothing mounted here,
// containers' file systems included, reaches the host), sets up lo and forwarding, and
// returns nil. A program that a process inside them started (a test package that attaches
// to a running cluster) is inside already: it returns nil at once.
func EnterNetNS() error {
	if os.Getenv(EnvInNetNS) == "ready" {
		return nil
	}
	if InNetNS() {
		if err := setupNetwork(); err != nil {
			return err
		}
		return os.Setenv(EnvInNetNS, "ready")
	}
	if os.Geteuid() != 0 {
		return errors.New("localcluster: needs root (real nodes need cgroups, mounts and iptables)")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("while finding this program: %w", err)
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), EnvInNetNS+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("while starting %s in a new network namespace: %w", self, err)
	}
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			os.Exit(128 + int(st.Signal()))
		}
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
	return nil
}

// devicePluginDir is where kubelets put their device plugin socket (fixed in the kubelet).
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// setupNetwork makes the mounts private, gives the namespace its own devicePluginDir, brings lo up with the host IP and turns on IPv4
// forwarding (pods of one node reach another's through this namespace).
func setupNetwork() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("while making the mount namespace private: %w", err)
	}
	// Every kubelet listens for device plugins on one fixed path, whatever its root
	// folder: a folder of this namespace's own, so that grounds running side by side
	// (the test packages of one `go test`) do not take each other's socket.
	if err := os.MkdirAll(devicePluginDir, 0o750); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", devicePluginDir, "tmpfs", 0, "size=1m"); err != nil {
		return fmt.Errorf("while mounting %s: %w", devicePluginDir, err)
	}
	if err := ip("link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := ip("addr", "replace", HostIP+"/32", "dev", "lo"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("while turning on forwarding: %w", err)
	}
	return nil
}

// ip runs one `ip` command.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
