package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/workload"
)

func primaryEndpoint(ctx context.Context, ns, cluster string) string {
	return workload.PrimaryEndpoint(ctx, k8s, ns, cluster)
}

func waitPrimary(t *testing.T, ns, name, want string) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	took := waitFor(t, 2*time.Minute, want+" as primary, healthy, behind the primary Service", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if c.Status.CurrentPrimary != want || !meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy) {
			return fmt.Errorf("primary %q, conditions %v", c.Status.CurrentPrimary, c.Status.Conditions)
		}
		if ep := primaryEndpoint(context.Background(), ns, name); ep != want {
			return fmt.Errorf("primary Service routes to %q", ep)
		}
		return nil
	})
	t.Logf("%s is primary after %s", want, took.Round(10*time.Millisecond))
	return c
}

// requireTopology checks every instance over SQL: the primary writable and semi-sync, the
// others fenced and replicating from it with both threads running.
func requireTopology(t *testing.T, ns, primary string, names ...string) {
	t.Helper()
	cluster := primary[:strings.LastIndex(primary, "-")]
	primaryHost := ground.InstanceHost(ns, cluster, primary)
	pod := &corev1.Pod{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: primary}, pod))
	require.Equal(t, string(resources.RolePrimary), pod.Labels[resources.LabelRole])
	for _, n := range names {
		d := dbOf(t, ns, n)
		var ro, sro bool
		require.NoError(t, d.QueryRow("SELECT @@read_only, @@super_read_only").Scan(&ro, &sro))
		if n == primary {
			require.False(t, ro || sro, "%s (primary) is writable", n)
			var semi string
			require.NoError(t, d.QueryRow("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME='Rpl_semi_sync_source_status'").Scan(&semi))
			require.Equal(t, "ON", semi, "%s runs lossless semi-sync", n)
			var sessions, tlsSessions int
			require.NoError(t, d.QueryRow(`SELECT COUNT(*), COALESCE(SUM(CONNECTION_TYPE = 'SSL/TLS'), 0)
FROM performance_schema.threads WHERE PROCESSLIST_USER = 'dolphin-admin' AND TYPE = 'FOREGROUND'`).Scan(&sessions, &tlsSessions))
			require.Positive(t, sessions, "the operator has sessions on %s", n)
			require.Equal(t, sessions, tlsSessions, "the operator talks to %s over TLS only: %s", n, adminSessions(t, d))
			continue
		}
		require.True(t, sro, "%s (replica) is fenced with super_read_only", n)
		var host, io, sqlState, ssl, caFile, verify string
		require.NoError(t, d.QueryRow(`SELECT c.HOST, s.SERVICE_STATE, a.SERVICE_STATE, c.SSL_ALLOWED, c.SSL_CA_FILE, c.SSL_VERIFY_SERVER_CERTIFICATE
FROM performance_schema.replication_connection_configuration c
JOIN performance_schema.replication_connection_status s USING (CHANNEL_NAME)
JOIN performance_schema.replication_applier_status a USING (CHANNEL_NAME)`).Scan(&host, &io, &sqlState, &ssl, &caFile, &verify))
		require.Equal(t, "YES", ssl, "%s replicates over TLS", n)
		require.Equal(t, resources.TLSDir+"/"+resources.KeyCACert, caFile, "%s checks its source's certificate against the cluster's CA", n)
		require.Equal(t, "YES", verify, "%s checks its source's certificate names the host it dials", n)
		require.Equal(t, primaryHost, host, "%s replicates from %s by its DNS name", n, primary)
		require.Equal(t, "ON", io, n)
		require.Equal(t, "ON", sqlState, n)
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, pod))
		require.Equal(t, string(resources.RoleReplica), pod.Labels[resources.LabelRole], n)
	}
}

// requireNoLostWrites checks every acknowledged write is on the given instance. It dials
// the pod's IP, not its name: right after a node loss, lookups sent to a DNS replica on
// that node fail until the node is marked NotReady, and the check must not depend on
// that. A read that fails (a connection cut by the failover) is retried for a bounded time.
func requireNoLostWrites(t *testing.T, ns, pod string, acks []workload.Ack) {
	t.Helper()
	var lost []int
	waitFor(t, 30*time.Second, "the acknowledged writes to be read from "+pod, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := g.DB(ctx, ns, clusterOf(pod), pod)
		if err != nil {
			return err
		}
		defer d.Close()
		lost, err = workload.Lost(ctx, d, acks)
		return err
	})
	t.Logf("%d acknowledged writes, %d present on %s, lost: %v", len(acks), len(acks)-len(lost), pod, lost)
	require.Empty(t, lost, "every acknowledged write survives")
}

