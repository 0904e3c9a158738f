package sql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// The operator's accounts, made as an instance's init container makes them (AccountsSQL):
// the tier's operations run as the operator's narrowed admin account, replication and
// clone donors are reached as its replication account. All share one password here.
const (
	replUser, replPassword = resources.ReplicationUser, "Accounts-password1"
	adminUser              = resources.AdminUser
	// applicationDatabase is the tier's spec.application.database.
	applicationDatabase = "shop"
)

// cluster starts n servers, opens the SQL layer on each and creates the replication
// account on every one of them without logging it, as the operator does when it
// initialises an instance: the account must exist before semi-sync is on (a primary
// waiting for an acknowledgement could otherwise never let replicas log in), and it must
// not be a transaction that some instances lack.
func cluster(t *testing.T, n int) ([]*mysqld.Instance, []mysql.Instance) {
	t.Helper()
	servers := mysqld.StartN(t, n)
	out := make([]mysql.Instance, n)
	for k, s := range servers {
		out[k] = withReplicationAccount(t, s)
	}
	return servers, out
}

// withReplicationAccount creates the operator's accounts on s without logging them (for a
// cluster whose spec.application names applicationDatabase), and
// opens the SQL layer on s as the operator's admin account.
func withReplicationAccount(t *testing.T, s *mysqld.Instance) mysql.Instance {
	t.Helper()
	require.NoError(t, s.CreateOperatorAccounts(context.Background(), replPassword, applicationDatabase))
	in, err := mysql.Open(mysql.Config{Addr: s.Addr(), User: adminUser, Password: replPassword})
	require.NoError(t, err)
	t.Cleanup(func() { in.Close() })
	st, err := in.Status(context.Background())
	require.NoError(t, err)
	require.Empty(t, st.GTIDExecuted, "unlogged statements leave no GTID")
	return in
}

// asRoot opens the SQL layer on s as root, for what a test does beside the operator
// (its data); closed at the test's end.
func asRoot(t *testing.T, s *mysqld.Instance) mysql.Instance {
	t.Helper()
	in, err := mysql.Open(mysql.Config{Addr: s.Addr(), User: "root", Password: mysqld.RootPassword})
	require.NoError(t, err)
	t.Cleanup(func() { in.Close() })
	return in
}

// testContext bounds a test: a statement that blocks (a semi-sync commit without
// replicas) fails it instead of hanging.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func replicaOf(s *mysqld.Instance) mysql.ReplicaOptions {
	return mysql.ReplicaOptions{SourceHost: "127.0.0.1", SourcePort: s.Port(), User: replUser, Password: replPassword, SemiSync: true}
}

// semiSyncClients waits until the primary has n semi-sync replicas connected; a failure
// shows what each replica reports.
func semiSyncClients(t *testing.T, ctx context.Context, primary mysql.Instance, n int, replicas ...mysql.Instance) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d semi-sync replicas", n), func() error {
		st, err := primary.Status(ctx)
		if err != nil {
			return err
		}
		if !st.SemiSyncSource || st.SemiSyncSourceClients != n {
			msg := fmt.Sprintf("semi-sync source %v with %d clients", st.SemiSyncSource, st.SemiSyncSourceClients)
			for _, r := range replicas {
				if rs, err := r.Status(ctx); err == nil && rs.Replica != nil {
					msg += fmt.Sprintf("; replica io=%v sql=%v semi-sync=%v io-error=%q", rs.Replica.IORunning,
						rs.Replica.SQLRunning, rs.SemiSyncReplica, rs.Replica.LastIOError)
				}
			}
			return fmt.Errorf("%s", msg)
		}
		return nil
	})
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

