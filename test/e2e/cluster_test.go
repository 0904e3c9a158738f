package e2e_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/cli"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
)

func namespace(t *testing.T) string { return suite.Namespace(t, k8s, "e2e") }

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return ground.WaitFor(t, timeout, what, cond, func() { require.NoError(t, g.Healthy()) })
}

// userMaxConnections is a spec.mysql.config value every test cluster sets: the instances
// must run with it.
const userMaxConnections = "321"

// newCluster is a 3-instance cluster of the ground's MySQL series.
func newCluster(ns, name string, policy mysqlv1beta1.DeletionPolicy) *mysqlv1beta1.MySQLCluster {
	return &mysqlv1beta1.MySQLCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)), DeletionPolicy: policy,
			MySQL: mysqlv1beta1.MySQLSpec{Version: g.MySQLSeries(),
				Config: map[string]string{"max_connections": userMaxConnections, "innodb_buffer_pool_size": "64M"}},
			Storage: mysqlv1beta1.StorageSpec{Size: new(resourceQuantity("1Gi"))}},
	}
}

func readyCluster(t *testing.T, ns, name string) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	took := waitFor(t, 3*time.Minute, "the cluster to be Ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) || c.Status.ReadyInstances != *c.Spec.Instances {
			return fmt.Errorf("phase %s, ready %d, conditions %v", c.Status.Phase, c.Status.ReadyInstances, c.Status.Conditions)
		}
		return nil
	})
	t.Logf("cluster %s/%s Ready after %s", ns, name, took.Round(10*time.Millisecond))
	rememberCredentials(t, ns, name)
	return c
}

// readyPair creates a 2-instance cluster and waits until it is Ready with name-0 as its
// primary, which it returns with the cluster.
func readyPair(t *testing.T, ns, name string) (*mysqlv1beta1.MySQLCluster, string) {
	t.Helper()
	c := newCluster(ns, name, mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Instances = new(int32(2))
	require.NoError(t, k8s.Create(context.Background(), c))
	readyCluster(t, ns, name)
	return c, waitPrimary(t, ns, name, name+"-0").Status.CurrentPrimary
}

// TestAThreeInstanceClusterBecomesReady brings a cluster with the exporter up, checks what
// it runs and what the operator's metrics and a Prometheus scraping it and the exporters
// say of it, kills a replica's mysqld, breaks another's replication (the shipped alerts
// go pending), and deletes it under DeletionPolicy Retain (its series go with it).
func TestAThreeInstanceClusterBecomesReady(t *testing.T) {
	ground.Level(t, ground.Core)
	ns := namespace(t)
	metrics := newScraper(t)
	prom := startPrometheus(t, metrics)
	db := newCluster(ns, "db", mysqlv1beta1.DeletionPolicyDelete)
	db.Spec.Monitoring.Exporter.Enabled = true
	db.Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop",
		PreviousPasswordRetention: &metav1.Duration{Duration: 20 * time.Second}}
	require.NoError(t, k8s.Create(context.Background(), db))
	// The create's answer is the object as admitted, before any reconcile could patch it.
	require.Contains(t, db.Finalizers, mysqlv1beta1.ClusterFinalizer, "the mutating webhook sets the finalizer on create")
	c := readyCluster(t, ns, "db")
	require.Equal(t, mysqlv1beta1.PhaseReady, c.Status.Phase)
	require.Equal(t, c.Generation, c.Status.ObservedGeneration)
	require.Equal(t, "db-primary."+ns+".svc:3306", c.Status.Endpoints.Primary)
	require.Equal(t, "db-0", c.Status.CurrentPrimary, "the first election picks the lowest index among equals")
	require.True(t, meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy))
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(resources.SelectorLabels(c))))
	require.Len(t, pods.Items, 3)
	nodes := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		nodes[pod.Spec.NodeName] = true
		requireRealPod(t, c, pod)
	}
	require.Len(t, nodes, 3, "the operator's anti-affinity spreads the instances over the nodes")
	requireClusterMetrics(t, metrics, ns, c.Name)
	requirePrometheusSees(t, prom, ns, c.Name)
	requireApplicationAccount(t, ns)
	requireApplicationPasswordRotation(t, ns)
	requireDashboardQueries(t, prom, ns, c.Name)
	// Healthy: a replica's seconds behind its source is a number (NULL, so absent, once a
	// replication thread stops).
	captureExporterFixture(t, prom, "mysqld-exporter", ns, c.Name, "db-0", "db-1")
	requireKilledMysqldRejoins(t, c, "db-2")
	requireBrokenReplicationAlerts(t, prom, c, "db-1")
	captureOperatorFixture(t, metrics, "operator-cluster", ns)
	requireRetainedOnDeletion(t, c)
	requireNoClusterSeries(t, metrics, ns, c.Name)
	requirePrometheusForgets(t, prom, ns, c.Name)
}

