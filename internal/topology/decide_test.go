package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

const (
	u1 = "11111111-1111-1111-1111-111111111111" // db-0's server_uuid
	u2 = "22222222-2222-2222-2222-222222222222" // db-1's
	u3 = "33333333-3333-3333-3333-333333333333" // db-2's
)

func set(s string) gtid.Set { return gtid.MustParse(s) }

// uuid is the server_uuid of the instance of index idx.
func uuid(idx int) string { return []string{u1, u2, u3, "", "", "", ""}[idx] }

// primary is a healthy writable semi-sync primary with transactions 1-n of u1.
func primary(name string, idx int, executed string) Instance {
	return Instance{Name: name, Index: idx, UUID: uuid(idx), Reachable: true, Writable: true, Executed: set(executed),
		Purged: set(""), SemiSyncSource: true}
}

// replica replicates from source with both threads running and semi-sync on.
func replica(name string, idx int, source, executed string) Instance {
	return Instance{Name: name, Index: idx, UUID: uuid(idx), Reachable: true, Executed: set(executed), Purged: set(""),
		Received: set(executed), Source: source, IORunning: true, SQLRunning: true, SemiSyncReplica: true}
}

// fresh is a new, empty, read-only instance that never replicated.
func fresh(name string, idx int) Instance {
	return Instance{Name: name, Index: idx, UUID: uuid(idx), Reachable: true, Executed: set(""), Purged: set("")}
}

// down is an instance whose mysqld is not running: connections are refused.
func down(name string, idx int, for_ time.Duration) Instance {
	return Instance{Name: name, Index: idx, Error: "connection refused", Fault: mysql.FaultRefused, UnreachableFor: for_}
}

// hung is an instance whose pod runs but whose mysqld answers nothing (SIGSTOP, or cut off
// from the operator).
func hung(name string, idx int, for_ time.Duration) Instance {
	return Instance{Name: name, Index: idx, Error: "i/o timeout", Fault: mysql.FaultNoAnswer, UnreachableFor: for_}
}

func with(i Instance, f func(*Instance)) Instance { f(&i); return i }

func healthy3() []Instance {
	return []Instance{primary("db-0", 0, u1+":1-10"), replica("db-1", 1, "db-0", u1+":1-10"), replica("db-2", 2, "db-0", u1+":1-9")}
}

func input(primary string, instances ...Instance) Input {
	return Input{Instances: instances, Primary: primary, FailoverEnabled: true, DetectionDelay: 5 * time.Second, SemiSync: true, AckCount: 1}
}

type want struct {
	state   State
	reason  string
	actions []Action
	primary string
	healthy bool
	roles   map[string]resources.Role
	message string
	// caughtUp is compared when not nil.
	caughtUp []string
}

