// Command scale measures an operator looking after many clusters on one control plane,
// Dolphin side by side with cybozu-go/moco, each on a fresh local control plane with a
// kwok node (pods that run nothing: at this scale simulation is the point) and no mysqld,
// so each operator finds its databases unreachable: refused at once, or (--silent) with
// the SYNs to MySQL's ports dropped. Each operator runs as its own user bound to its own
// ClusterRole, so the API server's audit log tells its requests apart.
//
// For each operator and N it creates N three-instance clusters across --namespaces
// namespaces at --rate a second, waits until each has its StatefulSet, a Service, a
// Secret and a ConfigMap (controller-owned children), then measures a steady window,
// and last one more cluster's time to its children. One line a run:
//
//	scale op=<name> n=<N> dbs=refused|silent converged=<clusters> converge_s=<first create to last converged>
//	  p50_s= p95_s= max_s=<per-cluster create to children> new_s=<one more cluster, while the rest idle>
//	  peak_rss_mb=<VmHWM, the whole run> peak_rss_steady_mb=<the steady window's own> cpu_s_conv= cpu_s_steady= steady_s=
//	  reads_5m= writes_5m= discovery_5m=<audit log, scaled to 300 s> rest_gets_5m= rest_writes_5m=<the
//	  operator's rest_client_requests_total> dials_5m=<TCP ActiveOpens> reconciles_5m= queue_depth_max=
//
// then a table of Dolphin's figures over moco's per N. It asserts no timing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dolphin-operator/dolphin/test/localcluster"
)

func main() {
	// envtest's CRD installer logs through controller-runtime; the harness prints its own.
	ctrllog.SetLogger(logr.Discard())
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
	var (
		ns          = flag.String("n", "100", "cluster counts, space- or comma-separated")
		ops         = flag.String("ops", "dolphin moco", "operators: dolphin, moco, moco-qps500 (moco with --apiserver-qps-throttle=500)")
		dbs         = flag.String("dbs", "refused", "how databases fail: refused, silent, or both")
		rate        = flag.Float64("rate", 50, "clusters created a second")
		namespaces  = flag.Int("namespaces", 10, "namespaces the clusters are spread over")
		settle      = flag.Duration("settle", 30*time.Second, "the pause after convergence before the steady window")
		steadyWin   = flag.Duration("steady", 300*time.Second, "the steady window measured after convergence")
		convergeMax = flag.Duration("converge-timeout", 20*time.Minute, "the longest convergence waited for")
		root        = flag.String("root", ".", "this checkout (CRDs and RBAC under config/)")
		dolphinBin  = flag.String("dolphin", "bin/manager", "Dolphin's manager")
		mocoBin     = flag.String("moco", "bin/moco-controller", "moco's controller")
		mocoDir     = flag.String("moco-module", "", "moco's module folder (its config/)")
		binDir      = flag.String("bin-dir", "bin", "the control plane's binaries")
		repeat      = flag.Int("repeat", 1, "runs of each (operator, N, variant), the operators taking turns; the ratio table compares medians")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
	if *repeat < 1 {
		fail(fmt.Errorf("--repeat: %d is not a positive count", *repeat))
	}
	// Every operator is resolved before the first run: a misspelt one fails at once, not
	// an hour into the matrix.
	var operators []operator
	for _, name := range fields(*ops) {
		op, err := pick(name, *root, *dolphinBin, *mocoBin, *mocoDir)
		if err != nil {
			fail(err)
		}
		operators = append(operators, op)
	}
	var results []row
	for _, nStr := range fields(*ns) {
		n, err := strconv.Atoi(nStr)
		if err != nil || n < 1 {
			fail(fmt.Errorf("--n: %q is not a positive count", nStr))
		}
		// The operators take turns, so that a drift of the machine's pace over the runs
		// reaches each of them alike.
		for range *repeat {
			results = append(results, runAll(ctx, config{n: n, rate: *rate, namespaces: *namespaces, settle: *settle,
				steady: *steadyWin, converge: *convergeMax, binDir: *binDir, log: logf}, operators, *dbs)...)
		}
	}
	fmt.Print(ratios(results))
}

// runAll runs each operator once for each variant of base's N and prints each line.
func runAll(ctx context.Context, base config, ops []operator, dbs string) []row {
	var out []row
	for _, op := range ops {
		for _, variant := range variants(dbs) {
			c := base
			c.op, c.silent = op, variant == "silent"
			c.log("run: %s n=%d dbs=%s", op.name, c.n, variant)
			res, err := run(ctx, c)
			if err != nil {
				fail(fmt.Errorf("%s n=%d dbs=%s: %w", op.name, c.n, variant, err))
			}
			fmt.Println(res.line(c))
			out = append(out, row{op: op.name, n: c.n, dbs: variant, r: res})
		}
	}
	return out
}

func pick(name, root, dolphinBin, mocoBin, mocoDir string) (operator, error) {
	switch {
	case name == "dolphin":
		return dolphin(root, dolphinBin), nil
	case name == "moco" || strings.HasPrefix(name, "moco-qps"):
		if mocoDir == "" {
			return operator{}, fmt.Errorf("--moco-module is needed to run %s", name)
		}
		qps := 0
		if q, ok := strings.CutPrefix(name, "moco-qps"); ok {
			v, err := strconv.Atoi(q)
			if err != nil || v < 1 {
				return operator{}, fmt.Errorf("--ops: %q: the QPS after moco-qps is not a positive number", name)
			}
			qps = v
		}
		return moco(mocoDir, mocoBin, qps), nil
	}
	return operator{}, fmt.Errorf("--ops: %q is none of dolphin, moco, moco-qps<N>", name)
}

func variants(dbs string) []string {
	switch dbs {
	case "both":
		return []string{"refused", "silent"}
	case "silent":
		return []string{"silent"}
	case "refused":
		return []string{"refused"}
	}
	fail(fmt.Errorf("--dbs: %q is none of refused, silent, both", dbs))
	return nil
}

func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-scale:", err)
	os.Exit(1)
}

