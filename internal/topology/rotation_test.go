package topology

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func withRotation(in Input, phase resources.RotationPhase, done bool) Input {
	in.Rotation = &PasswordRotation{Phase: phase, Ask: "r1", Done: done}
	return in
}

// TestDecidePasswordRotation: when the primary takes a rotation's steps.
func TestDecidePasswordRotation(t *testing.T) {
	h := healthy3()
	h[0].SemiSyncClients = 2
	retain := Action{Kind: ActRetainPasswords, Target: "db-0"}
	discard := Action{Kind: ActDiscardOldPasswords, Target: "db-0"}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{"none asked", input("db-0", h...), want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"a healthy primary retains", withRotation(input("db-0", h...), resources.RotationRetaining, false),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{retain}}},
		{"retained once", withRotation(input("db-0", h...), resources.RotationRetaining, true),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"a healthy cluster discards", withRotation(input("db-0", h...), resources.RotationDiscarding, false),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{discard}}},
		{"discarded once", withRotation(input("db-0", h...), resources.RotationDiscarding, true),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"the topology has nothing to do while the pods restart", withRotation(input("db-0", h...), resources.RotationRolling, false),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"no retain while a replica does not answer: it would refuse the new passwords once swapped in",
			withRotation(input("db-0", h[0], down("db-1", 1, 0), h[2]), resources.RotationRetaining, false),
			want{primary: "db-0", actions: []Action{}}},
		{"no step while the primary lacks the semi-sync replicas its commits wait for: an account change would hold every login",
			withRotation(input("db-0", with(h[0], func(i *Instance) { i.SemiSyncClients = 0 }), h[1], h[2]), resources.RotationDiscarding, false),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"no discard while a replica's receiver reconnects",
			withRotation(input("db-0", h[0], with(h[1], func(i *Instance) { i.IOConnecting = true }), h[2]), resources.RotationDiscarding, false),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"no step while an instance is cloned", withRotation(input("db-0", h[0], with(h[1], func(i *Instance) { i.Cloning = true }), h[2]),
			resources.RotationRetaining, false),
			want{primary: "db-0", actions: []Action{}}},
		{"no discard while a replica does not answer: its channel would keep the old password",
			withRotation(input("db-0", h[0], down("db-1", 1, 0), h[2]), resources.RotationDiscarding, false),
			want{primary: "db-0", actions: []Action{}}},
		{"no discard while a replica's receiver is stopped",
			withRotation(input("db-0", h[0], with(h[1], func(i *Instance) { i.IORunning = false }), h[2]), resources.RotationDiscarding, false),
			want{primary: "db-0", actions: []Action{{Kind: ActConfigureReplica, Target: "db-1", From: "db-0"}}}},
		{"not during a switchover", withRotation(withDesired(input("db-0", h...), "db-1"), resources.RotationRetaining, false),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
		{"not on a fenced primary", withFenced(withRotation(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]),
			resources.RotationRetaining, false), "db-0"),
			want{state: StateFenced, primary: "db-0", actions: []Action{}}},
		{"not while the primary is lost", withRotation(input("db-0", down("db-0", 0, 0), h[1], h[2]), resources.RotationRetaining, false),
			want{state: StatePrimaryUnreachable, actions: []Action{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireDecision(t, tc.in, tc.want) })
	}
}

func TestManagerTakesTheRotationsStepsOnThePrimary(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.pass(t) // bootstrap
	w.replicate("db-0", u1+":1-5")
	w.instances["db-0"].status.SemiSyncSourceClients = 2
	w.pass(t)
	secret := func(mutate func(*corev1.Secret)) {
		s := &corev1.Secret{}
		require.NoError(t, w.m.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-credentials"}, s))
		mutate(s)
		require.NoError(t, w.m.Client.Update(ctx, s))
	}
	lease := func() map[string]string {
		l := &coordinationv1.Lease{}
		require.NoError(t, w.m.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-primary"}, l))
		return l.Annotations
	}
	secret(func(s *corev1.Secret) {
		for _, k := range resources.RotatedKeys {
			s.Data[resources.NextKey(k)] = []byte("new-" + k)
		}
		s.Annotations = map[string]string{resources.AnnotationRotatingFor: "r1"}
	})
	r, _, _ := w.m.pass(ctx, w.c)
	require.NotContains(t, r.Message, "the last step failed")
	require.Len(t, r.History, 1, "the step is in status.history")
	require.Equal(t, []string{"RetainPasswords", "db-0", mysqlv1beta1.ReasonPasswordRotation},
		[]string{r.History[0].Action, r.History[0].Instance, r.History[0].Reason})
	log := w.logged()
	require.Contains(t, log, "db-0 RetainPassword dolphin-admin password=new-ADMIN_PASSWORD")
	for _, u := range []string{"dolphin-repl password=new-REPLICATION_PASSWORD", "dolphin-exporter password=new-EXPORTER_PASSWORD",
		"dolphin-backup password=new-BACKUP_PASSWORD", "dolphin-users password=new-USERS_PASSWORD"} {
		require.Contains(t, log, "db-0 RetainPassword "+u)
	}
	require.Equal(t, "r1", lease()[resources.AnnotationPasswordsRetained])
	w.pass(t)
	require.NotContains(t, w.logged(), "RetainPassword", "noted in the Lease: not again")

	// The reconciler swapped the passwords; once every pod uses them it asks for the discard.
	secret(func(s *corev1.Secret) {
		for _, k := range resources.RotatedKeys {
			s.Data[resources.PreviousKey(k)], s.Data[k] = s.Data[k], s.Data[resources.NextKey(k)]
			delete(s.Data, resources.NextKey(k))
		}
		s.Annotations = map[string]string{resources.AnnotationRotatedFor: "r1"}
	})
	w.pass(t)
	require.NotContains(t, w.logged(), "Discard", "not while the pods restart")
	secret(func(s *corev1.Secret) { s.Annotations[resources.AnnotationDiscardFor] = "r1" })
	w.pass(t)
	log = w.logged()
	for _, r := range []string{"db-1", "db-2"} {
		require.Contains(t, log, r+" RenewReplica 10.0.0.1 password=new-REPLICATION_PASSWORD")
	}
	require.NotContains(t, log, "db-0 RenewReplica")
	require.Contains(t, log, "db-0 DiscardOldPasswords dolphin-admin\n")
	require.Contains(t, log, "db-0 DiscardOldPasswords dolphin-repl,dolphin-exporter,dolphin-backup,dolphin-users")
	require.Equal(t, "r1", lease()[resources.AnnotationPasswordsDiscarded])
	require.Equal(t, "r1", lease()[resources.AnnotationPasswordsRetained])
	w.pass(t)
	require.NotContains(t, w.logged(), "Discard", "noted in the Lease: not again")
}
