package topology

import (
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// History is what this manager did to the cluster's instances since it started, the
	// last mysqlv1beta1.HistoryLength actions, oldest first (the reconciler merges it into
	// status.history, which outlives the manager).
	History []mysqlv1beta1.HistoryEntry
	// Reason (from the api's catalogue) and Message explain the state.
	Reason, Message string
	// Observed is when the pass that made the report ended (zero: none has yet).
	Observed time.Time
}

// same reports whether two reports say the same, whenever they were made.
func (r Report) same(o Report) bool {
	r.Observed, o.Observed = time.Time{}, time.Time{}
	if !slices.Equal(r.CaughtUp, o.CaughtUp) || !slices.Equal(r.Fenced, o.Fenced) || len(r.History) != len(o.History) ||
		(len(r.History) > 0 && r.History[len(r.History)-1] != o.History[len(o.History)-1]) {
		return false
	}
	r.CaughtUp, o.CaughtUp, r.Fenced, o.Fenced, r.History, o.History = nil, nil, nil, nil, nil, nil
	return reflect.DeepEqual(r, o)
}

// NotManaged is the report of a build or cluster whose replication nobody manages.
func NotManaged() Report {
	return Report{Managed: false, Reason: mysqlv1beta1.ReasonTopologyNotManaged,
		Message: "replication is not managed by this operator build; readiness reflects Kubernetes pod readiness only"}
}

// historyOf is the history entries of the actions a pass carried out by now, decided in a
// state of the given reason: those that change who serves or what an instance holds, not
// the routine ones (configuring replication, freezing receivers, reloads, settings).
func historyOf(done []Action, reason string, now time.Time) []mysqlv1beta1.HistoryEntry {
	var out []mysqlv1beta1.HistoryEntry
	for _, a := range done {
		e := mysqlv1beta1.HistoryEntry{Time: metav1.NewTime(now), Action: string(a.Kind), Instance: a.Target, Reason: reason}
		switch a.Kind {
		case ActPromote:
			if a.Failover {
				e.Action, e.From = "Failover", a.From
			}
		case ActSwitchover, ActClone:
			e.From = a.From
		case ActRetainPasswords, ActDiscardOldPasswords:
			e.Reason = mysqlv1beta1.ReasonPasswordRotation
		case ActBootstrap, ActFence, ActIsolate, ActEvict:
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// appendHistory adds entries to history, keeping the last mysqlv1beta1.HistoryLength.
func appendHistory(history, entries []mysqlv1beta1.HistoryEntry) []mysqlv1beta1.HistoryEntry {
	out := append(slices.Clone(history), entries...)
	if n := len(out) - mysqlv1beta1.HistoryLength; n > 0 {
		out = out[n:]
	}
	return out
}

// report turns a decision into what the status shows.
func report(d Decision) Report {
	r := Report{Managed: true, Healthy: d.Healthy, CaughtUp: d.CaughtUp, Fenced: d.Fenced, Reason: d.Reason, Message: d.Message}
	if d.Roles[d.Primary] == resources.RolePrimary && d.State != StateLost {
		r.CurrentPrimary = d.Primary
	}
	return r
}
