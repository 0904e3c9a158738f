package deploy_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
	"github.com/dolphin-operator/dolphin/test/workload"
)

// TestAnOperatorUpgradeRestartsNoDatabase upgrades a `make deploy` install from the previous
// build (its operator image, built from its own commit: make previous-image) to this one,
// on a running 3-instance cluster with a writer, the way a kustomize user upgrades: `make
// deploy` again, with the new operator image and, as a new release would, another default
// MySQL image. The new operator keeps the pod template the instances run: no pod is
// replaced, no mysqld restarts, PendingRestart names the image a restart would bring, and
// the previous build's accounts are narrowed in place (no root over TCP).
// spec.updatePolicy.operatorUpgrade Roll then rolls the instances onto it, replicas first
// and the primary last after one switchover. No acknowledged write is lost.
func TestAnOperatorUpgradeRestartsNoDatabase(t *testing.T) {
	ground.Level(t, ground.Core)
	ctx := context.Background()
	from := os.Getenv("DOLPHIN_UPGRADE_FROM")
	require.True(t, len(from) == 40, "DOLPHIN_UPGRADE_FROM is set by the Makefile")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (end):\n%s", g.OperatorLogs(context.Background()))
		}
	})
	this, oldMySQL := g.OperatorImage, g.MySQLImage
	newMySQL := oldMySQL + "-next" // the same release under the tag the next operator defaults to
	require.NoError(t, g.TagImage(ctx, oldMySQL, newMySQL))

	// The ground's operator goes back to the previous build, and is put back as it was when
	// the test ends, before the test's namespace goes.
	ns, name := suite.Namespace(t, k8s, "upgrade"), "orders"
	t.Cleanup(func() {
		if err := g.Deploy(context.Background()); err != nil {
			t.Errorf("putting the ground's operator back: %v", err)
		}
	})
	previous := *g
	previous.OperatorImage = ground.PreviousOperatorImage(from)
	require.NoError(t, previous.Deploy(ctx))
	waitOperator(t, k8s, previous.OperatorImage)
	names := []string{"orders-0", "orders-1", "orders-2"}
	size := resource.MustParse("1Gi")
	require.NoError(t, k8s.Create(ctx, &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)), DeletionPolicy: mysqlv1beta1.DeletionPolicyDelete,
			MySQL:   mysqlv1beta1.MySQLSpec{Version: g.MySQLSeries(), Config: map[string]string{"innodb_buffer_pool_size": "64M"}},
			Storage: mysqlv1beta1.StorageSpec{Size: &size}}}))
	waitFor(t, 4*time.Minute, "the cluster Ready under the previous build", func() error { return ready(ctx, k8s, ns, name) })
	before, err := ground.PodUIDs(ctx, k8s, ns, names...)
	require.NoError(t, err)
	writer, err := workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, ns, name, ground.ServiceHost(ns, name+"-primary"))
	})
	require.NoError(t, err)
	t.Cleanup(func() { writer.Stop() })
	time.Sleep(2 * time.Second) // writes before the upgrade

	// The upgrade: `make deploy` of this build, whose default MySQL image is another tag.
	upgraded := time.Now()
	next := *g
	next.MySQLImage = newMySQL
	require.NoError(t, next.Deploy(ctx))
	waitOperator(t, k8s, this)
	c := &mysqlv1beta1.MySQLCluster{}
	took := waitFor(t, 2*time.Minute, "PendingRestart to name the new image", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		p := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionPendingRestart)
		if p == nil || p.Status != metav1.ConditionTrue || !strings.Contains(p.Message, oldMySQL+" -> "+newMySQL) {
			return fmt.Errorf("PendingRestart: %+v", p)
		}
		return ready(ctx, k8s, ns, name)
	})
	pending := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionPendingRestart)
	t.Logf("the new operator held the template %s after the upgrade began: %s", took.Round(10*time.Millisecond), pending.Message)
	// The accounts the previous build made (root over TCP, an admin account with every
	// privilege) are narrowed in place, without a restart (checked below).
	waitFor(t, time.Minute, "the primary Lease to note the accounts narrowed", func() error {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-primary"}, l); err != nil {
			return err
		}
		if v := l.Annotations["mysql.dolphin-operator.io/accounts"]; v != "narrowed" {
			return fmt.Errorf("annotation %q", v)
		}
		return nil
	})
	for _, n := range names { // the replicas by replication
		waitFor(t, 30*time.Second, n+" to refuse root over TCP and the admin account a table", func() error {
			return narrowed(ctx, g, ns, name, n)
		})
	}
	time.Sleep(10 * time.Second) // passes of the new operator, each of which could have restarted something
	uptime, err := g.Uptimes(ctx, ns, name, names...)
	require.NoError(t, err)
	after, err := ground.PodUIDs(ctx, k8s, ns, names...)
	require.NoError(t, err)
	require.Equal(t, before, after, "no pod was replaced")
	for n, up := range uptime {
		require.GreaterOrEqual(t, time.Duration(up)*time.Second, time.Since(upgraded), "%s's mysqld ran through the upgrade", n)
	}
	sts := &appsv1.StatefulSet{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts))
	require.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type, "the roll is the operator's from now on")
	require.Equal(t, oldMySQL, resources.MySQLImageOf(sts.Spec.Template.Spec.Containers), "the template the instances run is kept")

	// The opt-in: the roll onto the new template, primary last.
	primary := c.Status.CurrentPrimary
	transitions, err := ground.LeaseTransitions(ctx, k8s, ns, name)
	require.NoError(t, err)
	watch, err := ground.WatchRestarts(ctx, k8s, ns, name, names...)
	require.NoError(t, err)
	t.Cleanup(func() { watch.Stop() })
	ground.UpdateCluster(t, k8s, ns, name, func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.UpdatePolicy.OperatorUpgrade = mysqlv1beta1.OperatorUpgradeRoll
	})
	waitFor(t, 6*time.Minute, "every instance restarted onto the new template, the cluster Ready", func() error {
		if order := watch.Order(); len(order) < len(names) {
			return fmt.Errorf("restarted so far: %v", order)
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if c.Status.Rollout != nil || meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionPendingRestart) {
			return fmt.Errorf("rollout %+v, conditions %v", c.Status.Rollout, c.Status.Conditions)
		}
		return ready(ctx, k8s, ns, name)
	})
	order, rollouts := watch.Stop()
	t.Logf("restart order %v; status.rollout seen: %v", order, rollouts)
	require.Equal(t, primary, order[len(order)-1], "the primary restarts last")
	require.Len(t, order, len(names), "each instance restarts once")
	switched, err := ground.LeaseTransitions(ctx, k8s, ns, name)
	require.NoError(t, err)
	require.Equal(t, transitions+1, switched, "exactly one switchover")
	for _, n := range names {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod))
		require.Equal(t, newMySQL, resources.MySQLImageOf(pod.Spec.Containers), n)
	}

	acks := writer.Stop()
	require.NotEmpty(t, acks)
	requireNoLostWrites(t, g, ns, name, c.Status.CurrentPrimary, acks)
	requireNoForbidden(t, g.OperatorLogs(context.Background()))
}

