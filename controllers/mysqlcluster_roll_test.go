package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/topology"
)

func TestDecideRoll(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	pod := func(name, rev string, opts ...func(*rollPod)) rollPod {
		p := rollPod{name: name, revision: rev, ready: true, created: now.Add(-time.Hour)}
		for _, o := range opts {
			o(&p)
		}
		return p
	}
	notReady := func(p *rollPod) { p.ready = false }
	deleting := func(p *rollPod) { p.deleting = true }
	handOver := func(p *rollPod) { p.handOver = true }
	justCreated := func(p *rollPod) { p.created = now.Add(-time.Minute) }
	crashing := func(p *rollPod) { p.restarts = RollStuckRestarts }
	legacy := func(p *rollPod) { p.legacy = true }
	in := func(primary string, pods ...rollPod) rollInput {
		return rollInput{pods: pods, total: len(pods), revision: "new", settled: true, managed: true, primary: primary,
			healthy: true, caughtUp: []string{"db-0", "db-1", "db-2"}, now: now}
	}
	with := func(i rollInput, f func(*rollInput)) rollInput { f(&i); return i }
	cases := []struct {
		name string
		in   rollInput
		want rollPlan
	}{
		{"every pod runs the revision: nothing to do", in("db-0", pod("db-0", "new"), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 3, total: 3}},
		{"the highest outdated replica restarts first", in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "old")),
			rollPlan{total: 3, restart: "db-2", step: "restarting db-2 (0 of 3 instances updated)"}},
		{"the primary is skipped among the replicas", in("db-2", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "old")),
			rollPlan{total: 3, restart: "db-1", step: "restarting db-1"}},
		{"a pod being deleted is waited for", in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "old", deleting)),
			rollPlan{total: 3, step: "waiting for db-2 to restart"}},
		{"a restarted pod not Ready yet is waited for", in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "new", notReady, justCreated)),
			rollPlan{updated: 1, total: 3, step: "waiting for db-2 to be Ready"}},
		{"a restarted pod whose mysqld keeps failing pauses the roll",
			in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "new", notReady, justCreated, crashing)),
			rollPlan{updated: 1, total: 3, stuck: "db-2", step: "the roll is paused: db-2 has not become Ready since its restart 1m0s ago"}},
		{"a restarted pod not Ready for RollStuckAfter pauses the roll",
			in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "new", notReady)),
			rollPlan{updated: 1, total: 3, stuck: "db-2", step: "the roll is paused"}},
		{"an outdated replica that is not Ready restarts at once: the new template may fix it",
			in("db-0", pod("db-0", "new"), pod("db-1", "old", notReady), pod("db-2", "new", notReady)),
			rollPlan{updated: 2, total: 3, restart: "db-1", step: "restarting db-1, which is not Ready"}},
		{"a restarted replica that has not caught up is waited for",
			with(in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "new")), func(i *rollInput) { i.caughtUp = []string{"db-1"} }),
			rollPlan{updated: 1, total: 3, step: "waiting for db-2 to catch up with primary db-0"}},
		{"unhealthy replication holds the roll",
			with(in("db-0", pod("db-0", "old"), pod("db-1", "old"), pod("db-2", "new")), func(i *rollInput) { i.healthy = false }),
			rollPlan{updated: 1, total: 3, step: "waiting for replication to be healthy"}},
		{"no primary holds the roll",
			in("", pod("db-0", "old"), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 2, total: 3, step: "waiting for replication to be healthy"}},
		{"with every replica updated the primary is asked to hand over",
			in("db-0", pod("db-0", "old"), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 2, total: 3, handOver: "db-0", step: "switching over from primary db-0 before restarting it"}},
		{"a primary marked for hand-over is waited for",
			in("db-0", pod("db-0", "old", handOver), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 2, total: 3, step: "waiting for the switchover away from primary db-0"}},
		{"after the switchover the old primary restarts",
			in("db-1", pod("db-0", "old", handOver), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 2, total: 3, restart: "db-0", step: "restarting db-0 (2 of 3 instances updated)"}},
		{"a mark on a pod that runs the revision goes (the roll was undone)",
			in("db-0", pod("db-0", "new", handOver), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 3, total: 3, release: []string{"db-0"}}},
		{"a single instance restarts without a switchover", in("db-0", pod("db-0", "old")),
			rollPlan{total: 1, restart: "db-0", step: "restarting db-0"}},
		{"without a topology manager the primary restarts last, without a switchover",
			with(in("", pod("db-0", "old"), pod("db-1", "new")), func(i *rollInput) { i.managed = false; i.primary = "db-0" }),
			rollPlan{updated: 1, total: 2, restart: "db-0", step: "restarting db-0"}},
		{"pods of a template that cannot run under this operator (0.1.0's) restart without waiting for replication",
			with(in("", pod("db-0", "old", legacy), pod("db-1", "old", legacy), pod("db-2", "old", legacy)), func(i *rollInput) { i.healthy = false }),
			rollPlan{total: 3, restart: "db-2", step: "restarting db-2 (0 of 3 instances updated)"}},
		{"... each only once the one before is Ready",
			with(in("", pod("db-0", "old", legacy), pod("db-1", "old", legacy), pod("db-2", "new", notReady, justCreated)), func(i *rollInput) { i.healthy = false }),
			rollPlan{updated: 1, total: 3, step: "waiting for db-2 to be Ready"}},
		{"... and a primary of such a template restarts without a hand-over",
			in("db-0", pod("db-0", "old", legacy), pod("db-1", "new"), pod("db-2", "new")),
			rollPlan{updated: 2, total: 3, restart: "db-0", step: "restarting db-0"}},
		{"a StatefulSet its controller has not seen yet is waited for",
			with(in("db-0", pod("db-0", "old"), pod("db-1", "old")), func(i *rollInput) { i.settled = false }),
			rollPlan{total: 2, step: "waiting for the StatefulSet controller"}},
		{"a pod missing while none is outdated is no roll", with(in("db-0", pod("db-0", "new"), pod("db-1", "new")), func(i *rollInput) { i.total = 3 }),
			rollPlan{updated: 2, total: 3}},
		{"a missing pod is waited for", with(in("db-0", pod("db-0", "old"), pod("db-1", "new")), func(i *rollInput) { i.total = 3 }),
			rollPlan{updated: 1, total: 3, step: "waiting for every instance's pod to exist"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decideRoll(tc.in)
			require.True(t, strings.HasPrefix(got.step, tc.want.step), "step %q, want it to start with %q", got.step, tc.want.step)
			got.step, tc.want.step = "", ""
			require.Equal(t, tc.want, got)
			requireRollInvariants(t, tc.in, decideRoll(tc.in))
		})
	}
}