// row is one run's result, for the ratio table.
type row struct {
	op, dbs string
	n       int
	r       result
}

// ratios is a table of Dolphin's figures over moco's (defaults) for each N and variant
// both ran, each figure the median of its runs: below 1 means Dolphin needed less.
func ratios(rows []row) string {
	var b strings.Builder
	header := false
	done := map[string]bool{}
	for _, d := range rows {
		key := fmt.Sprintf("%d/%s", d.n, d.dbs)
		if d.op != "dolphin" || done[key] {
			continue
		}
		done[key] = true
		m, runs := medians(rows, "moco", d.n, d.dbs)
		if runs == 0 {
			continue
		}
		dm, dRuns := medians(rows, "dolphin", d.n, d.dbs)
		if !header {
			fmt.Fprintf(&b, "\n%-6s %-8s %5s %10s %10s %10s %10s %10s %10s %10s\n", "n", "dbs", "runs",
				"converge", "p95", "peak_rss", "cpu_steady", "reads", "writes", "dials")
			header = true
		}
		fmt.Fprintf(&b, "%-6d %-8s %5s %10s %10s %10s %10s %10s %10s %10s\n", d.n, d.dbs, fmt.Sprintf("%d/%d", dRuns, runs),
			ratio(dm.convergeS, m.convergeS), ratio(dm.p95, m.p95), ratio(dm.peakMB, m.peakMB),
			ratio(dm.cpuSteady, m.cpuSteady), ratio(float64(dm.reads), float64(m.reads)),
			ratio(float64(dm.writes), float64(m.writes)), ratio(float64(dm.dials), float64(m.dials)))
	}
	if header {
		b.WriteString("(Dolphin / moco with its defaults, medians of each one's runs; below 1: Dolphin needed less)\n")
	}
	return b.String()
}

// medians is, of the op's runs at n and dbs, the median of each figure the ratio table
// compares, and how many runs there were.
func medians(rows []row, op string, n int, dbs string) (result, int) {
	var rs []result
	for _, r := range rows {
		if r.op == op && r.n == n && r.dbs == dbs {
			rs = append(rs, r.r)
		}
	}
	med := func(f func(result) float64) float64 {
		if len(rs) == 0 {
			return 0
		}
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return result{
		convergeS: med(func(r result) float64 { return r.convergeS }),
		p95:       med(func(r result) float64 { return r.p95 }),
		peakMB:    med(func(r result) float64 { return r.peakMB }),
		cpuSteady: med(func(r result) float64 { return r.cpuSteady }),
		reads:     int(med(func(r result) float64 { return float64(r.reads) })),
		writes:    int(med(func(r result) float64 { return float64(r.writes) })),
		dials:     int64(med(func(r result) float64 { return float64(r.dials) })),
	}, len(rs)
}

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "1.00"
		}
		return "inf"
	}
	return fmt.Sprintf("%.2f", a/b)
}