// sampler counts, every 50 ms, the instances that would accept a write.
type sampler struct{ *workload.Sampler }

func startSampler(t *testing.T, ns string, names ...string) sampler {
	t.Helper()
	dbs := map[string]*sql.DB{}
	for _, n := range names {
		d := dbOf(t, ns, n)
		d.SetConnMaxLifetime(time.Second)
		dbs[n] = d
	}
	return sampler{workload.StartSampler(dbs)}
}

func (s sampler) finish(t *testing.T) {
	r := s.Stop()
	t.Logf("%d samples, at most %d writable instance(s) at once", r.Samples, r.MaxWritable)
	require.LessOrEqual(t, r.MaxWritable, 1, "never two writable instances (first seen: %s)", r.FirstOffence)
}

// TestSwitchoverAndNodeLossLoseNoAcknowledgedWrite switches over by spec.primary to an
// instance on a node the operator does not run on, then stops that node (kubelet,
// containerd and every container on it; its addresses stop answering): the operator must
// fail over with no acknowledged write lost. When the node comes back, its instance
// rejoins and, as spec.primary still names it, becomes primary again. (Losing the
// operator's own node as well is another scenario: its pod is replaced only once
// Kubernetes evicts it from the unreachable node.)
func TestSwitchoverAndNodeLossLoseNoAcknowledgedWrite(t *testing.T) {
	ground.Level(t, ground.Core)
	ctx := context.Background()
	ns := namespace(t)
	names := []string{"ha-0", "ha-1", "ha-2"}
	c := newCluster(ns, "ha", mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 2 * time.Second}
	require.NoError(t, k8s.Create(ctx, c))
	readyCluster(t, ns, "ha")
	waitPrimary(t, ns, "ha", "ha-0")
	requireTopology(t, ns, "ha-0", names...)

	w, err := workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, ns, "ha", ground.ServiceHost(ns, "ha-primary"))
	})
	require.NoError(t, err)
	s := startSampler(t, ns, names...)
	time.Sleep(time.Second)

	// Planned switchover: spec.primary, to an instance away from the operator.
	target := awayFromOperator(t, ns, "ha-1", "ha-2")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	c.Spec.Primary = target
	require.NoError(t, k8s.Update(ctx, c))
	waitPrimary(t, ns, "ha", target)
	time.Sleep(time.Second)
	requireTopology(t, ns, target, names...)

	// Failover: the primary's node is lost.
	pod := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: target}, pod))
	node, err := g.NodeOf(pod)
	require.NoError(t, err)
	require.NoError(t, node.Stop())
	lostAt := time.Now()
	restarted := false
	t.Cleanup(func() { // so that a failure here leaves the next test all its nodes
		if !restarted {
			require.NoError(t, g.RestartNode(context.Background(), node))
		}
	})
	c2 := &mysqlv1beta1.MySQLCluster{}
	waitFor(t, 2*time.Minute, "a failover away from "+target, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c2); err != nil {
			return err
		}
		if p := c2.Status.CurrentPrimary; p == "" || p == target {
			return fmt.Errorf("primary %q", p)
		}
		if ep := primaryEndpoint(context.Background(), ns, "ha"); ep == "" || ep == target {
			return fmt.Errorf("primary Service routes to %q", ep)
		}
		return nil
	})
	newPrimary := c2.Status.CurrentPrimary
	resumed, err := w.AckedAfter(ctx, lostAt)
	require.NoError(t, err)
	t.Logf("node %s lost: %s primary behind the Service %s after, writes acknowledged again %s after",
		node.Name, newPrimary, time.Since(lostAt).Round(10*time.Millisecond), resumed.Sub(lostAt).Round(10*time.Millisecond))
	time.Sleep(time.Second)
	requireNoLostWrites(t, ns, newPrimary, w.Acks())

	// The node comes back: the old primary rejoins (re-cloned if it holds a transaction
	// nobody acknowledged) and, as spec.primary still names it, becomes primary again.
	require.NoError(t, g.RestartNode(ctx, node))
	restarted = true
	waitPrimary(t, ns, "ha", target)
	time.Sleep(time.Second)
	acked := w.Stop()
	s.finish(t)
	require.NotEmpty(t, acked)
	requireTopology(t, ns, target, names...)
	requireNoLostWrites(t, ns, target, acked)
}