// ready is nil once the cluster is Ready for its generation with every instance.
func ready(ctx context.Context, k8s client.Client, ns, name string) error {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return err
	}
	if c.Status.ObservedGeneration != c.Generation || !meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) ||
		c.Status.ReadyInstances != *c.Spec.Instances || c.Status.CurrentPrimary == "" {
		return fmt.Errorf("phase %s, primary %q, conditions %v", c.Status.Phase, c.Status.CurrentPrimary, c.Status.Conditions)
	}
	return nil
}

// waitOperator waits until the only operator pod runs image and is Ready.
func waitOperator(t *testing.T, k8s client.Client, image string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "the operator pod of "+image, func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(operatorNS),
			client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.Containers[0].Image != image || pods.Items[0].DeletionTimestamp != nil {
			return fmt.Errorf("%d operator pods", len(pods.Items))
		}
		for _, cond := range pods.Items[0].Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("pod %s not Ready", pods.Items[0].Name)
	})
}

// requireNoLostWrites reads every acknowledged write back from the primary.
func requireNoLostWrites(t *testing.T, g *ground.Ground, ns, cluster, primary string, acks []workload.Ack) {
	t.Helper()
	var lost []int
	waitFor(t, 30*time.Second, "the acknowledged writes to be read from "+primary, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := g.DB(ctx, ns, cluster, primary)
		if err != nil {
			return err
		}
		defer d.Close()
		lost, err = workload.Lost(ctx, d, acks)
		return err
	})
	t.Logf("%d acknowledged writes, lost: %v", len(acks), lost)
	require.Empty(t, lost, "every acknowledged write survives")
}

// narrowed says why instance n still has an earlier build's accounts: root logs in over
// TCP, or the admin account reads mysql.user.
func narrowed(ctx context.Context, g *ground.Ground, ns, cluster, n string) error {
	root, err := g.AccountDB(ctx, ns, cluster, n, "root", resources.KeyRootPassword)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if err := root.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "Error 1045") {
		return fmt.Errorf("root over TCP: %w", err)
	}
	admin, err := g.AccountDB(ctx, ns, cluster, n, resources.AdminUser, resources.KeyAdminPassword)
	if err != nil {
		return err
	}
	defer func() { _ = admin.Close() }()
	var rows int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user").Scan(&rows); err == nil || !strings.Contains(err.Error(), "Error 1142") {
		return fmt.Errorf("the admin account reading mysql.user: %w", err)
	}
	return nil
}
