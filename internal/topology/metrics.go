package topology

import (
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
)

// recordMetrics sets the cluster's topology metrics from what a pass read and decided:
// per instance whether it answered and is the primary, and for a replica its threads and
// how many of the primary's transactions it lacks (and holds that the primary never had),
// when the primary answered too; while semi-sync is wanted and the primary answered, how
// many replicas acknowledge its commits against how many each commit waits for.
func recordMetrics(c *mysqlv1beta1.MySQLCluster, in Input, r Report, d Decision) {
	var primary *Instance
	for k := range in.Instances {
		if i := &in.Instances[k]; i.Name == r.CurrentPrimary && i.Reachable {
			primary = i
		}
	}
	out := make([]metrics.Instance, 0, len(in.Instances))
	for _, i := range in.Instances {
		mi := metrics.Instance{Name: i.Name, Up: i.Reachable, Primary: i.Name == r.CurrentPrimary, Fenced: in.Fenced[i.Name]}
		if mi.Primary {
			mi.SemiSync = i.SemiSyncSource
		} else {
			mi.SemiSync = i.SemiSyncReplica
			mi.Replica = i.Received != nil
			mi.IORunning, mi.SQLRunning = i.IORunning, i.SQLRunning
			if primary != nil && i.Reachable {
				mi.Lag = primary.Executed.Subtract(i.Executed).Count()
				mi.Errant = i.errantAgainst(primary).Count()
			}
		}
		out = append(out, mi)
	}
	metrics.SetTopology(c, out, d.State == StateFailoverBlocked)
	if in.SemiSync && primary != nil {
		metrics.SetSemiSync(c, primary.SemiSyncClients, waitForReplicas(c, int(*c.Spec.Instances)))
	} else {
		metrics.ForgetSemiSync(c)
	}
}

// countPrimaryChanges counts the promotions a pass carried out: a failover's or a
// switchover's (a first primary's bootstrap is no change).
func countPrimaryChanges(c *mysqlv1beta1.MySQLCluster, in Input, d Decision) {
	for _, a := range d.Actions {
		switch {
		case a.Target == in.Primary:
		case a.Kind == ActPromote && a.Failover:
			metrics.CountPrimaryChange(c, metrics.KindFailover)
		case a.Kind == ActSwitchover:
			metrics.CountPrimaryChange(c, metrics.KindSwitchover)
		}
	}
}