// requireApplicationAccount connects as spec.application's account with its Secret alone
// (through the primary Service), writes to its database and is refused the others; the
// exporter's account, whose replication metrics Prometheus has just read, is refused the
// application's table and does not see its database; so is the operator's admin account;
// root over TCP from another pod is refused.
func requireApplicationAccount(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	app, _ := applicationDB(t, ns, "the application account to connect")
	s := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-app"}, s))
	rememberSecret(string(s.Data[resources.KeyAppPassword]), ns+"/db application password")
	_, err := app.Exec("CREATE TABLE orders (id INT PRIMARY KEY, card VARCHAR(20))")
	require.NoError(t, err)
	_, err = app.Exec("INSERT INTO orders VALUES (1, 'x')")
	require.NoError(t, err)
	var n int
	require.ErrorContains(t, app.QueryRow("SELECT COUNT(*) FROM mysql.user").Scan(&n), "Error 1142", "nothing beyond its database")

	d, err := g.AccountDB(ctx, ns, "db", "db-0", resources.ExporterUser, resources.KeyExporterPassword)
	require.NoError(t, err)
	defer func() { _ = d.Close() }()
	require.Equal(t, []string{"Uptime"}, column(t, d, "SELECT VARIABLE_NAME FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'"),
		"the exporter's account reads performance_schema")
	err = d.QueryRow("SELECT COUNT(*) FROM shop.orders").Scan(&n)
	require.ErrorContains(t, err, "Error 1142 (42000): SELECT command denied to user 'dolphin-exporter'")
	require.NotContains(t, column(t, d, "SHOW DATABASES"), "shop")

	// Nor does the operator's own account read it; and root, from another pod over TCP, is
	// refused: it connects over the local socket only.
	admin, err := g.AccountDB(ctx, ns, "db", "db-0", resources.AdminUser, resources.KeyAdminPassword)
	require.NoError(t, err)
	defer func() { _ = admin.Close() }()
	require.ErrorContains(t, admin.QueryRow("SELECT COUNT(*) FROM shop.orders").Scan(&n), "Error 1142 (42000): SELECT command denied")
	other := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-1"}, other))
	out, err := g.Exec(ctx, other, resources.ContainerMySQL, "sh", "-c", `MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql --no-defaults `+
		`-h `+ground.InstanceHost(ns, "db", "db-0")+` -P 3306 -uroot --connect-timeout=5 -N -e "SELECT 1"`)
	require.ErrorContains(t, err, "ERROR 1045 (28000): Access denied for user 'root'", "output: %s", out)
}

// requireApplicationPasswordRotation rotates the application account's password under
// writes, with kubectl dolphin rotate-password: a writer on connections made with the old password, then on new ones made with
// the new password (once it logs in), fails no write; new connections with the old one are
// accepted until the previous password's retention (20 s here) ends, and refused after.
func requireApplicationPasswordRotation(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	secret := func() *corev1.Secret {
		s := &corev1.Secret{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-app"}, s))
		return s
	}
	old := string(secret().Data[resources.KeyAppPassword])
	oldDB, err := g.ApplicationDB(ctx, ns, "db")
	require.NoError(t, err)
	defer func() { _ = oldDB.Close() }()
	var mu sync.Mutex
	current, writes, failed := oldDB, 0, []string{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := 1000; ; id++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			mu.Lock()
			d := current
			mu.Unlock()
			_, err := d.Exec("INSERT INTO orders VALUES (?, 'w')", id)
			mu.Lock()
			writes++
			if err != nil {
				failed = append(failed, err.Error())
			}
			mu.Unlock()
		}
	}()

	code, out, errOut := plugin(t, "-n", ns, "rotate-password", "db")
	t.Logf("rotate-password:\n%s%s", out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "The operator reports: Account shop has every privilege on database shop")
	var rotated *corev1.Secret
	waitFor(t, time.Minute, "a new password in db-app", func() error {
		if rotated = secret(); string(rotated.Data[resources.KeyAppPassword]) == old {
			return fmt.Errorf("not rotated yet")
		}
		return nil
	})
	require.Equal(t, old, string(rotated.Data[resources.KeyAppPreviousPassword]))
	rememberSecret(string(rotated.Data[resources.KeyAppPassword]), ns+"/db rotated application password")
	newDB, took := applicationDB(t, ns, "the new password to log in")
	mu.Lock()
	current = newDB
	mu.Unlock()
	t.Logf("the new password logs in %s after the Secret changed", took.Round(10*time.Millisecond))
	oldLogin := func() error { return connectWith(t, ns, old).PingContext(ctx) }
	require.NoError(t, oldLogin(), "the previous password is accepted during its retention")
	time.Sleep(2 * time.Second)

	waitFor(t, time.Minute, "the previous password to be refused once its retention ends", func() error {
		if err := oldLogin(); err == nil || !strings.Contains(err.Error(), "Error 1045") {
			return fmt.Errorf("old password: %w", err)
		}
		return nil
	})
	require.NotContains(t, secret().Data, resources.KeyAppPreviousPassword)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, failed, "writes failed across the rotation")
	require.Greater(t, writes, 50)
	t.Logf("%d writes across the rotation, none failed", writes)
}