func TestAPrimaryAndTwoSemiSyncReplicas(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 3)
	// The primary first: a replica that connects before its source has semi-sync on
	// replicates asynchronously until its IO thread restarts.
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{SemiSync: true, WaitForReplicaCount: 1, Timeout: time.Hour}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	require.NoError(t, in[2].ConfigureReplica(ctx, replicaOf(servers[0])))

	semiSyncClients(t, ctx, in[0], 2, in[1], in[2])
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE app"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE TABLE app.t (id INT PRIMARY KEY)"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "INSERT INTO app.t VALUES (1)"))
	primary, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, primary.GTIDExecuted, "the writes were logged with GTIDs")
	require.False(t, primary.SuperReadOnly || primary.ReadOnly, "the primary is writable")
	require.Nil(t, primary.Replica, "the primary replicates from nobody")
	for _, r := range in[1:] {
		require.NoError(t, r.WaitForGTID(ctx, primary.GTIDExecuted, 30*time.Second))
		st, err := r.Status(ctx)
		require.NoError(t, err)
		require.True(t, st.SuperReadOnly, "a replica is fenced")
		require.True(t, st.SemiSyncReplica)
		require.NotNil(t, st.Replica)
		require.True(t, st.Replica.IORunning && st.Replica.SQLRunning, "%+v", st.Replica)
		require.Equal(t, servers[0].Port(), st.Replica.SourcePort)
		require.Equal(t, primary.GTIDExecuted, st.GTIDExecuted)
		require.Empty(t, st.Replica.LastIOError+st.Replica.LastSQLError)
	}
	// Idempotent: configuring again changes nothing and breaks nothing.
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{SemiSync: true, WaitForReplicaCount: 1, Timeout: time.Hour}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	require.Error(t, asRoot(t, servers[1]).Exec(ctx, "INSERT INTO app.t VALUES (2)"), "a fenced replica refuses writes, even from root")
}

func TestErrantTransactionsAreFoundWithGTIDSubtract(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE app"))
	p, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, p.GTIDExecuted)
	require.NoError(t, in[1].WaitForGTID(ctx, p.GTIDExecuted, 30*time.Second))

	// Someone writes on the replica behind the operator's back.
	require.NoError(t, in[1].SetSuperReadOnly(ctx, false))
	require.NoError(t, asRoot(t, servers[1]).Exec(ctx, "CREATE DATABASE errant"))
	r, err := in[1].Status(ctx)
	require.NoError(t, err)
	errant, err := in[1].GTIDSubtract(ctx, r.GTIDExecuted, p.GTIDExecuted)
	require.NoError(t, err)
	t.Logf("replica %s executed %q, primary %q, errant %q", r.ServerUUID, r.GTIDExecuted, p.GTIDExecuted, errant)
	require.Contains(t, errant, r.ServerUUID+":1", "the replica's own transaction is errant")
	none, err := in[0].GTIDSubtract(ctx, p.GTIDExecuted, r.GTIDExecuted)
	require.NoError(t, err)
	require.Empty(t, none, "the primary has nothing the replica lacks")
}

func TestCloneSeedsAnEmptyInstance(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE app"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "INSERT INTO app.t VALUES (1, 'cloned'), (2, 'too')"))
	donor, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, donor.GTIDExecuted)
	before := servers[1].Starts()

	o := mysql.CloneOptions{DonorHost: "127.0.0.1", DonorPort: servers[0].Port(), User: replUser, Password: replPassword}
	require.NoError(t, in[1].PrepareClone(ctx, o))
	require.NoError(t, in[1].Clone(ctx, o), "the connection dropping as mysqld restarts counts as the clone's end")
	var st *mysql.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = in[1].Status(ctx)
		return err == nil && servers[1].Starts() > before
	}, 60*time.Second, 200*time.Millisecond, "mysqld restarts to finish the clone and answers again")
	require.NotNil(t, st.Clone, "the recipient reports its clone")
	require.Equal(t, mysql.CloneCompleted, st.Clone.State, "%+v", st.Clone)
	require.Equal(t, donor.GTIDExecuted, st.GTIDExecuted, "the clone carries the donor's GTID set")
	require.NotEqual(t, donor.ServerUUID, st.ServerUUID, "the clone keeps its own identity")

	// The clone then replicates from where the copy ended.
	require.NoError(t, in[1].ConfigureReplica(ctx, mysql.ReplicaOptions{SourceHost: "127.0.0.1", SourcePort: servers[0].Port(),
		User: replUser, Password: replPassword}))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "INSERT INTO app.t VALUES (3, 'after')"))
	after, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, after.GTIDExecuted, 30*time.Second))
}

func TestKillConnectionsEndsClientSessionsButNotReplication(t *testing.T) {
	ctx := testContext(t)
	_, in, client := losslessPair(t, ctx)
	require.NoError(t, client.Exec(ctx, "SELECT 1"))

	require.NoError(t, in[0].SetSuperReadOnly(ctx, true))
	require.NoError(t, in[0].KillConnections(ctx, adminUser, replUser))
	semiSyncClients(t, ctx, in[0], 1, in[1]) // the replica's session survived the kill
	err := client.Exec(ctx, "CREATE DATABASE nope")
	require.Error(t, err, "a fenced primary refuses the client's writes")
}

