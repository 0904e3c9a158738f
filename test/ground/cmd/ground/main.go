// Command ground runs the real-node test ground by hand: `ground demo` is what `make demo`
// runs (control plane, real nodes, the operator installed by `make deploy`, a sample
// cluster), and `ground up` is the same with Dolphin's CRDs but without the operator, for
// running one as a process (`make run`) or from a debugger.
//
// Everything lives in a private network and mount namespace that ends with this process;
// the kubectl wrapper it writes enters those namespaces, so the cluster is usable from any
// shell while this command runs. Ctrl-C stops everything.
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

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/release"
)

type options struct {
	nodes     int
	binDir    string
	run       string
	samples   stringList
	stateDir  string
	waitReady time.Duration
	exit      bool
	// releaseImages is release-images' manifest: with it, the ground runs a registry that
	// the nodes pull quay.io's images from, and those images are pushed there.
	releaseImages string
	// moreImages are image lists (as hack/images writes them) the nodes hold as well.
	moreImages stringList
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "demo" && os.Args[1] != "up") {
		fmt.Fprintln(os.Stderr, "usage: ground demo|up [flags] (-h for the flags)")
		os.Exit(2)
	}
	mode := os.Args[1]
	var o options
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	fs.IntVar(&o.nodes, "nodes", ground.DefaultNodes, "number of nodes")
	fs.StringVar(&o.binDir, "bin-dir", envOr("DOLPHIN_BIN_DIR", "bin"), "folder of the tools (kubelet, containerd, kubectl, ...)")
	fs.StringVar(&o.run, "run", "", "a shell command to run against the cluster (KUBECONFIG set, and "+ground.EnvGround+
		" naming the cluster's folder: test packages attach to it) once it is up; its exit status becomes ours")
	fs.Var(&o.moreImages, "more-images", "an image list (as hack/images writes it) whose images the nodes hold too (repeatable)")
	fs.Var(&o.samples, "sample", "manifest to apply once the operator runs (repeatable)")
	fs.StringVar(&o.stateDir, "state-dir", ".run/demo", "folder for the cluster's files; emptied at start")
	fs.DurationVar(&o.waitReady, "wait-ready", 0, "how long to wait for each sample's Ready condition (0: do not wait)")
	fs.BoolVar(&o.exit, "exit", false, "stop once the samples are Ready instead of waiting for Ctrl-C")
	fs.StringVar(&o.releaseImages, "release-images", "", "release-images' manifest: serve those images to the nodes as their registry's (quay.io) (`make release-images` writes it)")
	_ = fs.Parse(os.Args[2:])
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
	began := time.Now()
	c, err := start(ctx, mode, o, binDir, clusterDir)
	if err != nil {
		return err
	}
	defer c.Stop()
	if err := c.Serve(ctx); err != nil {
		return err
	}
	up := time.Since(began)
	kubectl, err := writeKubectl(state, binDir, c.Cluster)
	if err != nil {
		return err
	}
	if err := applySamples(ctx, kubectl, o); err != nil {
		return err
	}
	fmt.Printf("\nStages: cluster%s up %s; samples applied and Ready %s later; %s in all.\n",
		map[bool]string{true: " and operator", false: ""}[mode == "demo"], up.Round(100*time.Millisecond),
		(time.Since(began) - up).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
	if o.run != "" {
		cmd := exec.CommandContext(ctx, "sh", "-c", o.run)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, ground.EnvGround+"="+c.Dir())
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

// start brings up the ground: with the operator for demo; for up, with Dolphin's CRDs
// (make install) and no operator.
func start(ctx context.Context, mode string, o options, binDir, dir string) (*ground.Ground, error) {
	var mirrors []string
	var images *release.Manifest
	if o.releaseImages != "" {
		m, err := release.ReadManifest(o.releaseImages)
		if err != nil {
			return nil, err
		}
		images, mirrors = m, []string{release.Host}
	}
	g, err := ground.Start(ctx, ground.Options{Nodes: o.nodes, Dir: dir, BinDir: binDir, Log: os.Stdout,
		WithoutOperator: mode != "demo", Mirrors: mirrors, MoreImages: o.moreImages})
	if err != nil {
		return nil, err
	}
	if images != nil {
		if err := images.PushTo(ctx, g.Registry); err != nil {
			g.Stop()
			return nil, err
		}
		fmt.Printf("%d release images served as quay.io's from %s\n", len(images.Images), g.Registry.Addr)
	}
	if mode != "demo" {
		if out, err := g.Make(ctx, "install"); err != nil {
			g.Stop()
			return nil, fmt.Errorf("%w\n%s", err, out)
		}
	}
	return g, nil
}

// shellQuote quotes name=value's value for sh.
func shellQuote(kv string) string {
	k, v, _ := strings.Cut(kv, "=")
	return k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// writeKubectl writes <state>/enter, which runs a command inside this process's network
// and mount namespaces with KUBECONFIG set (`.run/up/enter make run` runs the manager as a
// local process against the ground) and the ground named for test packages to attach to
// (`.run/demo/enter go test -run X ./test/e2e/`), and <state>/kubectl, which runs our
// kubectl there.
func writeKubectl(state, binDir string, c *localcluster.Cluster) (string, error) {
	bin := filepath.Join(binDir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kubectl: %w (run `make cluster-tools`)", err)
	}
	enter := filepath.Join(state, "enter")
	// The environment make gave this process (the image lists, the tools' folder, ...), so
	// that a test run through enter finds what a make target's run finds.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DOLPHIN_") && k != localcluster.EnvInNetNS && k != ground.EnvGround ||
			k == "KUBEBUILDER_ASSETS" {
			env = append(env, shellQuote(kv))
		}
	}
	script := fmt.Sprintf("#!/bin/sh\n# Runs a command inside the test ground's network and mount namespaces (written by ground).\n"+
		"export %s\nKUBECONFIG=%q %s=%q %s=ready exec nsenter --net=/proc/%d/ns/net --mount=/proc/%d/ns/mnt --wd=\"$PWD\" \"$@\"\n",
		strings.Join(append(env, "PATH=\"$PATH\""), " "), c.Kubeconfig, ground.EnvGround, c.Dir(), localcluster.EnvInNetNS, os.Getpid(), os.Getpid())
	if err := os.WriteFile(enter, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("while writing %s: %w", enter, err)
	}
	path := filepath.Join(state, "kubectl")
	script = fmt.Sprintf("#!/bin/sh\n# Runs kubectl inside the test ground (written by ground).\nexec %q %q \"$@\"\n", enter, bin)
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
