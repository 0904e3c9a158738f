package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Network layout inside the namespace.
const (
	// PodCIDR is routed as local addresses on lo: every pod IP is ours.
	PodCIDR = "10.244.0.0/16"
	// ServiceCIDR holds ClusterIPs; nothing routes them (clients use endpoints or DNS-free IPs).
	ServiceCIDR = "10.96.0.0/16"
	// HostIP is the API server's advertise address and the fake node's IP: kube-apiserver
	// refuses a loopback advertise address.
	HostIP = "10.250.0.1"
)

// envInNetNS marks the re-executed child.
const envInNetNS = "DOLPHIN_LOCALCLUSTER_NETNS"

// ErrNotInNetNS means Start was called outside the private namespace: call EnterNetNS first.
var ErrNotInNetNS = errors.New("localcluster: not inside its network namespace (call EnterNetNS from TestMain or main)")

// InNetNS reports whether this process is the one EnterNetNS created.
func InNetNS() bool { return os.Getenv(envInNetNS) == "1" }

// EnterNetNS makes sure the rest of the program runs in a private network namespace.
//
// Outside one, it starts this same program again (same arguments, same environment) in a
// new network namespace, waits for it, and exits with its exit code; it never returns
// there. Signals it receives (^C) are passed on. Without root it also enters a new user
// namespace mapping the caller to root, which is enough to own a network namespace.
//
// Inside the namespace (the child), it sets up lo and the routes and returns nil.
func EnterNetNS() error {
	if InNetNS() {
		return setupNetwork()
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("while finding this program: %w", err)
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInNetNS+"=1")
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
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

// setupNetwork brings lo up, gives it the host IP and routes the pod CIDR to it as local.
func setupNetwork() error {
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "replace", HostIP + "/32", "dev", "lo"},
		{"route", "replace", "local", PodCIDR, "dev", "lo", "table", "local"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("while setting up the namespace's network (ip %v): %w: %s", s, err, out)
		}
	}
	return nil
}
