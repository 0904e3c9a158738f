package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/workload"
)

// TestARollRestartsThePrimaryLastAndAScaleDownNeverRemovesIt runs one writer through the
// week's changes on one 3-instance cluster: an online setting changes on the running
// instances with no restart; a my.cnf setting that needs a restart rolls the
// replicas first, then switches over once and restarts the old primary; so does a change
// of the image; a scale-up to 5
// clones the new instances, and spec.primary moves the primary onto the last; the scale-down
// back to 3 (spec.primary cleared) hands the primary over before its pod goes. No
// acknowledged write is lost and no two instances are ever writable at once.
func TestARollRestartsThePrimaryLastAndAScaleDownNeverRemovesIt(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	names := []string{"roll-0", "roll-1", "roll-2"}
	c := newCluster(ns, "roll", mysqlv1beta1.DeletionPolicyDelete)
	require.NoError(t, k8s.Create(ctx, c))
	readyCluster(t, ns, "roll")
	waitPrimary(t, ns, "roll", "roll-0")

	w, err := workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, ns, "roll", ground.ServiceHost(ns, "roll-primary"))
	})
	require.NoError(t, err)
	s := startSampler(t, ns, names...)
	time.Sleep(time.Second)

	// An online setting: set on the running instances, no pod restarted.
	transitions := leaseTransitions(t, ns, "roll")
	before, uptime := podUIDs(t, ns, names...), uptimes(t, ns, names...)
	updateCluster(t, ns, "roll", func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Config["max_connections"] = "222" })
	waitFor(t, time.Minute, "max_connections 222 on every instance", func() error {
		for _, n := range names {
			if got := column(t, dbOf(t, ns, n), "SELECT @@GLOBAL.max_connections"); got[0] != "222" {
				return fmt.Errorf("%s: %s", n, got[0])
			}
		}
		return readyAndRolledOut(ns, "roll")
	})
	require.Equal(t, before, podUIDs(t, ns, names...), "no pod was replaced")
	for name, up := range uptimes(t, ns, names...) {
		require.GreaterOrEqual(t, up, uptime[name], "%s's mysqld kept running", name)
	}
	require.Equal(t, transitions, leaseTransitions(t, ns, "roll"), "no switchover")

	// A restart-needing setting (back_log is read at start only).
	rollouts := requireRollPrimaryLast(t, ns, "roll", names, "roll-0", "the new my.cnf",
		func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Config["back_log"] = "123" })
	require.NotEmpty(t, rollouts, "status.rollout reports the roll while it runs")
	primary := currentPrimary(t, ns, "roll")
	require.NotEqual(t, "roll-0", primary)
	requireTopology(t, ns, primary, names...)
	for _, n := range names {
		require.Equal(t, []string{"123"}, column(t, dbOf(t, ns, n), "SELECT @@back_log"), n)
	}
	requireNoLostWrites(t, ns, primary, w.Acks())

	// An image change (the same release under another name, as a user's mirror would
	// serve it): the same roll, the primary last after one switchover.
	mirror := g.MySQLImage + "-mirror"
	require.NoError(t, g.TagImage(ctx, g.MySQLImage, mirror))
	requireRollPrimaryLast(t, ns, "roll", names, primary, "the image",
		func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Image = mirror })
	for _, n := range names {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod))
		require.Equal(t, mirror, pod.Spec.Containers[0].Image, n)
	}
	primary = currentPrimary(t, ns, "roll")
	requireNoLostWrites(t, ns, primary, w.Acks())

	// A rotation of the operator's passwords: the same roll onto the new passwords, then
	// the old ones are refused everywhere.
	primary = requireOperatorPasswordRotation(t, ns, "roll", names, primary)
	requireTopology(t, ns, primary, names...)
	requireNoLostWrites(t, ns, primary, w.Acks())

	// Scale up to 5, the primary moved onto the last instance once it has joined.
	updateCluster(t, ns, "roll", func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Instances = new(int32(5))
		c.Spec.Primary = "roll-4"
	})
	readyCluster(t, ns, "roll")
	waitPrimary(t, ns, "roll", "roll-4")
	requireTopology(t, ns, "roll-4", "roll-0", "roll-1", "roll-2", "roll-3", "roll-4")
	for _, n := range []string{"roll-3", "roll-4"} {
		require.Contains(t, column(t, dbOf(t, ns, n), "SELECT COUNT(*) FROM performance_schema.clone_status WHERE STATE = 'Completed'"), "1",
			"%s was seeded by a clone", n)
	}
	requireNoLostWrites(t, ns, "roll-4", w.Acks())

	// Scale down to 3: the primary runs on an instance the scale-down removes.
	transitions = leaseTransitions(t, ns, "roll")
	gone := watchPrimaryAtDeletion(t, ns, "roll", "roll-3", "roll-4")
	updateCluster(t, ns, "roll", func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Instances = new(int32(3))
		c.Spec.Primary = ""
	})
	waitFor(t, 3*time.Minute, "roll-3 and roll-4 gone, the cluster Ready on 3 instances", func() error {
		for _, n := range []string{"roll-3", "roll-4"} {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &corev1.Pod{})
			if err == nil {
				return fmt.Errorf("%s still runs", n)
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return readyAndRolledOut(ns, "roll")
	})
	atDeletion := gone()
	t.Logf("primary when each leaving pod's deletion was seen: %v", atDeletion)
	for pod, p := range atDeletion {
		require.NotEqual(t, pod, p, "%s is not the primary when its pod is deleted", pod)
	}
	require.Equal(t, transitions+1, leaseTransitions(t, ns, "roll"), "one switchover away from roll-4, no failover")
	primary = currentPrimary(t, ns, "roll")
	require.Contains(t, names, primary)
	requireTopology(t, ns, primary, names...)
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-roll-4"}, &corev1.PersistentVolumeClaim{}),
		"a scaled-away instance keeps its volume")
	requireNoFailoverEvent(t, ns, "roll")

	acked := w.Stop()
	s.finish(t)
	require.NotEmpty(t, acked)
	requireNoLostWrites(t, ns, primary, acked)
}

