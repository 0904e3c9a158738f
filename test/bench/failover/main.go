// Command failover measures, on the real-node test ground, how long a MySQLCluster is
// without a writable primary: after the primary's node is lost (failover: node stopped →
// a new primary accepts writes through the primary Service), after the primary's mysqld is
// killed (kubelet restarts it: kill → writes accepted again), after it is killed and kept
// down (its container's shell stopped first, so nothing restarts it: kill → a new primary
// accepts writes), after it hangs (SIGSTOP:
// stop → a new primary accepts writes) and during a planned
// switchover (spec.primary changed → writes accepted again). Two writers commit
// throughout: one through the primary Service (its DNS name, ClusterIP and kube-proxy, as an
// application would), one that follows the Service's ready endpoint itself and dials the
// pod's IP (the baseline: the operator's part alone, as this benchmark measured before the
// ground had real nodes). Every acknowledged row of both is checked on the new primary.
// The last five lines are the summary `make bench-failover` promises (p50/max through
// the Service, then the endpoint writer's):
//
//	failover_seconds p50=<x> max=<y> lost_writes=<n> direct_p50=<x> direct_max=<y>
//	hung_failover_seconds p50=<x> max=<y> lost_writes=<n> direct_p50=<x> direct_max=<y>
//	crash_unavailable_seconds p50=<x> max=<y> lost_writes=<n> direct_p50=<x> direct_max=<y>
//	down_failover_seconds p50=<x> max=<y> lost_writes=<n> direct_p50=<x> direct_max=<y>
//	switchover_unavailable_seconds p50=<x> max=<y> lost_writes=<n> direct_p50=<x> direct_max=<y>
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

func main() {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runs := flag.Int("runs", 5, "failovers, hangs, crashes and switchovers to measure, each")
	delay := flag.Duration("detection-delay", 2*time.Second, "spec.replication.failover.detectionDelay")
	only := flag.String("only", "", "measure only this case (switchover, crash, down, failover or hung)")
	flag.Parse()
	if err := run(*runs, *delay, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench-failover:", err)
		os.Exit(1)
	}
}

func run(runs int, delay time.Duration, only string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	g, err := ground.Start(ctx, ground.Options{Log: os.Stderr})
	if err != nil {
		return err
	}
	defer g.Stop()
	b, err := newBench(ctx, g, delay)
	if err != nil {
		return err
	}
	kinds := []kind{
		{"switchover", "writes unavailable", "switchover_unavailable_seconds", b.switchover},
		{"crash", "kill to writes acknowledged", "crash_unavailable_seconds", b.crash},
		{"down", "kill (kept down) to writes acknowledged", "down_failover_seconds", b.down},
		{"failover", "node stop to new primary", "failover_seconds", b.failover},
		{"hung", "SIGSTOP to writes acknowledged", "hung_failover_seconds", b.hung},
	}
	if only != "" {
		kinds = slices.DeleteFunc(kinds, func(k kind) bool { return k.name != only })
		if len(kinds) == 0 {
			return fmt.Errorf("--only %q names no case", only)
		}
	}
	service, direct := make([][]time.Duration, len(kinds)), make([][]time.Duration, len(kinds))
	lost := make([]int, len(kinds))
	for i := range runs {
		for k, kind := range kinds {
			r, err := kind.measure(ctx)
			if err != nil {
				return fmt.Errorf("%s %d: %w", kind.name, i+1, err)
			}
			fmt.Printf("%s %d: %s %.3fs through the Service, %.3fs to the endpoint, lost %d\n",
				kind.name, i+1, kind.what, r.service.Seconds(), r.direct.Seconds(), r.lost)
			service[k], direct[k] = append(service[k], r.service), append(direct[k], r.direct)
			lost[k] += r.lost
		}
	}
	fmt.Printf("detection delay %s, %d runs each, %d writes acknowledged\n", delay, runs, b.acked())
	for _, k := range summaryOrder(kinds) {
		fmt.Printf("%s p50=%.3f max=%.3f lost_writes=%d direct_p50=%.3f direct_max=%.3f\n", kinds[k].summary,
			p50(service[k]), maxOf(service[k]), lost[k], p50(direct[k]), maxOf(direct[k]))
	}
	return nil
}

// kind is one case the benchmark measures.
type kind struct {
	name, what, summary string
	measure             func(context.Context) (result, error)
}

// summaryOrder lists the kinds' indexes in the order of the summary lines.
func summaryOrder(kinds []kind) []int {
	var out []int
	for _, name := range []string{"failover", "hung", "crash", "down", "switchover"} {
		for k := range kinds {
			if kinds[k].name == name {
				out = append(out, k)
			}
		}
	}
	return out
}

func p50(ds []time.Duration) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2].Seconds()
	}
	return (s[len(s)/2-1] + s[len(s)/2]).Seconds() / 2
}

func maxOf(ds []time.Duration) float64 {
	m := time.Duration(0)
	for _, d := range ds {
		m = max(m, d)
	}
	return m.Seconds()
}
