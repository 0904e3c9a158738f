// Command scorecard-local runs the bundle's scorecard configuration on this machine, as
// `make scorecard-local` does: the built-in tests through the real scorecard-test binary
// with the bundle at /bundle, Dolphin's own tests against the real-node test ground with
// the operator installed by `make deploy`. It prints a summary and writes scorecard's v1alpha3 TestList as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"

	"github.com/dolphin-operator/dolphin/scorecard/local"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

func main() {
	bundle := flag.String("bundle", "bundle", "the bundle folder")
	scorecardTest := flag.String("scorecard-test", "bin/scorecard-test", "the built-in tests' binary")
	dolphinTests := flag.String("dolphin-tests", "bin/dolphin-scorecard-tests", "Dolphin's tests' binary")
	out := flag.String("output", "scorecard-results.json", "where to write the v1alpha3 TestList")
	flag.Parse()
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	failed, err := run(*bundle, *scorecardTest, *dolphinTests, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "%d scorecard tests did not pass:\n", len(failed))
		for _, f := range failed {
			fmt.Fprintln(os.Stderr, "  "+f)
		}
		os.Exit(1)
	}
}

func run(bundle, scorecardTest, dolphinTests, out string) ([]string, error) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	r := &local.Runner{Bundle: abs(bundle), ScorecardTest: abs(scorecardTest), DolphinTests: abs(dolphinTests),
		Namespace: "default", Log: os.Stdout}
	cfg, err := local.ReadConfig(r.Bundle)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if local.NeedsCluster(cfg) {
		// The cluster's progress goes next to the results, for a post-mortem.
		logFile, err := os.Create(strings.TrimSuffix(out, filepath.Ext(out)) + "-cluster.log")
		if err != nil {
			return nil, fmt.Errorf("while creating the cluster log: %w", err)
		}
		defer logFile.Close()
		g, err := ground.Start(ctx, ground.Options{Log: logFile})
		if err != nil {
			return nil, err
		}
		defer g.Stop()
		defer func() { fmt.Fprintf(logFile, "operator log (end):\n%s\n", g.OperatorLogs(context.Background())) }()
		r.Kubeconfig = g.Kubeconfig
	}
	list, err := r.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("while encoding the results: %w", err)
	}
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		return nil, fmt.Errorf("while writing %s: %w", out, err)
	}
	failed := local.Failed(list)
	fmt.Printf("scorecard: %d passed, %d failed\n", countResults(list)-len(failed), len(failed))
	fmt.Printf("results: %s\n", out)
	return failed, nil
}

func countResults(list scapiv1alpha3.TestList) int {
	n := 0
	for _, t := range list.Items {
		n += len(t.Status.Results)
	}
	return n
}
