package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

func TestMain(m *testing.M) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestTheHarnessMeasuresBothOperators is the benchmark at unit size: three clusters for each
// operator, a five-second window. It checks that every figure the benchmark prints comes
// from a run that happened: each operator converged its clusters and a fourth one, its
// process was sampled, and the audit log holds its own requests (the leader lease it
// renews every two seconds) under its own user.
func TestTheHarnessMeasuresBothOperators(t *testing.T) {
	ground.Level(t, ground.Full)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	out, err := exec.Command("go", "list", "-C", filepath.Join(root, "hack/tools/moco"), "-m", "-f", "{{.Dir}}",
		"github.com/cybozu-go/moco").Output()
	if err != nil {
		t.Fatalf("moco's module (make moco fetches it): %v", err)
	}
	for _, op := range []operator{
		dolphin(root, filepath.Join(bin, "manager")),
		moco(strings.TrimSpace(string(out)), filepath.Join(bin, "moco-controller"), 0),
	} {
		t.Run(op.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := config{op: op, n: 3, rate: 50, namespaces: 2, settle: time.Second, steady: 5 * time.Second,
				converge: 2 * time.Minute, binDir: bin, log: t.Logf}
			r, err := run(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.line(c))
			if r.converged != 3 || r.newS < 0 {
				t.Errorf("%d of 3 clusters converged, the fourth in %.2f s (-1: never)", r.converged, r.newS)
			}
			if r.peakMB <= 0 || r.cpuConv <= 0 || r.steadyS < 5 {
				t.Errorf("the process was not sampled: peak %.0f MB, %.2f CPU s, a %.1f s window", r.peakMB, r.cpuConv, r.steadyS)
			}
			if r.writes < 1 {
				t.Errorf("the audit log holds no write of %s's in the window (its lease is renewed every 2 s)", op.name)
			}
			if op.name == "dolphin" && r.passes < 1 {
				t.Errorf("no topology pass counted in the window")
			}
		})
	}
}

// The ratio table compares medians: with three runs each, one slow run of either operator
// does not decide the figure.
func TestTheRatioTableComparesMedians(t *testing.T) {
	ground.Level(t, ground.Full)
	runOf := func(op string, converge float64, reads int) row {
		return row{op: op, n: 1000, dbs: "refused", r: result{convergeS: converge, p95: converge, peakMB: 100,
			cpuSteady: 10, reads: reads, writes: 150, dials: 1000}}
	}
	rows := []row{
		runOf("dolphin", 400, 0), runOf("moco", 250, 6000), // one slow Dolphin run, the first
		runOf("dolphin", 240, 0), runOf("moco", 240, 6100),
		runOf("dolphin", 230, 0), runOf("moco", 260, 5900),
		runOf("moco-qps500", 100, 10000),
	}
	table := ratios(rows)
	want := fmt.Sprintf("%-6d %-8s %5s %10s", 1000, "refused", "3/3", "0.96") // 240 over 250
	if !strings.Contains(table, want) {
		t.Fatalf("want a row starting %q in:\n%s", want, table)
	}
	if !strings.Contains(table, "0.00") || strings.Count(table, "\n1000 ") != 1 {
		t.Fatalf("one row, reads 0 over moco's median:\n%s", table)
	}
}
