package topology

import (
	"reflect"
	"slices"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Report is what the topology manager last saw of one cluster: what the MySQLCluster
// reconciler writes into the status.
type Report struct {
	// Managed is false when no manager runs: readiness then means only that Kubernetes
	// reports the pods ready, not that replication works.
	Managed bool
	// CurrentPrimary is the instance that accepts writes, "" when none does.
	CurrentPrimary string
	// Healthy is true when every replica replicates from the primary.
	Healthy bool
	// CaughtUp are the replicas that replicate from the primary and lack at most
	// CaughtUpSlack of its transactions (the roll waits for each restarted one).
	CaughtUp []string
	// Fenced are the instances held fenced on the user's request, in index order.
	Fenced []string
	// Reason (from the api's catalogue) and Message explain the state.
	Reason, Message string
	// Observed is when the pass that made the report ended (zero: none has yet).
	Observed time.Time
}

// same reports whether two reports say the same, whenever they were made.
func (r Report) same(o Report) bool {
	r.Observed, o.Observed = time.Time{}, time.Time{}
	if !slices.Equal(r.CaughtUp, o.CaughtUp) || !slices.Equal(r.Fenced, o.Fenced) {
		return false
	}
	r.CaughtUp, o.CaughtUp, r.Fenced, o.Fenced = nil, nil, nil, nil
	return reflect.DeepEqual(r, o)
}

// NotManaged is the report of a build or cluster whose replication nobody manages.
func NotManaged() Report {
	return Report{Managed: false, Reason: mysqlv1beta1.ReasonTopologyNotManaged,
		Message: "replication is not managed by this operator build; readiness reflects Kubernetes pod readiness only"}
}

// report turns a decision into what the status shows.
func report(d Decision) Report {
	r := Report{Managed: true, Healthy: d.Healthy, CaughtUp: d.CaughtUp, Fenced: d.Fenced, Reason: d.Reason, Message: d.Message}
	if d.Roles[d.Primary] == resources.RolePrimary && d.State != StateLost {
		r.CurrentPrimary = d.Primary
	}
	return r
}
