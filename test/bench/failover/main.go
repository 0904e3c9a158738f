// Command failover measures, on the local test ground, how long a MySQLCluster is without a
// writable primary: after its primary's mysqld is killed (failover: kill → a new primary
// accepts writes and the primary Service routes to it) and during a planned switchover
// (spec.primary changed → writes accepted again). A writer commits through the primary
// Service's endpoint throughout and every acknowledged row is checked on the new primary.
// The last two lines are the summary `make bench-failover` promises:
//
//	failover_seconds p50=<x> max=<y> lost_writes=<n>
//	switchover_unavailable_seconds p50=<x> max=<y> lost_writes=<n>
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

func main() {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runs := flag.Int("runs", 5, "failovers and switchovers to measure, each")
	manager := flag.String("manager", "bin/manager", "the operator binary")
	delay := flag.Duration("detection-delay", 2*time.Second, "spec.replication.failover.detectionDelay")
	flag.Parse()
	if err := run(*runs, *manager, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "bench-failover:", err)
		os.Exit(1)
	}
}

func run(runs int, manager string, delay time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	d, err := localcluster.StartDolphin(ctx, localcluster.DolphinOptions{RepoRoot: envtest.RepoRoot(), Manager: manager})
	if err != nil {
		return err
	}
	defer d.Stop()
	b, err := newBench(ctx, d, delay)
	if err != nil {
		return err
	}
	var failovers, switchovers []time.Duration
	var lostF, lostS int
	for i := range runs {
		took, lost, err := b.switchover(ctx)
		if err != nil {
			return fmt.Errorf("switchover %d: %w", i+1, err)
		}
		fmt.Printf("switchover %d: writes unavailable %.3fs, lost %d\n", i+1, took.Seconds(), lost)
		switchovers, lostS = append(switchovers, took), lostS+lost
		took, lost, err = b.failover(ctx)
		if err != nil {
			return fmt.Errorf("failover %d: %w", i+1, err)
		}
		fmt.Printf("failover %d: kill to new primary %.3fs, lost %d\n", i+1, took.Seconds(), lost)
		failovers, lostF = append(failovers, took), lostF+lost
	}
	fmt.Printf("detection delay %s, %d runs each, %d writes acknowledged\n", delay, runs, b.acked())
	fmt.Printf("failover_seconds p50=%.3f max=%.3f lost_writes=%d\n", p50(failovers), maxOf(failovers), lostF)
	fmt.Printf("switchover_unavailable_seconds p50=%.3f max=%.3f lost_writes=%d\n", p50(switchovers), maxOf(switchovers), lostS)
	return nil
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