func TestDecide(t *testing.T) {
	h := healthy3()
	cases := []struct {
		name string
		in   Input
		want want
	}{
		// Bootstrap.
		{"bootstrap waits for every instance", input("", fresh("db-0", 0), down("db-1", 1, time.Second), fresh("db-2", 2)),
			want{state: StateIncomplete, reason: mysqlv1beta1.ReasonWaitingForInstances, message: "db-1"}},
		{"bootstrap of empty instances elects the first", input("", fresh("db-0", 0), fresh("db-1", 1), fresh("db-2", 2)),
			want{state: StateBootstrapping, primary: "db-0", actions: []Action{{Kind: ActBootstrap, Target: "db-0"}},
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleNone, "db-2": resources.RoleNone}}},
		{"bootstrap honours spec.primary when it is as advanced", withDesired(input("", fresh("db-0", 0), fresh("db-1", 1)), "db-1"),
			want{state: StateBootstrapping, primary: "db-1", actions: []Action{{Kind: ActBootstrap, Target: "db-1"}}}},
		{"bootstrap elects the instance that has data", input("", fresh("db-0", 0), with(fresh("db-1", 1), func(i *Instance) { i.Executed = set(u2 + ":1-5") })),
			want{state: StateBootstrapping, primary: "db-1", actions: []Action{{Kind: ActBootstrap, Target: "db-1"}}}},
		{"bootstrap ignores spec.primary that lacks data", withDesired(input("", fresh("db-0", 0), with(fresh("db-1", 1), func(i *Instance) { i.Executed = set(u2 + ":1") })), "db-0"),
			want{state: StateBootstrapping, primary: "db-1", actions: []Action{{Kind: ActBootstrap, Target: "db-1"}}}},
		{"bootstrap refuses diverged instances", input("", with(fresh("db-0", 0), func(i *Instance) { i.Executed = set(u1 + ":1") }), with(fresh("db-1", 1), func(i *Instance) { i.Executed = set(u2 + ":1") })),
			want{state: StateErrant, reason: mysqlv1beta1.ReasonInstancesDiverged}},
		{"bootstrap of one instance", input("", fresh("db-0", 0)),
			want{state: StateBootstrapping, primary: "db-0", actions: []Action{{Kind: ActBootstrap, Target: "db-0"}}}},
		{"no instances", input(""), want{state: StateIncomplete, reason: mysqlv1beta1.ReasonWaitingForInstances}},

		// Steady state.
		{"healthy three instances", input("db-0", h...),
			want{state: StateHealthy, reason: mysqlv1beta1.ReasonReplicationHealthy, primary: "db-0", healthy: true,
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleReplica, "db-2": resources.RoleReplica}}},
		{"healthy single instance without semi-sync", Input{Instances: []Instance{with(primary("db-0", 0, u1+":1"), func(i *Instance) { i.SemiSyncSource = false })}, Primary: "db-0", FailoverEnabled: true},
			want{state: StateHealthy, primary: "db-0", healthy: true}},
		{"semi-sync off on the primary is switched on", input("db-0", with(h[0], func(i *Instance) { i.SemiSyncSource = false }), h[1], h[2]),
			want{state: StateHealthy, primary: "db-0", actions: []Action{{Kind: ActConfigurePrimary, Target: "db-0"}}}},
		{"semi-sync on while it should be off is switched off", Input{Instances: h, Primary: "db-0", FailoverEnabled: true, SemiSync: false},
			want{primary: "db-0", actions: []Action{{Kind: ActConfigurePrimary, Target: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-0"}}}},
		{"new replicas of a new primary are configured", input("db-0", primary("db-0", 0, ""), fresh("db-1", 1), fresh("db-2", 2)),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonConfiguring, primary: "db-0", actions: []Action{
				{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-0"}},
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleNone, "db-2": resources.RoleNone}}},
		{"a new instance joining a primary with data is cloned, out of the replicas Service", input("db-0", h[0], h[1], fresh("db-2", 2)),
			want{state: StateCloning, reason: mysqlv1beta1.ReasonCloning, primary: "db-0", message: "db-2 is new: cloning it from db-0",
				actions: []Action{{Kind: ActClone, Target: "db-2", From: "db-0"}},
				roles:   map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleReplica, "db-2": resources.RoleNone}}},
		{"new instances are cloned one at a time", input("db-0", h[0], fresh("db-1", 1), fresh("db-2", 2)),
			want{state: StateCloning, primary: "db-0", message: "db-2 is new: it is cloned after the clone under way",
				actions: []Action{{Kind: ActClone, Target: "db-1", From: "db-0"}}}},
		{"an instance that replicated before, however far behind, catches up by replication", input("db-0", h[0], h[1],
			with(fresh("db-2", 2), func(i *Instance) { i.Received = set(""); i.Source = "db-0" })),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-2", From: "db-0"}}}},
		{"a replica with a stopped IO thread is restarted", input("db-0", h[0], with(h[1], func(i *Instance) { i.IORunning = false }), h[2]),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a replica with an SQL error is reported and restarted", input("db-0", h[0], with(h[1], func(i *Instance) { i.SQLRunning = false; i.ReplicationError = "1062: Duplicate entry" }), h[2]),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonReplicationBroken, primary: "db-0", message: "1062",
				actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a replica pointed at another instance is repointed", input("db-0", h[0], with(h[1], func(i *Instance) { i.Source = "db-2" }), h[2]),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a replica pointed at an unknown address is repointed", input("db-0", h[0], with(h[1], func(i *Instance) { i.Source = "?" }), h[2]),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a replica without semi-sync is reconfigured", input("db-0", h[0], with(h[1], func(i *Instance) { i.SemiSyncReplica = false }), h[2]),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"an unreachable replica degrades without action", input("db-0", h[0], down("db-1", 1, time.Minute), h[2]),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonInstanceUnreachable, primary: "db-0", message: "db-1 is unreachable",
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleNone, "db-2": resources.RoleReplica}}},
		{"a lagging replica is healthy", input("db-0", h[0], h[1], replica("db-2", 2, "db-0", u1+":1-3")),
			want{state: StateHealthy, primary: "db-0", healthy: true}},

		// Fencing.
		{"a writable replica is fenced", input("db-0", h[0], with(h[1], func(i *Instance) { i.Writable = true }), h[2]),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonRogueWriterFenced, primary: "db-0", actions: []Action{
				{Kind: ActFence, Target: "db-1"}, {Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a returning old primary is fenced before anything else", input("db-1", with(primary("db-0", 0, u1+":1-10"), func(i *Instance) {}), primary("db-1", 1, u1+":1-10"), replica("db-2", 2, "db-1", u1+":1-10")),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonRogueWriterFenced, primary: "db-1", actions: []Action{
				{Kind: ActFence, Target: "db-0"}, {Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}}}},
		{"a returning old primary with errant transactions is isolated, not replicated", input("db-1", with(primary("db-0", 0, u1+":1-11"), func(i *Instance) { i.Writable = false }), with(primary("db-1", 1, u1+":1-10"), func(i *Instance) {}), replica("db-2", 2, "db-1", u1+":1-10")),
			want{state: StateErrant, reason: mysqlv1beta1.ReasonErrantTransactions, primary: "db-1", message: u1 + ":11",
				roles: map[string]resources.Role{"db-0": resources.RoleNone, "db-1": resources.RolePrimary, "db-2": resources.RoleReplica}}},
		{"a replica that applied the primary's transaction before the primary's own commit is not errant",
			input("db-0", h[0], with(h[1], func(i *Instance) { i.Executed, i.Received = set(u1+":1-11"), set(u1+":1-11") }), h[2]),
			want{state: StateHealthy, reason: mysqlv1beta1.ReasonReplicationHealthy, primary: "db-0", healthy: true}},
		{"switchover to a replica ahead by the primary's transaction in flight goes ahead",
			withDesired(input("db-0", h[0], with(h[1], func(i *Instance) { i.Executed, i.Received = set(u1+":1-11"), set(u1+":1-11") }), h[2]), "db-1"),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
		{"an errant replica that replicates is isolated", input("db-0", h[0], with(h[1], func(i *Instance) { i.Executed = set(u1 + ":1-10," + u2 + ":1") }), h[2]),
			want{state: StateErrant, reason: mysqlv1beta1.ReasonErrantTransactions, primary: "db-0", actions: []Action{{Kind: ActIsolate, Target: "db-1"}}}},
		{"an errant replica the user allowed is re-cloned", withReclone(input("db-0", h[0], with(h[1], func(i *Instance) { i.Executed = set(u1 + ":1-10," + u2 + ":1") }), h[2]), "db-1"),
			want{state: StateCloning, reason: mysqlv1beta1.ReasonCloning, primary: "db-0", actions: []Action{{Kind: ActClone, Target: "db-1", From: "db-0"}}}},
		{"a replica missing purged transactions is cloned", input("db-0", with(h[0], func(i *Instance) { i.Purged = set(u1 + ":1-5") }), fresh("db-1", 1), h[2]),
			want{state: StateCloning, reason: mysqlv1beta1.ReasonCloning, primary: "db-0", actions: []Action{{Kind: ActClone, Target: "db-1", From: "db-0"}}}},
		{"a replica missing only unpurged transactions replicates", input("db-0", with(h[0], func(i *Instance) { i.Purged = set(u1 + ":1-5") }), h[1], replica("db-2", 2, "db-0", u1+":1-7")),
			want{state: StateHealthy, primary: "db-0", healthy: true}},

		// The recorded primary not writable: restart, or an interrupted promotion.
		{"a restarted primary comes back read-only and is made writable", input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActPromote, Target: "db-0", WaitFor: set(u1 + ":1-10")}}}},
		{"an interrupted failover's promotion does not wait for what the failed primary has",
			withFailed(input("db-1", with(h[0], func(i *Instance) { i.Writable = false }), frozen(replica("db-1", 1, "db-0", u1+":1-8"), u1+":1-9"), replica("db-2", 2, "db-0", u1+":1-9")), "db-0"),
			want{state: StateFailover, primary: "db-1", actions: []Action{{Kind: ActPromote, Target: "db-1", WaitFor: set(u1 + ":1-9")}}}},
		{"a replica with semi-sync's source side on is configured again", input("db-0", h[0], with(h[1], func(i *Instance) { i.SemiSyncSource = true }), h[2]),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonConfiguring, primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"an interrupted promotion waits for what the old source has", input("db-1", with(h[0], func(i *Instance) { i.Writable = false }), replica("db-1", 1, "db-0", u1+":1-8"), replica("db-2", 2, "db-0", u1+":1-9")),
			want{state: StateFailover, primary: "db-1", actions: []Action{{Kind: ActPromote, Target: "db-1", WaitFor: set(u1 + ":1-10")}}}},
		{"a promotion fences a writable old primary first", input("db-1", h[0], replica("db-1", 1, "db-0", u1+":1-10"), h[2]),
			want{primary: "db-1", actions: []Action{{Kind: ActFence, Target: "db-0"}, {Kind: ActPromote, Target: "db-1", WaitFor: set(u1 + ":1-10")}}}},

		// Switchover.
		{"switchover to a healthy replica", withDesired(input("db-0", h...), "db-1"),
			want{state: StateSwitchover, reason: mysqlv1beta1.ReasonSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}},
				roles: map[string]resources.Role{"db-0": resources.RoleNone, "db-1": resources.RolePrimary, "db-2": resources.RoleReplica}}},
		{"switchover leaves a replica with errant transactions to the next pass", withDesired(input("db-0", h[0], h[1],
			with(h[2], func(i *Instance) { i.Executed = set(u1 + ":1-10," + u2 + ":1") })), "db-1"),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}}}},
		{"switchover leaves a replica that does not replicate to the next pass", withDesired(input("db-0", h[0], h[1],
			with(h[2], func(i *Instance) { i.IORunning = false })), "db-1"),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}}}},
		{"switchover to the current primary is nothing", withDesired(input("db-0", h...), "db-0"),
			want{state: StateHealthy, primary: "db-0", healthy: true}},
		{"switchover to an unknown instance is blocked", withDesired(input("db-0", h...), "db-7"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonSwitchoverBlocked, primary: "db-0", message: "no such instance"}},
		{"switchover to an unreachable instance is blocked", withDesired(input("db-0", h[0], down("db-1", 1, time.Second), h[2]), "db-1"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonInstanceUnreachable, primary: "db-0", message: "switchover to db-1 waits: it is unreachable"}},
		{"switchover to an errant instance is blocked", withDesired(input("db-0", h[0], with(h[1], func(i *Instance) { i.Executed = set(u1 + ":1-10," + u2 + ":1") }), h[2]), "db-1"),
			want{state: StateErrant, reason: mysqlv1beta1.ReasonErrantTransactions, primary: "db-0", message: "switchover to db-1 waits: it holds errant",
				actions: []Action{{Kind: ActIsolate, Target: "db-1"}}}},
		{"switchover waits for the target to replicate", withDesired(input("db-0", h[0], with(h[1], func(i *Instance) { i.IORunning = false }), h[2]), "db-1"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonSwitchoverBlocked, primary: "db-0", message: "does not replicate",
				actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"an interrupted switchover (old primary fenced) goes on", withDesired(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]), "db-1"),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActPromote, Target: "db-0", WaitFor: set(u1 + ":1-10")}}}},

		// Scale-down.
		{"a scale-down that removes the primary switches over to the closest replica that stays",
			withLeaving(input("db-2", replica("db-0", 0, "db-2", u1+":1-9"), replica("db-1", 1, "db-2", u1+":1-10"), primary("db-2", 2, u1+":1-10")), "db-2"),
			want{state: StateSwitchover, reason: mysqlv1beta1.ReasonSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-2"},
				{Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}}}},
		{"a scale-down's switchover goes to spec.primary when it stays",
			withDesired(withLeaving(input("db-2", replica("db-0", 0, "db-2", u1+":1-9"), replica("db-1", 1, "db-2", u1+":1-10"), primary("db-2", 2, u1+":1-10")), "db-2"), "db-0"),
			want{state: StateSwitchover, primary: "db-0", actions: []Action{{Kind: ActSwitchover, Target: "db-0", From: "db-2"},
				{Kind: ActConfigureReplica, Target: "db-2", From: "db-0"}, {Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"a scale-down's switchover never goes to an instance that leaves too",
			withLeaving(input("db-1", replica("db-0", 0, "db-1", u1+":1-8"), primary("db-1", 1, u1+":1-10"), replica("db-2", 2, "db-1", u1+":1-10")), "db-1", "db-2"),
			want{state: StateSwitchover, primary: "db-0", actions: []Action{{Kind: ActSwitchover, Target: "db-0", From: "db-1"},
				{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-0"}}}},
		{"a scale-down that removes the primary waits for a replica that stays to replicate",
			withLeaving(input("db-1", with(replica("db-0", 0, "db-1", u1+":1-10"), func(i *Instance) { i.IORunning = false }), primary("db-1", 1, u1+":1-10")), "db-1"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonSwitchoverBlocked, primary: "db-1",
				message: "the scale-down removes primary db-1: switchover to db-0 waits: it does not replicate from db-1 yet",
				actions: []Action{{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}}}},
		{"a replica the scale-down removes leaves the replicas Service", withLeaving(input("db-0", h...), "db-2"),
			want{state: StateHealthy, primary: "db-0", healthy: true,
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleReplica, "db-2": resources.RoleNone}}},

		{"a replica lacking more than CaughtUpSlack transactions replicates but has not caught up",
			input("db-0", primary("db-0", 0, u1+":1-200"), replica("db-1", 1, "db-0", u1+":1-150"), replica("db-2", 2, "db-0", u1+":1-149")),
			want{state: StateHealthy, primary: "db-0", healthy: true, caughtUp: []string{"db-1"}}},

		// Roll: the primary is restarted last, after a switchover.
		{"the primary the roll restarts next hands over to the closest replica",
			withHandOver(input("db-0", primary("db-0", 0, u1+":1-10"), replica("db-1", 1, "db-0", u1+":1-9"), replica("db-2", 2, "db-0", u1+":1-10")), "db-0"),
			want{state: StateSwitchover, reason: mysqlv1beta1.ReasonSwitchover, primary: "db-2", actions: []Action{{Kind: ActSwitchover, Target: "db-2", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-2"}, {Kind: ActConfigureReplica, Target: "db-1", From: "db-2"}}}},
		{"a hand-over overrides spec.primary naming the primary itself",
			withDesired(withHandOver(input("db-0", primary("db-0", 0, u1+":1-10"), replica("db-1", 1, "db-0", u1+":1-10"), replica("db-2", 2, "db-0", u1+":1-10")), "db-0"), "db-0"),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
		{"a replica marked for hand-over stays in service and is never switched to",
			withDesired(withHandOver(input("db-0", h...), "db-1"), "db-1"),
			want{state: StateHealthy, primary: "db-0", healthy: true,
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleReplica, "db-2": resources.RoleReplica}}},
		{"a hand-over waits for a replica that replicates cleanly",
			withHandOver(input("db-0", primary("db-0", 0, u1+":1-10"), with(replica("db-1", 1, "db-0", u1+":1-10"), func(i *Instance) { i.SQLRunning = false })), "db-0"),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonSwitchoverBlocked, primary: "db-0",
				message: "the roll restarts primary db-0 next: switchover to db-1 waits: it does not replicate from db-0 yet",
				actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},

		// Failover.
		{"primary unreachable within the detection delay", input("db-0", down("db-0", 0, 2*time.Second), h[1], h[2]),
			want{state: StatePrimaryUnreachable, reason: mysqlv1beta1.ReasonPrimaryUnavailable, primary: "db-0",
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleReplica, "db-2": resources.RoleReplica}}},
		{"primary unreachable past the delay: freeze the receivers", input("db-0", down("db-0", 0, 6*time.Second), h[1], h[2]),
			want{state: StateFailover, reason: mysqlv1beta1.ReasonFailover, primary: "db-0", actions: []Action{{Kind: ActFreeze, Target: "db-1"}, {Kind: ActFreeze, Target: "db-2"}},
				roles: map[string]resources.Role{"db-0": resources.RoleNone, "db-1": resources.RoleNone, "db-2": resources.RoleNone}}},
		{"a receiver reconnecting to the lost primary is frozen too", input("db-0", down("db-0", 0, 6*time.Second),
			with(frozen(h[1], u1+":1-10"), func(i *Instance) { i.IOConnecting = true }), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActFreeze, Target: "db-1"}}}},
		{"a hung primary past the delay is evicted as the receivers freeze", input("db-0", hung("db-0", 0, 6*time.Second), h[1], h[2]),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActFreeze, Target: "db-1"}, {Kind: ActFreeze, Target: "db-2"},
				{Kind: ActEvict, Target: "db-0"}}}},
		{"a successor waits for the kubelet to stop the evicted primary", input("db-0", evicting(hung("db-0", 0, 7*time.Second), false), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-0", actions: []Action{}, message: "waiting for its kubelet to stop it",
				roles: map[string]resources.Role{"db-0": resources.RoleNone, "db-1": resources.RolePrimary, "db-2": resources.RoleNone}}},
		{"once the evicted primary is stopped the successor is promoted", input("db-0", evicting(hung("db-0", 0, 8*time.Second), true), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-1", actions: []Action{{Kind: ActPromote, Target: "db-1", From: "db-0", WaitFor: set(u1 + ":1-10"), Failover: true}}}},
		{"a hung primary whose pod is gone is not evicted", input("db-0", with(hung("db-0", 0, 6*time.Second), func(i *Instance) { i.Stopped = true }), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-1"}},
		{"a blocked failover evicts nothing", input("db-0", hung("db-0", 0, 6*time.Second), hung("db-1", 1, 6*time.Second), h[2]),
			want{state: StateFailoverBlocked, actions: []Action{}}},
		{"frozen replicas: promote the one that received most", input("db-0", down("db-0", 0, 6*time.Second), frozen(replica("db-1", 1, "db-0", u1+":1-9"), u1+":1-10"), frozen(h[2], u1+":1-9")),
			want{state: StateFailover, primary: "db-1", actions: []Action{{Kind: ActPromote, Target: "db-1", From: "db-0", WaitFor: set(u1 + ":1-10"), Failover: true}}}},
		{"frozen replicas that received the same: spec.primary wins", withDesired(input("db-0", down("db-0", 0, 6*time.Second), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-10")), "db-2"),
			want{state: StateFailover, primary: "db-2", actions: []Action{{Kind: ActPromote, Target: "db-2", From: "db-0", WaitFor: set(u1 + ":1-10"), Failover: true}}}},
		{"frozen replicas that received the same: the lowest index wins", input("db-0", down("db-0", 0, 6*time.Second), frozen(h[1], u1+":1-10"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-1"}},
		{"frozen replicas that received the same: the one with less left to apply wins",
			input("db-0", down("db-0", 0, 6*time.Second), frozen(replica("db-1", 1, "db-0", u1+":1-4"), u1+":1-10"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-2", actions: []Action{{Kind: ActPromote, Target: "db-2", From: "db-0", WaitFor: set(u1 + ":1-10"), Failover: true}}}},
		{"frozen replicas that received the same: spec.primary wins over less left to apply",
			withDesired(input("db-0", down("db-0", 0, 6*time.Second), frozen(replica("db-1", 1, "db-0", u1+":1-4"), u1+":1-10"), frozen(h[2], u1+":1-10")), "db-1"),
			want{state: StateFailover, primary: "db-1"}},
		{"a replica that received more wins over one that applied more",
			input("db-0", down("db-0", 0, 6*time.Second), frozen(replica("db-1", 1, "db-0", u1+":1-4"), u1+":1-11"), frozen(h[2], u1+":1-10")),
			want{state: StateFailover, primary: "db-1"}},
		{"failover fences a writable replica first", input("db-0", down("db-0", 0, 6*time.Second), frozen(with(h[1], func(i *Instance) { i.Writable = true }), u1+":1-10"), frozen(h[2], u1+":1-9")),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActFence, Target: "db-1"}}}},
		{"failover is blocked by an unreachable replica that may hold the only acknowledged copy",
			input("db-0", down("db-0", 0, 6*time.Second), down("db-1", 1, 6*time.Second), frozen(h[2], u1+":1-9")),
			want{state: StateFailoverBlocked, reason: mysqlv1beta1.ReasonFailoverBlocked, primary: "db-0",
				message: "1 of 2 replicas unreachable or unfit (db-1 unreachable",
				roles:   map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleNone, "db-2": resources.RoleReplica}}},
		{"failover skips an unreachable replica when every commit had two acknowledgements",
			withAcks(input("db-0", down("db-0", 0, 6*time.Second), down("db-1", 1, 6*time.Second), frozen(h[2], u1+":1-9")), 2),
			want{state: StateFailover, primary: "db-2", actions: []Action{{Kind: ActPromote, Target: "db-2", From: "db-0", WaitFor: set(u1 + ":1-9"), Failover: true}}}},
		{"a blocked failover freezes nothing", input("db-0", down("db-0", 0, 6*time.Second), down("db-1", 1, 6*time.Second), h[2]),
			want{state: StateFailoverBlocked, actions: []Action{}}},
		{"failover never promotes an instance that never replicated", input("db-0", down("db-0", 0, 6*time.Second), fresh("db-1", 1), down("db-2", 2, time.Minute)),
			want{state: StateFailoverBlocked, reason: mysqlv1beta1.ReasonFailoverBlocked, message: "db-1 never replicated"}},
		{"failover never promotes an instance being cloned", withAcks(input("db-0", down("db-0", 0, 6*time.Second), cloning(frozen(h[1], u1+":1-10")), frozen(h[2], u1+":1-9")), 2),
			want{state: StateFailover, primary: "db-2"}},
		{"a single instance lost has no successor", input("db-0", down("db-0", 0, 6*time.Second)),
			want{state: StateLost, reason: mysqlv1beta1.ReasonNoFailoverCandidate}},
		{"a replica being cloned is left alone", input("db-0", h[0], cloning(fresh("db-1", 1)), h[2]),
			want{state: StateCloning, reason: mysqlv1beta1.ReasonCloning, primary: "db-0", actions: []Action{}, message: "db-1 is being cloned",
				roles: map[string]resources.Role{"db-0": resources.RolePrimary, "db-1": resources.RoleNone, "db-2": resources.RoleReplica}}},
		{"failover with diverged replicas stops for a human", input("db-0", down("db-0", 0, 6*time.Second), frozen(h[1], u1+":1-10,"+u2+":1"), frozen(h[2], u1+":1-10,"+u3+":1")),
			want{state: StateErrant, reason: mysqlv1beta1.ReasonInstancesDiverged}},
		{"failover disabled reports and waits", withoutFailover(input("db-0", down("db-0", 0, time.Hour), h[1], h[2])),
			want{state: StatePrimaryUnreachable, reason: mysqlv1beta1.ReasonFailoverDisabled, primary: "db-0",
				roles: map[string]resources.Role{"db-0": resources.RoleNone, "db-1": resources.RoleReplica, "db-2": resources.RoleReplica}}},
		{"a recorded primary that no longer exists fails over at once", input("db-5", h[1], h[2]),
			want{state: StateFailover, actions: []Action{{Kind: ActFreeze, Target: "db-1"}, {Kind: ActFreeze, Target: "db-2"}}}},
		// Certificates and the replicas' checks of them.
		{"renewed certificates are reloaded on every instance, the cluster staying healthy", input("db-0", reloading(h[0]), reloading(h[1]), reloading(h[2])),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{
				{Kind: ActReloadTLS, Target: "db-0"}, {Kind: ActReloadTLS, Target: "db-1"}, {Kind: ActReloadTLS, Target: "db-2"}}}},
		{"a reload comes after the topology's actions", input("db-0", h[0], reloading(with(h[1], func(i *Instance) { i.IORunning = false })), h[2]),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}, {Kind: ActReloadTLS, Target: "db-1"}}}},
		{"an instance being cloned or unreachable is not reloaded", input("db-0", reloading(h[0]), reloading(cloning(fresh("db-1", 1))), reloading(down("db-2", 2, time.Minute))),
			want{primary: "db-0", actions: []Action{{Kind: ActReloadTLS, Target: "db-0"}}}},
		{"a replica whose channel does not check its source as asked is reconfigured", input("db-0", h[0], with(h[1], func(i *Instance) { i.ChannelOutdated = true }), h[2]),
			want{state: StateDegraded, reason: mysqlv1beta1.ReasonConfiguring, primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"after the promotion the others follow the new primary", input("db-1", down("db-0", 0, 10*time.Second), primary("db-1", 1, u1+":1-10"), frozen(h[2], u1+":1-9")),
			want{state: StateDegraded, primary: "db-1", actions: []Action{{Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireDecision(t, tc.in, tc.want) })
	}
	require.GreaterOrEqual(t, len(cases), 40)
}

// requireDecision decides on in and checks the decision against w (and the invariants).
func requireDecision(t *testing.T, in Input, w want) Decision {
	t.Helper()
	d := Decide(in)
	if w.state != "" {
		require.Equal(t, w.state, d.State, d.Message)
	}
	if w.reason != "" {
		require.Equal(t, w.reason, d.Reason, d.Message)
	}
	if w.primary != "" {
		require.Equal(t, w.primary, d.Primary)
	}
	if w.actions != nil {
		require.Equal(t, actionStrings(w.actions), actionStrings(d.Actions))
	}
	require.Equal(t, w.healthy, d.Healthy, d.Message)
	if w.roles != nil {
		require.Equal(t, w.roles, d.Roles)
	}
	require.Contains(t, d.Message, w.message)
	if w.caughtUp != nil {
		require.Equal(t, w.caughtUp, append([]string{}, d.CaughtUp...))
	}
	requireInvariants(t, in, d)
	return d
}

// requireInvariants checks what every decision must keep, whatever the input.
func requireInvariants(t *testing.T, in Input, d Decision) {
	t.Helper()
	primaries := 0
	for _, r := range d.Roles {
		if r == resources.RolePrimary {
			primaries++
		}
	}
	require.LessOrEqual(t, primaries, 1, "one primary role at most")
	for _, a := range d.Actions {
		if a.Kind == ActPromote || a.Kind == ActBootstrap || a.Kind == ActSwitchover {
			require.Equal(t, a.Target, d.Primary, "what is promoted is the decision's primary")
			for _, i := range in.Instances {
				if i.Name == a.Target && a.Kind == ActPromote {
					require.True(t, a.WaitFor.Contains(i.has()), "a promotion applies everything received first")
				}
			}
		}
		if a.Kind == ActSwitchover {
			require.False(t, in.Leaving[a.Target], "a switchover never goes to an instance the scale-down removes")
			require.False(t, in.HandOver[a.Target], "a switchover never goes to an instance the roll restarts next")
		}
		if a.Kind == ActConfigureReplica || a.Kind == ActClone {
			require.NotEqual(t, a.Target, a.From)
		}
		if in.Fenced[a.Target] {
			require.Contains(t, []ActionKind{ActIsolate, ActFence}, a.Kind, "a fenced instance is only ever fenced")
		}
		require.False(t, in.Fenced[a.From], "no failover, switchover, clone or replication from a fenced instance is set up")
	}
	for name, r := range d.Roles {
		if in.Fenced[name] {
			require.Equal(t, resources.RoleNone, r, "a fenced instance is in neither Service")
		}
	}
}

func actionStrings(as []Action) []string {
	out := []string{}
	for _, a := range as {
		s := string(a.Kind) + " " + a.Target
		if a.From != "" {
			s += " from " + a.From
		}
		if a.WaitFor != nil {
			s += " wait " + a.WaitFor.String()
		}
		if a.Failover {
			s += " (failover)"
		}
		out = append(out, s)
	}
	return out
}

func frozen(i Instance, received string) Instance {
	i.IORunning = false
	i.Received = set(received)
	return i
}

func evicting(i Instance, stopped bool) Instance { i.Evicting, i.Stopped = true, stopped; return i }

func cloning(i Instance) Instance { i.Cloning = true; return i }

func reloading(i Instance) Instance { i.ReloadTLS = true; return i }

func withAcks(in Input, n int) Input { in.AckCount = n; return in }

func withFailed(in Input, name string) Input { in.FailedPrimary = name; return in }

func withDesired(in Input, name string) Input { in.Desired = name; return in }

func withLeaving(in Input, names ...string) Input {
	in.Leaving = map[string]bool{}
	for _, n := range names {
		in.Leaving[n] = true
	}
	return in
}

func withHandOver(in Input, names ...string) Input {
	in.HandOver = map[string]bool{}
	for _, n := range names {
		in.HandOver[n] = true
	}
	return in
}

func withReclone(in Input, name string) Input { in.Reclone = map[string]bool{name: true}; return in }

func withoutFailover(in Input) Input { in.FailoverEnabled = false; return in }