// requireRollInvariants: at most one change a pass; the primary is restarted only when
// it cannot hand over (one instance, or no topology manager); nothing restarts while a
// pod is being deleted, and no Ready pod while another is not.
func requireRollInvariants(t *testing.T, in rollInput, p rollPlan) {
	t.Helper()
	require.False(t, p.restart != "" && p.handOver != "", "one change a pass")
	if p.restart != "" && p.restart == in.primary {
		legacyPrimary := slices.ContainsFunc(in.pods, func(p rollPod) bool { return p.name == in.primary && p.legacy })
		require.True(t, in.total == 1 || !in.managed || legacyPrimary, "the primary restarts only when it cannot hand over")
	}
	var restarted rollPod
	for _, pod := range in.pods {
		if pod.name == p.restart {
			restarted = pod
		}
	}
	for _, pod := range in.pods {
		if pod.deleting {
			require.Empty(t, p.restart, "nothing restarts while %s is being deleted", pod.name)
		}
		if !pod.ready && restarted.ready && restarted.name != pod.name {
			t.Fatalf("%s, Ready, restarted while %s is not", p.restart, pod.name)
		}
	}
}

func TestScaleDownReplicas(t *testing.T) {
	c := testCluster()
	c.Name = "db"
	c.Spec.Instances = new(int32(3))
	managed := func(primary string) topology.Report { return topology.Report{Managed: true, CurrentPrimary: primary} }
	for _, tc := range []struct {
		name string
		rep  topology.Report
		want int32
		msg  string
	}{
		{"the primary stays: shrink", managed("db-1"), 3, ""},
		{"the primary leaves: hold", managed("db-4"), 5, "the scale-down to 3 instances waits for primary db-4 to hand over to an instance it keeps"},
		{"no primary: hold", managed(""), 5, "the scale-down to 3 instances waits for a primary"},
		{"no topology manager: shrink", topology.NotManaged(), 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := scaleDownReplicas(c, 5, tc.rep)
			require.Equal(t, tc.want, *got)
			require.Equal(t, tc.msg, msg)
		})
	}
}
