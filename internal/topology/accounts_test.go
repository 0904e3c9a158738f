package topology

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func withWideAccounts(in Input) Input {
	in.AccountsWide = true
	return in
}

// TestDecideNarrowAccounts: when the primary's accounts of an earlier release are narrowed.
func TestDecideNarrowAccounts(t *testing.T) {
	h := healthy3()
	narrow := Action{Kind: ActNarrowAccounts, Target: "db-0"}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{"a healthy primary's wide accounts are narrowed, and the cluster is not settled until then", withWideAccounts(input("db-0", h...)),
			want{state: StateHealthy, primary: "db-0", actions: []Action{narrow}}},
		{"narrowed accounts need nothing", input("db-0", h...),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"before the application account, which the users account they make then creates", withApplication(withWideAccounts(input("db-0", h...)), false),
			want{state: StateHealthy, primary: "db-0", actions: []Action{narrow, {Kind: ActEnsureApplication, Target: "db-0"}}}},
		{"not during a switchover", withWideAccounts(withDesired(input("db-0", h...), "db-1")),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
		{"not on a fenced primary", withFenced(withWideAccounts(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2])), "db-0"),
			want{state: StateFenced, primary: "db-0", actions: []Action{}}},
		{"not while the primary is lost", withWideAccounts(input("db-0", down("db-0", 0, 0), h[1], h[2])),
			want{state: StatePrimaryUnreachable, actions: []Action{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireDecision(t, tc.in, tc.want) })
	}
}

func TestManagerNarrowsAnEarlierReleasesAccountsOnceAndNotesIt(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(20)
	w.m.Recorder = rec
	for _, f := range w.instances {
		f.wide = true
	}
	w.pass(t) // bootstrap
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	require.Contains(t, w.logged(), "db-0 NarrowAccount 6 prepared, 3 grants",
		"drop root@'%', make the users and probe accounts, then grant")
	lease := &coordinationv1.Lease{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-primary"}, lease))
	require.Equal(t, accountsNarrowed, lease.Annotations[annotationAccounts])
	var told []string
	for len(rec.Events) > 0 {
		told = append(told, <-rec.Events)
	}
	require.Contains(t, told, "Normal AccountsNarrowed On db-0: root connects over the local socket only; dolphin-admin has the "+
		"operator's privileges only; dolphin-users manages the application's account")

	reads := w.instances["db-0"].wideReads
	d := w.pass(t)
	require.Equal(t, reads, w.instances["db-0"].wideReads, "the Lease's note spares the read")
	require.True(t, d.Healthy, d.Message)
}

func TestManagerNotesAccountsFoundNarrowedWithoutActing(t *testing.T) {
	w := newWorld(t)
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	require.Positive(t, w.instances["db-0"].wideReads)
	require.NotContains(t, w.logged(), "NarrowAccount")
	lease := &coordinationv1.Lease{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-primary"}, lease))
	require.Equal(t, accountsNarrowed, lease.Annotations[annotationAccounts])
	reads := w.instances["db-0"].wideReads
	w.pass(t)
	require.Equal(t, reads, w.instances["db-0"].wideReads, "not read again")
}