func TestWaitForGTIDTimesOut(t *testing.T) {
	ctx := testContext(t)
	_, in := cluster(t, 1)
	err := in[0].WaitForGTID(ctx, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", time.Second)
	require.ErrorIs(t, err, mysql.ErrWaitTimeout)
}

// A primary whose replicas stopped acknowledging holds each commit in semi-sync's wait,
// and SET GLOBAL super_read_only waits for those commits; killing the waiting session does
// not end the wait. Fence still takes effect, and the waiting client is never told its
// commit succeeded.
func TestFencingAPrimaryWhoseCommitsWaitForAnAcknowledgement(t *testing.T) {
	t.Parallel() // most of it waits for the primary to see its replica go (stuckCommit)
	ctx := testContext(t)
	servers, in, client := losslessPair(t, ctx)
	committed := stuckCommit(t, ctx, servers[0], in, client)

	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, in[0].Fence(fctx, adminUser, replUser), "the fence takes effect with a commit waiting")
	select {
	case err := <-committed:
		require.Error(t, err, "the killed session's client is not told its commit succeeded")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting commit's client was not cut off")
	}
	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.True(t, st.SuperReadOnly, "fenced")
	require.Error(t, client.Exec(ctx, "INSERT INTO app.t VALUES (2)"), "nothing more commits")
}

// appClient creates an application account (no SUPER: read-only applies to it) on the
// primary and connects as it; the connection is closed at the test's end.
func appClient(t *testing.T, ctx context.Context, server *mysqld.Instance) mysql.Instance {
	t.Helper()
	root := asRoot(t, server)
	require.NoError(t, root.Exec(ctx, "CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw'"))
	require.NoError(t, root.Exec(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON *.* TO 'app'@'%'"))
	client, err := mysql.Open(mysql.Config{Addr: server.Addr(), User: "app", Password: "app-pw"})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return client
}

// losslessPair is a lossless semi-sync primary with one replica connected, and a client of
// the primary with an application account.
func losslessPair(t *testing.T, ctx context.Context) ([]*mysqld.Instance, []mysql.Instance, mysql.Instance) {
	t.Helper()
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{SemiSync: true, WaitForReplicaCount: 1, Timeout: time.Hour}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	// A lossless primary commits only once a replica acknowledges: wait for it to be there.
	semiSyncClients(t, ctx, in[0], 1, in[1])
	return servers, in, appClient(t, ctx, servers[0])
}

// A hazard, shown here so that nothing in Dolphin relies on the opposite: when mysqld is
// shut down (SIGTERM) while a commit waits for a semi-sync acknowledgement, the client is
// told the commit succeeded although no replica has it. This is why the mysqld container
// fences mysqld before it passes the kubelet's SIGTERM on (internal/resources/stop.go; the
// e2e test TestStoppingAPrimaryAcknowledgesNoWaitingCommit checks it on real pods).
func TestShutdownAcknowledgesACommitNoReplicaHas(t *testing.T) {
	t.Parallel() // most of it waits for the primary to see its replica go (stuckCommit)
	ctx := testContext(t)
	servers, in, client := losslessPair(t, ctx)
	committed := stuckCommit(t, ctx, servers[0], in, client)
	servers[0].SetRestartPolicy(mysqld.RestartNever)
	go servers[0].Stop()
	select {
	case err := <-committed:
		require.NoError(t, err, "MySQL's shutdown answers the waiting client; if this changes, the hazard is gone")
	case <-time.After(90 * time.Second):
		t.Fatal("the waiting commit did not end with the shutdown")
	}
}

// stuckCommit stops the replica's receiver, so that nothing is acknowledged any more, and
// has the client commit a row; it returns once that commit waits for an acknowledgement,
// with the channel its outcome arrives on.
func stuckCommit(t *testing.T, ctx context.Context, primary *mysqld.Instance, in []mysql.Instance, client mysql.Instance) <-chan error {
	t.Helper()
	require.NoError(t, asRoot(t, primary).Exec(ctx, "CREATE DATABASE app"))
	require.NoError(t, asRoot(t, primary).Exec(ctx, "CREATE TABLE app.t (id INT PRIMARY KEY)"))
	require.NoError(t, in[1].StopReplication(ctx, false)) // no acknowledgement from now on
	semiSyncClients(t, ctx, in[0], 0, in[1])
	root, err := primary.DB()
	require.NoError(t, err)
	defer root.Close()
	committed := make(chan error, 1)
	go func() { committed <- client.Exec(ctx, "INSERT INTO app.t VALUES (1)") }()
	eventually(t, "the commit waiting for an acknowledgement", func() error {
		var n int
		if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'app' AND STATE LIKE '%semi-sync%'").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d sessions waiting", n)
		}
		return nil
	})
	return committed
}
