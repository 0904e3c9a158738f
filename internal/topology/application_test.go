package topology

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func withApplication(in Input, applied bool) Input {
	in.Application = &Application{AccountOptions: mysql.AccountOptions{Database: "shop", User: "shop", Password: "pw"}, Applied: applied}
	return in
}

// TestDecideApplicationAccount: when the primary is given spec.application's account.
func TestDecideApplicationAccount(t *testing.T) {
	h := healthy3()
	ensure := Action{Kind: ActEnsureApplication, Target: "db-0"}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{"a healthy primary gets the account, and the cluster is not settled until it has it", withApplication(input("db-0", h...), false),
			want{state: StateHealthy, primary: "db-0", actions: []Action{ensure}}},
		{"an account applied needs nothing", withApplication(input("db-0", h...), true),
			want{state: StateHealthy, primary: "db-0", healthy: true, actions: []Action{}}},
		{"it is applied beside a clone (the recipient replicates what comes after it)", withApplication(input("db-0", h[0], fresh("db-1", 1), h[2]), false),
			want{primary: "db-0", actions: []Action{{Kind: ActClone, Target: "db-1", From: "db-0"}, ensure}}},
		{"not during a switchover", withApplication(withDesired(input("db-0", h...), "db-1"), false),
			want{state: StateSwitchover, primary: "db-1", actions: []Action{{Kind: ActSwitchover, Target: "db-1", From: "db-0"},
				{Kind: ActConfigureReplica, Target: "db-0", From: "db-1"}, {Kind: ActConfigureReplica, Target: "db-2", From: "db-1"}}}},
		{"not before a read-only primary is made writable", withApplication(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]), false),
			want{state: StateFailover, primary: "db-0", actions: []Action{{Kind: ActPromote, Target: "db-0", WaitFor: set(u1 + ":1-10")}}}},
		{"not on a fenced primary", withFenced(withApplication(input("db-0", with(h[0], func(i *Instance) { i.Writable = false }), h[1], h[2]), false), "db-0"),
			want{state: StateFenced, primary: "db-0", actions: []Action{}}},
		{"not while the primary is lost", withApplication(input("db-0", down("db-0", 0, 0), h[1], h[2]), false),
			want{state: StatePrimaryUnreachable, actions: []Action{}}},
		{"not at the first election", withApplication(input("", fresh("db-0", 0), fresh("db-1", 1)), false),
			want{state: StateBootstrapping, actions: []Action{{Kind: ActBootstrap, Target: "db-0"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requireDecision(t, tc.in, tc.want) })
	}
}

func TestManagerAppliesTheApplicationAccountOnceAndAgainOnANewPassword(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(20)
	w.m.Recorder = rec
	w.c.Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop", User: "web"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-app"},
		Data: map[string][]byte{resources.KeyAppPassword: []byte("first")}}
	w.pass(t) // bootstrap: the account waits for a settled primary (and, here, its Secret)
	require.NotContains(t, w.logged(), "EnsureAccount")
	require.NoError(t, w.m.Client.Create(context.Background(), secret))
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	require.Contains(t, w.logged(), "db-0 EnsureAccount shop web password=first")
	lease := func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-primary"}, l))
		return l
	}
	digest := lease().Annotations[annotationApplication]
	require.Len(t, digest, 32)
	require.NotContains(t, digest, "first")
	require.Equal(t, "db-0", *lease().Spec.HolderIdentity)
	var told []string
	for len(rec.Events) > 0 {
		told = append(told, <-rec.Events)
	}
	require.Contains(t, told, "Normal ApplicationAccount Account web has every privilege on database shop (created if missing) "+
		"and the password of Secret db-app")

	d := w.pass(t)
	require.NotContains(t, w.logged(), "EnsureAccount", "applied once")
	require.True(t, d.Healthy, d.Message)

	secret.Data[resources.KeyAppPassword] = []byte("second")
	require.NoError(t, w.m.Client.Update(context.Background(), secret))
	w.pass(t)
	require.Contains(t, w.logged(), "db-0 EnsureAccount shop web password=second")
	require.NotEqual(t, digest, lease().Annotations[annotationApplication])

	// A failover keeps the note: the new primary has the account through replication.
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{}
	w.instances["db-0"].down = true
	w.pass(t)
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	w.pass(t)
	require.Equal(t, "db-1", *lease().Spec.HolderIdentity)
	require.NotEmpty(t, lease().Annotations[annotationApplication])
	require.NotContains(t, w.logged(), "EnsureAccount")
}