// requireRollPrimaryLast makes a change that restarts every instance and checks the roll:
// each instance restarted once, primary (the primary before the change) last, exactly one
// switchover, the cluster Ready with no roll left. It returns the status.rollout values seen.
func requireRollPrimaryLast(t *testing.T, ns, cluster string, names []string, primary, what string,
	change func(*mysqlv1beta1.MySQLCluster)) []string {
	t.Helper()
	transitions := leaseTransitions(t, ns, cluster)
	watch := watchRestarts(t, ns, names...)
	updateCluster(t, ns, cluster, change)
	waitFor(t, 6*time.Minute, "every instance restarted onto "+what+", the cluster Ready", func() error {
		if order := watch.Order(); len(order) < len(names) {
			return fmt.Errorf("restarted so far: %v", order)
		}
		return readyAndRolledOut(ns, cluster)
	})
	order, rollouts := watch.Stop()
	t.Logf("restart order for %s %v; status.rollout seen: %v", what, order, rollouts)
	require.Equal(t, primary, order[len(order)-1], "the primary restarts last")
	require.Len(t, order, len(names), "each instance restarts once")
	require.Equal(t, transitions+1, leaseTransitions(t, ns, cluster), "exactly one switchover")
	return rollouts
}

// updateCluster changes the cluster's spec, retrying on conflicts.
func updateCluster(t *testing.T, ns, name string, change func(*mysqlv1beta1.MySQLCluster)) {
	t.Helper()
	ground.UpdateCluster(t, k8s, ns, name, change)
}

// readyAndRolledOut is nil once the cluster is Ready for its generation with no roll going on.
func readyAndRolledOut(ns, name string) error {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionReady)
	switch {
	case c.Status.ObservedGeneration != c.Generation:
		return fmt.Errorf("status of generation %d, spec %d", c.Status.ObservedGeneration, c.Generation)
	case c.Status.Rollout != nil:
		return fmt.Errorf("rolling: %+v", *c.Status.Rollout)
	case ready == nil || ready.Status != "True" || c.Status.ReadyInstances != *c.Spec.Instances:
		return fmt.Errorf("not Ready: %v", c.Status.Conditions)
	}
	return nil
}

// podUIDs is each pod's UID, by name.
func podUIDs(t *testing.T, ns string, names ...string) map[string]types.UID {
	t.Helper()
	uids, err := ground.PodUIDs(context.Background(), k8s, ns, names...)
	require.NoError(t, err)
	return uids
}

func currentPrimary(t *testing.T, ns, name string) string {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c))
	require.NotEmpty(t, c.Status.CurrentPrimary)
	return c.Status.CurrentPrimary
}

// leaseTransitions is how many times the primary Lease changed holder.
func leaseTransitions(t *testing.T, ns, name string) int32 {
	t.Helper()
	n, err := ground.LeaseTransitions(context.Background(), k8s, ns, name)
	require.NoError(t, err)
	return n
}

// watchRestarts records the order in which the pods restart and the roll progress
// status.rollout reports meanwhile (ground.RestartWatch); it stops with the test.
func watchRestarts(t *testing.T, ns string, names ...string) *ground.RestartWatch {
	t.Helper()
	rw, err := ground.WatchRestarts(context.Background(), k8s, ns, clusterOf(names[0]), names...)
	require.NoError(t, err)
	t.Cleanup(func() { rw.Stop() })
	return rw
}

// watchPrimaryAtDeletion records, for each of the pods, the primary the Lease recorded when
// the pod's deletion was first seen (polled every 50 ms); the returned function stops it.
func watchPrimaryAtDeletion(t *testing.T, ns, cluster string, pods ...string) func() map[string]string {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	c.Name = cluster
	seen := map[string]string{}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for len(seen) < len(pods) {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l := &coordinationv1.Lease{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PrimaryLeaseName(c)}, l); err != nil || l.Spec.HolderIdentity == nil {
				cancel()
				continue
			}
			for _, n := range pods {
				pod := &corev1.Pod{}
				err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod)
				if _, ok := seen[n]; !ok && (apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil)) {
					seen[n] = *l.Spec.HolderIdentity
				}
			}
			cancel()
		}
	}()
	return func() map[string]string {
		close(done)
		<-stopped
		return seen
	}
}

// requireNoFailoverEvent checks the operator announced no failover of the cluster.
func requireNoFailoverEvent(t *testing.T, ns, cluster string) {
	t.Helper()
	evs := &eventsv1.EventList{}
	require.NoError(t, k8s.List(context.Background(), evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		if e.Regarding.Name == cluster && e.Reason == mysqlv1beta1.ReasonFailover {
			t.Fatalf("a failover was announced: %s %s", e.Action, e.Note)
		}
	}
}
