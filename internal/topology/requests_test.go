package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func withFenced(in Input, names ...string) Input {
	in.Fenced = map[string]bool{}
	for _, n := range names {
		in.Fenced[n] = true
	}
	return in
}

func withRequest(in Input, primary string) Input { in.FailoverRequest = primary; return in }

// isolated is a replica the fence has stopped: read-only, no replication thread running.
func isolated(i Instance) Instance {
	i.IORunning, i.SQLRunning, i.IOConnecting = false, false, false
	return i
}

func roleMap(kv ...string) map[string]resources.Role {
	out := map[string]resources.Role{}
	for k := 0; k < len(kv); k += 2 {
		out[kv[k]] = resources.Role(kv[k+1])
	}
	return out
}

// TestDecideFenced: the rules for instances the user fenced (the annotation
// mysql.dolphin-operator.io/fenced-instances).
func TestDecideFenced(t *testing.T) {
	h := healthy3()
	none, rep, pri := string(resources.RoleNone), string(resources.RoleReplica), string(resources.RolePrimary)
	cases := []struct {
		name   string
		in     Input
		want   want
		fenced []string
	}{
		{"a fenced replica that replicates is isolated and leaves the replicas Service", withFenced(input("db-0", h...), "db-2"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonInstanceFenced, primary: "db-0", message: "db-2 is fenced: read-only, replication stopped",
				actions: []Action{{Kind: ActIsolate, Target: "db-2"}}, roles: roleMap("db-0", pri, "db-1", rep, "db-2", none)},
			[]string{"db-2"}},
		{"a fenced replica already isolated needs nothing and keeps the cluster degraded",
			withFenced(input("db-0", h[0], h[1], isolated(h[2])), "db-2"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonInstanceFenced, primary: "db-0", actions: []Action{},
				roles: roleMap("db-0", pri, "db-1", rep, "db-2", none)}, []string{"db-2"}},
		{"a fenced replica that is writable is isolated before a promotion",
			withFenced(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], with(h[2], func(i *Instance) { i.Writable = true })), "db-2"),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActIsolate, Target: "db-2"},
				{Kind: ActPromote, Target: "db-0", WaitFor: set(u1 + ":1-10")}}}, []string{"db-2"}},
		{"a fenced replica that does not answer is reported as fenced, not as unreachable",
			withFenced(input("db-0", h[0], h[1], down("db-2", 2, time.Minute)), "db-2"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonInstanceFenced, primary: "db-0", actions: []Action{},
				message: "db-2 is fenced (and does not answer: connection refused)"}, []string{"db-2"}},
		{"a fenced instance gets no certificate reload and no settings",
			withFenced(input("db-0", h[0], h[1], with(isolated(reloading(h[2])), func(i *Instance) { i.Settings = map[string]any{"max_connections": 10} })), "db-2"),
			want{state: StateDegraded, primary: "db-0", actions: []Action{}}, []string{"db-2"}},
		{"a switchover to a fenced instance waits", withFenced(withDesired(input("db-0", h[0], isolated(h[1]), h[2]), "db-1"), "db-1"),
			want{state: StateDegraded, primary: "db-0", actions: []Action{}, message: "switchover to db-1 waits: it is fenced"}, []string{"db-1"}},
		{"a leaving primary hands over to an instance that is not fenced, and the fenced one does not follow",
			withFenced(withLeaving(input("db-0", h...), "db-0"), "db-1"),
			want{state: StateSwitchover, primary: "db-2", actions: []Action{{Kind: ActIsolate, Target: "db-1"},
				{Kind: ActSwitchover, Target: "db-2", From: "db-0"}, {Kind: ActConfigureReplica, Target: "db-0", From: "db-2"}}}, []string{"db-1"}},
		{"a failover does not count a fenced replica: blocked without quorum",
			withFenced(input("db-0", down("db-0", 0, 6*time.Second), isolated(h[1]), frozen(h[2], u1+":1-9")), "db-1"),
			want{state: StateFailoverBlocked, reason: mysqlv1beta1.ReasonFailoverBlocked, primary: "db-0", actions: []Action{},
				message: "db-1 fenced"}, []string{"db-1"}},
		{"a failover passes a fenced replica by when every commit had both acknowledgements",
			withAcks(withFenced(input("db-0", down("db-0", 0, 6*time.Second), isolated(h[1]), frozen(h[2], u1+":1-9")), "db-1"), 2),
			want{state: StateFailover, primary: "db-2", actions: []Action{{Kind: ActPromote, Target: "db-2", From: "db-0",
				WaitFor: set(u1 + ":1-9"), Failover: true}}}, []string{"db-1"}},
		{"a fenced primary is made read-only and leaves the primary Service; its replicas keep serving reads",
			withFenced(input("db-0", h...), "db-0"),
			want{state: StateFenced, reason: mysqlv1beta1.ReasonInstanceFenced, primary: "db-0", message: "primary db-0 is fenced",
				actions: []Action{{Kind: ActFence, Target: "db-0"}}, roles: roleMap("db-0", none, "db-1", rep, "db-2", rep)},
			[]string{"db-0"}},
		{"a fenced primary is not switched over from", withFenced(withDesired(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]), "db-1"), "db-0"),
			want{state: StateFenced, primary: "db-0", actions: []Action{}}, []string{"db-0"}},
		{"a fenced primary that does not answer is not failed over from",
			withFenced(input("db-0", hung("db-0", 0, time.Minute), h[1], h[2]), "db-0"),
			want{state: StatePrimaryUnreachable, reason: mysqlv1beta1.ReasonInstanceFenced, primary: "db-0", actions: []Action{},
				message: "no failover while it is fenced", roles: roleMap("db-0", none, "db-1", rep, "db-2", rep)}, []string{"db-0"}},
		{"the first primary is elected once no instance is fenced",
			withFenced(input("", fresh("db-0", 0), fresh("db-1", 1)), "db-1"),
			want{state: StateIncomplete, actions: []Action{}, message: "db-1 (fenced)"}, []string{"db-1"}},
		{"a name that is no instance fences nothing", withFenced(input("db-0", h...), "db-7"),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := requireDecision(t, tc.in, tc.want)
			require.Equal(t, tc.fenced, d.Fenced)
			require.Empty(t, d.Request)
		})
	}
}

