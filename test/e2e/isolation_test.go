package e2e_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// TestAHungClusterWithACloneInFlightCostsAnotherNothing: one cluster's every mysqld is
// stopped (SIGSTOP: it accepts connections and answers nothing) while a CLONE into its
// replica is in flight; another cluster's switchover must still complete at once, since
// each cluster has its own topology loop and every call has a deadline.
func TestAHungClusterWithACloneInFlightCostsAnotherNothing(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	hung, other := newCluster(ns, "hung", mysqlv1beta1.DeletionPolicyDelete), newCluster(ns, "other", mysqlv1beta1.DeletionPolicyDelete)
	hung.Spec.Instances, other.Spec.Instances = new(int32(2)), new(int32(2))
	require.NoError(t, k8s.Create(ctx, hung))
	require.NoError(t, k8s.Create(ctx, other))
	readyCluster(t, ns, "hung")
	readyCluster(t, ns, "other")
	waitPrimary(t, ns, "other", "other-0")

	// A clone into hung-1 that lasts: an errant write makes it need one, the user allows
	// it, and the recipient copies at 1 MiB/s (the data files are tens of MiB).
	replica := dbOf(t, ns, "hung-1")
	_, err := replica.Exec("SET GLOBAL clone_max_data_bandwidth = 1")
	require.NoError(t, err)
	errantWrite(t, replica, "errant")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hung), hung))
	hung.Annotations = map[string]string{"mysql.dolphin-operator.io/reclone": "hung-1"}
	require.NoError(t, k8s.Update(ctx, hung))
	waitFor(t, time.Minute, "a clone into hung-1 in progress", func() error {
		var state string
		if err := replica.QueryRow("SELECT STATE FROM performance_schema.clone_status").Scan(&state); err != nil {
			return err
		}
		if state != "In Progress" {
			return fmt.Errorf("clone %s", state)
		}
		return nil
	})

	pods := map[string]*corev1.Pod{}
	for _, n := range []string{"hung-0", "hung-1"} {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod))
		pods[n] = pod
		require.NoError(t, g.Signal(pod, "mysqld", "mysqld", syscall.SIGSTOP))
	}
	t.Cleanup(func() {
		for _, pod := range pods {
			_ = g.Signal(pod, "mysqld", "mysqld", syscall.SIGCONT) // may have been restarted by its liveness probe already
		}
	})
	stoppedAt := time.Now()

	// The other cluster switches over while every call to hung's instances goes unanswered.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(other), other))
	other.Spec.Primary = "other-1"
	require.NoError(t, k8s.Update(ctx, other))
	asked := time.Now()
	c := &mysqlv1beta1.MySQLCluster{}
	waitFor(t, time.Minute, "other-1 as the other cluster's primary", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(other), c); err != nil {
			return err
		}
		if c.Status.CurrentPrimary != "other-1" {
			return fmt.Errorf("primary %q", c.Status.CurrentPrimary)
		}
		return nil
	})
	took := time.Since(asked)
	t.Logf("switchover of the other cluster: %s (hung's mysqld stopped %s before it was asked for)",
		took.Round(10*time.Millisecond), asked.Sub(stoppedAt).Round(10*time.Millisecond))
	require.Less(t, took, 5*time.Second, "a hung cluster must not slow another's switchover")
	requireTopology(t, ns, "other-1", "other-0", "other-1")

	// hung: its primary never became unreachable past a failover it could prove safe (its
	// only replica is being cloned), so nothing was promoted; once resumed it returns to
	// Ready with the clone done and the errant write gone.
	for _, pod := range pods {
		_ = g.Signal(pod, "mysqld", "mysqld", syscall.SIGCONT)
	}
	// The slow copy has done its part (a clone in flight while hung): its limit is lifted
	// so that the rest of the test does not wait on it (a mysqld restarted meanwhile by its
	// liveness probe has no limit anyway).
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = replica.ExecContext(sctx, "SET GLOBAL clone_max_data_bandwidth = 0")
	cancel()
	if err != nil {
		t.Logf("hung-1 did not take the bandwidth back (%v): restarted, or busy with the clone", err)
	}
	waitFor(t, 4*time.Minute, "hung Ready again, hung-0 primary", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(hung), c); err != nil {
			return err
		}
		if c.Status.CurrentPrimary != "hung-0" || c.Status.ReadyInstances != 2 || c.Status.Phase != mysqlv1beta1.PhaseReady {
			return fmt.Errorf("primary %q, phase %s, conditions %v", c.Status.CurrentPrimary, c.Status.Phase, c.Status.Conditions)
		}
		return nil
	})
	dbs := column(t, dbOf(t, ns, "hung-1"), "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'errant'")
	require.Empty(t, dbs, "the clone replaced hung-1's data")
}