// applicationDB waits (a minute at most) until the application account logs in with what
// its Secret says now, and returns the connection and how long that took.
func applicationDB(t *testing.T, ns, what string) (*sql.DB, time.Duration) {
	t.Helper()
	var d *sql.DB
	took := waitFor(t, time.Minute, what, func() error {
		var err error
		if d, err = g.ApplicationDB(context.Background(), ns, "db"); err != nil {
			return err
		}
		if err := d.PingContext(context.Background()); err != nil {
			_ = d.Close()
			return err
		}
		return nil
	})
	t.Cleanup(func() { _ = d.Close() })
	return d, took
}

// connectWith connects as the application account with another password than its Secret's.
func connectWith(t *testing.T, ns, password string) *sql.DB {
	t.Helper()
	d, err := g.ApplicationDBWithPassword(context.Background(), ns, "db", password)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// requireBrokenReplicationAlerts has a client with SUPER write on a replica what its
// primary then writes too: the replica holds an errant transaction and its applier stops
// on the conflict, which the operator cannot mend. The shipped rules' alerts for both go
// pending (their for: clauses are longer than the test waits).
func requireBrokenReplicationAlerts(t *testing.T, p *ground.Prometheus, c *mysqlv1beta1.MySQLCluster, replica string) {
	t.Helper()
	errantWrite(t, dbOf(t, c.Namespace, replica), "conflict")
	_, err := dbOf(t, c.Namespace, c.Name+"-0").Exec("CREATE DATABASE conflict")
	require.NoError(t, err)
	took := requireAlerts(t, p, c.Namespace, c.Name, replica, "DolphinErrantTransactions", "DolphinMySQLReplicationStopped")
	t.Logf("the errant and replication alerts for %s are active %s after the conflicting write", replica, took.Round(10*time.Millisecond))
}

// requireDeletionRemovesEverything deletes a cluster whose policy is Delete and waits for
// it and every child to be gone. It ends the life of a cluster another test brought up:
// a cluster of its own would cost a bring-up for a check that needs none.
func requireDeletionRemovesEverything(t *testing.T, c *mysqlv1beta1.MySQLCluster) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, mysqlv1beta1.DeletionPolicyDelete, c.Spec.DeletionPolicy)
	require.NoError(t, k8s.Delete(ctx, c))
	took := waitFor(t, time.Minute, "the cluster and every child to be gone", func() error {
		return remaining(ctx, c.Namespace, nil)
	})
	t.Logf("cluster and children gone %s after the delete", took.Round(10*time.Millisecond))
}

// requireRetainedOnDeletion switches a Ready cluster's policy to Retain, as a user keeping
// the data of a cluster they are about to delete does, deletes it, and checks that every
// instance's volume and the passwords stay while everything else goes.
func requireRetainedOnDeletion(t *testing.T, c *mysqlv1beta1.MySQLCluster) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.DeletionPolicy = mysqlv1beta1.DeletionPolicyRetain
	require.NoError(t, k8s.Patch(ctx, c, patch))
	require.NoError(t, k8s.Delete(ctx, c))
	waitFor(t, time.Minute, "everything but volumes and secrets to be gone", func() error {
		return remaining(ctx, c.Namespace, map[string]bool{"PersistentVolumeClaim": true, "Secret": true})
	})
	claims := &corev1.PersistentVolumeClaimList{}
	require.NoError(t, k8s.List(ctx, claims, client.InNamespace(c.Namespace)))
	require.Len(t, claims.Items, int(*c.Spec.Instances), "every instance's volume is kept")
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-credentials"}, secret),
		"the passwords are kept with the data they open")
	requireDeletionAudited(t, c.Namespace, c.Name)
}

// requireDeletionAudited finds the webhook's audit line of the cluster's deletion: once,
// allowed, with the user who deleted it.
func requireDeletionAudited(t *testing.T, ns, name string) {
	t.Helper()
	var found []auditLine
	for line := range strings.SplitSeq(g.FullOperatorLogs(context.Background()), "\n") {
		var a auditLine
		if strings.Contains(line, `"admission-audit"`) && json.Unmarshal([]byte(line), &a) == nil &&
			a.Namespace == ns && a.Name == name && a.Operation == "DELETE" {
			found = append(found, a)
		}
	}
	require.Len(t, found, 1, "one audit line of the deletion")
	require.True(t, found[0].Allowed)
	require.Equal(t, "MySQLCluster", found[0].Kind)
	require.NotEmpty(t, found[0].User)
	require.Empty(t, found[0].Changed)
	t.Logf("deletion audited: %+v", found[0])
}

// remaining returns an error naming what of a deleted cluster still exists, apart from
// the kinds in keep.
func remaining(ctx context.Context, ns string, keep map[string]bool) error {
	var left []string
	lists := map[string]client.ObjectList{
		"MySQLCluster": &mysqlv1beta1.MySQLClusterList{}, "StatefulSet": &appsv1.StatefulSetList{},
		"Pod": &corev1.PodList{}, "Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{},
		"Secret": &corev1.SecretList{}, "PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{},
	}
	for kind, list := range lists {
		if keep[kind] {
			continue
		}
		if err := k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{resources.LabelInstance}); err != nil {
			return err
		}
		if kind == "MySQLCluster" {
			if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
		}
		if n := meta.LenList(list); n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, kind))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still there: %v", left)
	}
	return nil
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