// TestDecideManualFailover: what becomes of a manual failover request (the annotation
// mysql.dolphin-operator.io/failover): carried out at once while the quorum rule allows,
// refused otherwise.
func TestDecideManualFailover(t *testing.T) {
	h := healthy3()
	cases := []struct {
		name    string
		in      Input
		want    want
		outcome RequestOutcome
		note    string
	}{
		{"without a request a hung primary waits: failover is disabled",
			withoutFailover(input("db-0", hung("db-0", 0, time.Second), h[1], h[2])),
			want{state: StatePrimaryUnreachable, reason: mysqlv1beta1.ReasonFailoverDisabled, actions: []Action{}}, "", ""},
		{"a request fails over at once, failover disabled and the detection delay not passed",
			withRequest(withoutFailover(input("db-0", hung("db-0", 0, time.Second), h[1], h[2])), "db-0"),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActFreeze, Target: "db-1"}, {Kind: ActFreeze, Target: "db-2"},
				{Kind: ActEvict, Target: "db-0"}}}, RequestCarriedOn, "stopping every replica's receiver"},
		{"a request is done with the promotion",
			withRequest(withoutFailover(input("db-0", down("db-0", 0, time.Second), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-9"))), "db-0"),
			want{state: StateFailover, primary: "db-1", actions: []Action{{Kind: ActPromote, Target: "db-1", From: "db-0",
				WaitFor: set(u1 + ":1-10"), Failover: true}}}, RequestDone, "failover from db-0: primary db-0 lost: promoting db-1"},
		{"a request is done once the successor is recorded",
			withFailed(withRequest(input("db-1", hung("db-0", 0, time.Second), with(primary("db-1", 1, u1+":1-10"), func(i *Instance) { i.UUID = u2 }), replica("db-2", 2, "db-1", u1+":1-10")), "db-0"), "db-0"),
			want{state: StateDegraded, primary: "db-1"}, RequestDone, "the failover from db-0 is done: db-1 is the primary"},
		{"a request is refused while the primary answers", withRequest(input("db-0", h...), "db-0"),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}, RequestRefused, "primary db-0 answers"},
		{"a request is refused when the quorum rule does not allow the failover",
			withRequest(withoutFailover(input("db-0", hung("db-0", 0, time.Second), down("db-1", 1, time.Minute), h[2])), "db-0"),
			want{state: StateFailoverBlocked, primary: "db-0", actions: []Action{}}, RequestRefused, "a failover needs 2 frozen"},
		{"a request is refused when no replica can replace the primary",
			withRequest(input("db-0", hung("db-0", 0, time.Second), fresh("db-1", 1)), "db-0"),
			want{state: StateFailoverBlocked, actions: []Action{}}, RequestRefused, "db-1 never replicated"},
		{"a request is refused for a fenced primary",
			withFenced(withRequest(input("db-0", hung("db-0", 0, time.Second), h[1], h[2]), "db-0"), "db-0"),
			want{state: StatePrimaryUnreachable, reason: mysqlv1beta1.ReasonInstanceFenced, actions: []Action{}}, RequestRefused, "unfence it"},
		{"a request that names another instance is refused", withRequest(input("db-0", h...), "db-1"),
			want{state: StateHealthy, primary: "db-0", healthy: true}, RequestRefused, "db-1 is not the primary (db-0 is)"},
		{"a request before the first election is refused", withRequest(input("", fresh("db-0", 0)), "db-0"),
			want{state: StateBootstrapping}, RequestRefused, "no primary has been elected yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := requireDecision(t, tc.in, tc.want)
			require.Equal(t, tc.outcome, d.Request, d.RequestNote)
			require.Contains(t, d.RequestNote, tc.note)
		})
	}
}
