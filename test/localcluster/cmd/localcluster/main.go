// Command localcluster runs the local test cluster by hand: `localcluster demo` is what
// `make demo` runs (control plane, MySQL pod runner, the operator, a sample cluster), and
// `localcluster up` is the same without the operator, for running one from a debugger.
//
// Everything lives in a private network namespace that ends with this process; the
// kubectl wrapper it writes enters that namespace, so the cluster is usable from any shell
// while this command runs. Ctrl-C stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dolphin-operator/dolphin/test/localcluster"
)

type options struct {
	manager   string
	binDir    string
	repoRoot  string
	run       string
	samples   stringList
	stateDir  string
	waitReady time.Duration
	exit      bool
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "demo" && os.Args[1] != "up") {
		fmt.Fprintln(os.Stderr, "usage: localcluster demo|up [flags] (-h for the flags)")
		os.Exit(2)
	}
	mode := os.Args[1]
	var o options
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	fs.StringVar(&o.manager, "manager", "", "operator binary to run in the cluster (demo: required)")
	fs.StringVar(&o.binDir, "bin-dir", envOr("DOLPHIN_BIN_DIR", "bin"), "folder of the control-plane binaries and kubectl")
	fs.StringVar(&o.repoRoot, "repo-root", ".", "the repository: CRDs, webhook configurations")
	fs.StringVar(&o.run, "run", "", "a shell command to run against the cluster (KUBECONFIG set) once it is up; its exit status becomes ours")
	fs.Var(&o.samples, "sample", "manifest to apply once the operator runs (repeatable)")
	fs.StringVar(&o.stateDir, "state-dir", ".run/demo", "folder for the cluster's files; emptied at start")
	fs.DurationVar(&o.waitReady, "wait-ready", 0, "how long to wait for each sample's Ready condition (0: do not wait)")
	fs.BoolVar(&o.exit, "exit", false, "stop once the samples are Ready instead of waiting for Ctrl-C")
	_ = fs.Parse(os.Args[2:])
	if mode == "demo" && o.manager == "" {
		fmt.Fprintln(os.Stderr, "localcluster demo: --manager is required (make demo builds bin/manager)")
		os.Exit(2)
	}
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := run(mode, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(mode string, o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	state, err := filepath.Abs(o.stateDir)
	if err != nil {
		return fmt.Errorf("state folder: %w", err)
	}
	clusterDir := filepath.Join(state, "cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		return fmt.Errorf("while clearing %s: %w", clusterDir, err)
	}
	binDir, err := filepath.Abs(o.binDir)
	if err != nil {
		return fmt.Errorf("binary folder: %w", err)
	}
	c, err := start(ctx, mode, o, binDir, clusterDir)
	if err != nil {
		return err
	}
	defer c.Stop()
	kubectl, err := writeKubectl(state, binDir, c)
	if err != nil {
		return err
	}
	if err := applySamples(ctx, kubectl, o); err != nil {
		return err
	}
	if o.run != "" {
		cmd := exec.CommandContext(ctx, "sh", "-c", o.run)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", o.run, err)
		}
		return nil
	}
	fmt.Printf("\nThe cluster is up. From another shell:\n  %s get mysqlclusters,pods,services -A\n", kubectl)
	if o.exit {
		return nil
	}
	fmt.Println("Press Ctrl-C to stop it.")
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nStopping.")
			return nil
		case <-time.After(time.Second):
			if err := c.Healthy(); err != nil {
				return err
			}
		}
	}
}

// start brings up the cluster: with the operator for demo, without it for up.
func start(ctx context.Context, mode string, o options, binDir, dir string) (*localcluster.Cluster, error) {
	root, err := filepath.Abs(o.repoRoot)
	if err != nil {
		return nil, fmt.Errorf("repository folder: %w", err)
	}
	manager := o.manager
	if mode != "demo" {
		manager = ""
	}
	d, err := localcluster.StartDolphin(ctx, localcluster.DolphinOptions{RepoRoot: root, Manager: manager,
		Dir: dir, BinDir: binDir, Log: os.Stdout})
	if err != nil {
		return nil, err
	}
	if d.Operator != nil {
		fmt.Printf("Operator ready on %s, webhooks registered (log: %s)\n", d.Operator.PodIP, d.Operator.LogPath())
	}
	return d.Cluster, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// writeKubectl writes <state>/kubectl, which runs our kubectl inside this namespace.
func writeKubectl(state, binDir string, c *localcluster.Cluster) (string, error) {
	bin := filepath.Join(binDir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kubectl: %w (run `make cluster-tools`)", err)
	}
	path := filepath.Join(state, "kubectl")
	script := fmt.Sprintf("#!/bin/sh\n# Runs kubectl inside the local cluster's network namespace (written by localcluster).\n"+
		"exec nsenter --net=/proc/%d/ns/net %q --kubeconfig=%q \"$@\"\n", os.Getpid(), bin, c.Kubeconfig)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("while writing %s: %w", path, err)
	}
	return path, nil
}

// applySamples applies each sample, waits for its Ready condition if asked to, and shows it.
func applySamples(ctx context.Context, kubectl string, o options) error {
	for _, s := range o.samples {
		if out, err := exec.CommandContext(ctx, kubectl, "apply", "-f", s).CombinedOutput(); err != nil {
			return fmt.Errorf("while applying %s: %w: %s", s, err, out)
		}
		fmt.Printf("Applied %s\n", s)
		if o.waitReady > 0 {
			start := time.Now()
			wait := exec.CommandContext(ctx, kubectl, "wait", "--for=condition=Ready",
				"--timeout="+o.waitReady.String(), "-f", s)
			if out, err := wait.CombinedOutput(); err != nil {
				return fmt.Errorf("%s did not become Ready: %w: %s", s, err, out)
			}
			fmt.Printf("Ready after %s:\n", time.Since(start).Round(100*time.Millisecond))
		}
		get := exec.CommandContext(ctx, kubectl, "get", "-f", s)
		get.Stdout, get.Stderr = os.Stdout, os.Stderr
		if err := get.Run(); err != nil {
			return fmt.Errorf("while showing %s: %w", s, err)
		}
	}
	return nil
}