// awayFromOperator returns the first of the pods that runs on another node than the
// operator's pod.
func awayFromOperator(t *testing.T, ns string, pods ...string) string {
	t.Helper()
	ops := &corev1.PodList{}
	require.NoError(t, k8s.List(context.Background(), ops, client.InNamespace(ground.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	require.Len(t, ops.Items, 1)
	for _, name := range pods {
		pod := &corev1.Pod{}
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod))
		if pod.Spec.NodeName != ops.Items[0].Spec.NodeName {
			return name
		}
	}
	t.Fatalf("%v all run on the operator's node %s", pods, ops.Items[0].Spec.NodeName)
	return ""
}

func TestErrantReplicaIsIsolatedAndReclonedOnlyWhenAllowed(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	names := []string{"er-0", "er-1", "er-2"}
	c := newCluster(ns, "er", mysqlv1beta1.DeletionPolicyDelete)
	require.NoError(t, k8s.Create(ctx, c))
	readyCluster(t, ns, "er")
	waitPrimary(t, ns, "er", "er-0")
	primaryDB := dbOf(t, ns, "er-0")
	_, err := primaryDB.Exec("CREATE DATABASE kept")
	require.NoError(t, err)

	// A client with SUPER writes on a replica: a transaction the primary never had.
	rogue := dbOf(t, ns, "er-2")
	errantWrite(t, rogue, "rogue")

	cl := &mysqlv1beta1.MySQLCluster{}
	waitFor(t, time.Minute, "er-2 to be reported errant and kept out of service", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cl); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(cl.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != mysqlv1beta1.ReasonErrantTransactions {
			return fmt.Errorf("ReplicationHealthy %v", cond)
		}
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "er-2"}, pod); err != nil {
			return err
		}
		if pod.Labels[resources.LabelRole] != "none" {
			return fmt.Errorf("er-2 role %q", pod.Labels[resources.LabelRole])
		}
		return nil
	})
	var sro bool
	require.NoError(t, rogue.QueryRow("SELECT @@super_read_only").Scan(&sro))
	require.True(t, sro, "the errant replica is fenced again")
	require.Equal(t, "er-0", cl.Status.CurrentPrimary, "the primary keeps serving")

	// The user allows the re-clone: er-2's data is replaced by the primary's.
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), cl))
	if cl.Annotations == nil {
		cl.Annotations = map[string]string{}
	}
	cl.Annotations["mysql.dolphin-operator.io/reclone"] = "er-2"
	require.NoError(t, k8s.Update(ctx, cl))
	waitPrimary(t, ns, "er", "er-0")
	requireTopology(t, ns, "er-0", names...)
	recloned := dbOf(t, ns, "er-2")
	dbs := column(t, recloned, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('kept', 'rogue')")
	require.Equal(t, []string{"kept"}, dbs, "the clone brought the primary's data and dropped the errant write")
	requireDeletionRemovesEverything(t, c)
}

// errantWrite has a client with SUPER lift a replica's fence and create a database on it:
// a transaction its primary never had.
func errantWrite(t *testing.T, d *sql.DB, database string) {
	t.Helper()
	conn, err := d.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	for _, stmt := range []string{"SET GLOBAL super_read_only = OFF", "CREATE DATABASE " + database} {
		_, err = conn.ExecContext(context.Background(), stmt)
		require.NoError(t, err)
	}
}

func adminSessions(t *testing.T, d *sql.DB) string {
	t.Helper()
	rows, err := d.Query(`SELECT THREAD_ID, TYPE, COALESCE(CONNECTION_TYPE, ''), COALESCE(PROCESSLIST_HOST, ''), COALESCE(PROCESSLIST_COMMAND, ''), COALESCE(PROCESSLIST_INFO, '')
FROM performance_schema.threads WHERE PROCESSLIST_USER = 'dolphin-admin'`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, typ, conn, host, cmd, info string
		require.NoError(t, rows.Scan(&id, &typ, &conn, &host, &cmd, &info))
		out = append(out, fmt.Sprintf("[%s %s %s %s %s %q]", id, typ, conn, host, cmd, info))
	}
	return fmt.Sprint(out)
}
