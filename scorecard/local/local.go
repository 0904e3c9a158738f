// Package local runs a bundle's scorecard configuration without a container runtime:
// scorecard runs each test as a pod from an image, which needs nodes that run containers.
// Here the built-in tests run as the real scorecard-test binary (from the pinned
// operator-sdk module) in a throwaway root where the bundle sits at /bundle, exactly where
// scorecard mounts it; Dolphin's own tests run as processes against the local cluster
// with Dolphin installed. Results are reported as scorecard reports them.
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"sigs.k8s.io/yaml"
)

// Runner knows where the test binaries and the bundle are.
type Runner struct {
	// Bundle is the bundle folder (manifests/, metadata/, tests/scorecard/config.yaml).
	Bundle string
	// ScorecardTest is the built-in tests' binary; DolphinTests Dolphin's.
	ScorecardTest, DolphinTests string
	// Kubeconfig and Namespace are for tests that need a cluster.
	Kubeconfig, Namespace string
	// Log receives a line per test.
	Log io.Writer
}

// ReadConfig reads the bundle's scorecard configuration.
func ReadConfig(bundle string) (*scapiv1alpha3.Configuration, error) {
	raw, err := os.ReadFile(filepath.Join(bundle, "tests", "scorecard", "config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("while reading the scorecard configuration: %w", err)
	}
	cfg := &scapiv1alpha3.Configuration{}
	if err := yaml.Unmarshal(raw, cfg); err != nil {
		return nil, fmt.Errorf("while parsing the scorecard configuration: %w", err)
	}
	return cfg, nil
}

// NeedsCluster reports whether any configured test is one of Dolphin's (they need a cluster).
func NeedsCluster(cfg *scapiv1alpha3.Configuration) bool {
	for _, st := range cfg.Stages {
		for _, t := range st.Tests {
			if len(t.Entrypoint) > 0 && t.Entrypoint[0] == "dolphin-scorecard-tests" {
				return true
			}
		}
	}
	return false
}

// Run runs every configured test and returns the results as scorecard's TestList.
func (r *Runner) Run(ctx context.Context, cfg *scapiv1alpha3.Configuration) (scapiv1alpha3.TestList, error) {
	list := scapiv1alpha3.NewTestList()
	for _, st := range cfg.Stages {
		for _, tc := range st.Tests {
			status, err := r.runOne(ctx, tc)
			if err != nil {
				status = scapiv1alpha3.TestStatus{Results: []scapiv1alpha3.TestResult{{
					Name: tc.Labels["test"], State: scapiv1alpha3.ErrorState, Errors: []string{err.Error()}}}}
			}
			test := scapiv1alpha3.NewTest()
			test.Spec = tc
			test.Status = status
			list.Items = append(list.Items, test)
			for _, res := range status.Results {
				fmt.Fprintf(r.Log, "%-40s %s\n", res.Name, res.State)
			}
		}
	}
	return list, nil
}

func (r *Runner) runOne(ctx context.Context, tc scapiv1alpha3.TestConfiguration) (scapiv1alpha3.TestStatus, error) {
	if len(tc.Entrypoint) == 0 {
		return scapiv1alpha3.TestStatus{}, errors.New("a test without an entrypoint")
	}
	var cmd *exec.Cmd
	switch tc.Entrypoint[0] {
	case "scorecard-test":
		root, err := r.chrootWithBundle()
		if err != nil {
			return scapiv1alpha3.TestStatus{}, err
		}
		defer os.RemoveAll(root)
		cmd = exec.CommandContext(ctx, "/scorecard-test", tc.Entrypoint[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
	case "dolphin-scorecard-tests":
		args := append([]string{"--bundle=" + r.Bundle, "--namespace=" + r.Namespace}, tc.Entrypoint[1:]...)
		cmd = exec.CommandContext(ctx, r.DolphinTests, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+r.Kubeconfig)
	default:
		return scapiv1alpha3.TestStatus{}, fmt.Errorf("no local runner for entrypoint %q", tc.Entrypoint[0])
	}
	// Scorecard reads a test's result from its pod's log, where stdout and stderr are one
	// stream: anything a test prints to either must leave the JSON whole.
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	runErr := cmd.Run()
	var status scapiv1alpha3.TestStatus
	if err := json.Unmarshal(log.Bytes(), &status); err != nil {
		return status, fmt.Errorf("%v printed no TestStatus as its whole log (%w): %s", tc.Entrypoint, errors.Join(runErr, err), log.String())
	}
	return status, nil
}

// chrootWithBundle makes a throwaway root holding the scorecard-test binary and a copy of
// the bundle at /bundle, where scorecard mounts it in a test pod.
func (r *Runner) chrootWithBundle() (string, error) {
	root, err := os.MkdirTemp("", "scorecard-root-")
	if err != nil {
		return "", fmt.Errorf("while making a root for scorecard-test: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", fmt.Errorf("while making /tmp: %w", err)
	}
	if out, err := exec.Command("cp", "-rL", r.Bundle, filepath.Join(root, "bundle")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("while copying the bundle: %w: %s", err, out)
	}
	if out, err := exec.Command("cp", "-L", r.ScorecardTest, filepath.Join(root, "scorecard-test")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("while copying scorecard-test: %w: %s", err, out)
	}
	return root, nil
}

// Failed lists the tests that did not pass.
func Failed(list scapiv1alpha3.TestList) []string {
	var out []string
	for _, t := range list.Items {
		for _, res := range t.Status.Results {
			if res.State != scapiv1alpha3.PassState {
				out = append(out, fmt.Sprintf("%s: %s %v", res.Name, res.State, res.Errors))
			}
		}
	}
	return out
}
