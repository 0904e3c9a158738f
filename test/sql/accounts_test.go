package sql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// connectAs opens a client session as an account on addr, for what an application would do.
func connectAs(t *testing.T, addr, user, password, database string) *sql.DB {
	t.Helper()
	return dial(t, "tcp", addr, user, password, database)
}

// dial opens a client session over network ("tcp", "unix") to addr.
func dial(t *testing.T, network, addr, user, password, database string) *sql.DB {
	t.Helper()
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = network, addr, user, password, database
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	conn, err := gomysql.NewConnector(cfg)
	require.NoError(t, err)
	d := sql.OpenDB(conn)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestTheApplicationAccountReachesItsDatabaseOnlyAndReplicates(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{SemiSync: true, WaitForReplicaCount: 1, Timeout: time.Hour}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	semiSyncClients(t, ctx, in[0], 1, in[1])
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE other"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE TABLE other.secrets (id INT PRIMARY KEY)"))

	o := mysql.AccountOptions{Database: "shop", User: "web", Password: "firstPassword1"}
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o))
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o), "idempotent")
	app := connectAs(t, servers[0].Addr(), "web", "firstPassword1", "shop")
	_, err := app.ExecContext(ctx, "CREATE TABLE orders (id INT PRIMARY KEY)")
	require.NoError(t, err)
	_, err = app.ExecContext(ctx, "INSERT INTO orders VALUES (1)")
	require.NoError(t, err)
	var n int
	require.ErrorContains(t, app.QueryRowContext(ctx, "SELECT COUNT(*) FROM other.secrets").Scan(&n), "Error 1142")
	_, err = app.ExecContext(ctx, "CREATE DATABASE mine")
	require.ErrorContains(t, err, "Error 1044", "no privilege beyond its database")

	// Binary-logged: the replica has the account and the data.
	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	require.NoError(t, connectAs(t, servers[1].Addr(), "web", "firstPassword1", "shop").QueryRowContext(ctx,
		"SELECT COUNT(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)

	// A new password replaces the old one; the data stays.
	o.Password = "secondPassword2"
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o))
	require.ErrorContains(t, connectAs(t, servers[0].Addr(), "web", "firstPassword1", "shop").PingContext(ctx), "Error 1045")
	require.NoError(t, connectAs(t, servers[0].Addr(), "web", "secondPassword2", "shop").QueryRowContext(ctx,
		"SELECT COUNT(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)

	// A rotation: the new password becomes the account's, the previous one stays accepted
	// (MySQL's dual passwords), also when the same rotation is applied again; then the
	// previous one is discarded.
	o.Password, o.Previous = "thirdPassword3", "secondPassword2"
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o))
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o), "applied again, the previous password must survive")
	for _, pw := range []string{"secondPassword2", "thirdPassword3"} {
		require.NoError(t, connectAs(t, servers[0].Addr(), "web", pw, "shop").PingContext(ctx), pw)
	}
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	require.NoError(t, connectAs(t, servers[1].Addr(), "web", "secondPassword2", "shop").PingContext(ctx), "the replica too")
	o.Previous = ""
	require.NoError(t, usersOf(t, servers[0]).EnsureAccount(ctx, o))
	require.ErrorContains(t, connectAs(t, servers[0].Addr(), "web", "secondPassword2", "shop").PingContext(ctx), "Error 1045")
	require.NoError(t, connectAs(t, servers[0].Addr(), "web", "thirdPassword3", "shop").PingContext(ctx))

	// Names and passwords it would have to quote are refused before any statement.
	for _, bad := range []mysql.AccountOptions{{Database: "shop`; DROP", User: "web", Password: "longenough1"},
		{Database: "shop", User: "we'b", Password: "longenough1"}, {Database: "shop", User: "web", Password: "it's'long"}} {
		require.Error(t, usersOf(t, servers[0]).EnsureAccount(context.Background(), bad))
	}
}

// An admin account as releases before the narrowing made it (every privilege, GRANT
// OPTION, and root over TCP) is narrowed in place: afterwards it does what the operator
// needs, and no more.
func TestAWideAdminAccountIsNarrowedInPlace(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 2)
	root := asRoot(t, servers[0])
	// The users and probe accounts of such a release did not exist: the narrowing makes them.
	for k := range servers {
		require.NoError(t, asRoot(t, servers[k]).ExecUnlogged(ctx, "DROP USER '"+resources.UsersUser+"'@'%'",
			"DROP USER '"+resources.ProbeUser+"'@'localhost'"))
	}
	// The test's servers have 'root'@'%' (test/mysqld makes it), as those releases did.
	wide := []string{"GRANT ALL PRIVILEGES ON *.* TO '" + adminUser + "'@'%' WITH GRANT OPTION"}
	for k := range servers {
		require.NoError(t, asRoot(t, servers[k]).ExecUnlogged(ctx, wide...))
	}
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	require.NoError(t, root.Exec(ctx, "CREATE DATABASE other"))
	require.NoError(t, root.Exec(ctx, "CREATE TABLE other.secrets (id INT PRIMARY KEY)"))

	admin := func(s *mysqld.Instance) mysql.Instance { // a new session: global grants apply to new ones
		in, err := mysql.Open(mysql.Config{Addr: s.Addr(), User: adminUser, Password: replPassword})
		require.NoError(t, err)
		t.Cleanup(func() { in.Close() })
		return in
	}
	before := admin(servers[0])
	w, err := before.Wide(ctx)
	require.NoError(t, err)
	require.True(t, w, "ALL PRIVILEGES WITH GRANT OPTION is wide")
	require.NoError(t, before.NarrowAccount(ctx, mysql.NarrowOptions{Grants: resources.AdminGrantStatements(),
		Prepare: resources.NarrowPrepareStatements(replPassword, replPassword, applicationDatabase)}))

	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	for k, s := range servers { // the replica too: the statements replicate
		after := admin(s)
		w, err := after.Wide(ctx)
		require.NoError(t, err)
		require.False(t, w, "instance %d: narrowed", k)
		_, err = connectAs(t, s.Addr(), "root", mysqld.RootPassword, "").ExecContext(ctx, "SELECT 1")
		require.ErrorContains(t, err, "Error 1045", "instance %d: no root over TCP", k)
		var n int
		require.ErrorContains(t, connectAs(t, s.Addr(), adminUser, replPassword, "").QueryRowContext(ctx,
			"SELECT COUNT(*) FROM other.secrets").Scan(&n), "Error 1142", "instance %d: no application data", k)
		probe := onSocket(t, s, resources.ProbeUser, replPassword)
		require.NoError(t, probe.QueryRowContext(ctx, "SELECT @@super_read_only").Scan(&n), "instance %d: the readiness probe's query", k)
		require.ErrorContains(t, probe.QueryRowContext(ctx, "SELECT COUNT(*) FROM other.secrets").Scan(&n), "Error 1142",
			"instance %d: and nothing more", k)
	}
	after := admin(servers[0])
	require.ErrorContains(t, after.Exec(ctx, "RENAME USER 'root'@'localhost' TO 'root'@'%'"), "Error 1227",
		"the admin account manages no accounts")
	require.ErrorContains(t, after.Exec(ctx, "GRANT SELECT ON *.* TO '"+replUser+"'@'%'"), "Error 1045", "nor grants")
	users := usersOf(t, servers[0])
	require.ErrorContains(t, users.Exec(ctx, "RENAME USER 'root'@'localhost' TO 'root'@'%'"), "Error 1227",
		"root is a system account the users account cannot touch")
	require.NoError(t, users.EnsureAccount(ctx, mysql.AccountOptions{Database: "shop", User: "web", Password: "firstPassword1"}),
		"the users account makes the application's account on its database")
	require.Error(t, users.EnsureAccount(ctx, mysql.AccountOptions{Database: "other", User: "web2", Password: "firstPassword1"}),
		"and on no other")
}

// onSocket opens a client session as an account over s's local socket.
func onSocket(t *testing.T, s *mysqld.Instance, user, password string) *sql.DB {
	t.Helper()
	return dial(t, "unix", s.Socket(), user, password, "")
}

// usersOf opens the SQL layer on s as the operator's users account; closed at the test's end.
func usersOf(t *testing.T, s *mysqld.Instance) mysql.Instance {
	t.Helper()
	in, err := mysql.Open(mysql.Config{Addr: s.Addr(), User: resources.UsersUser, Password: replPassword})
	require.NoError(t, err)
	t.Cleanup(func() { in.Close() })
	return in
}

// The narrowed admin account fences a primary with root's and an application's sessions
// open: it may end root's (SYSTEM_USER), and nothing writes afterwards.
func TestTheNarrowedAdminFencesRootsSessionsToo(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 1)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
	root := connectAs(t, servers[0].Addr(), "root", mysqld.RootPassword, "")
	require.NoError(t, root.PingContext(ctx))
	client := appClient(t, ctx, servers[0])
	require.NoError(t, client.Exec(ctx, "SELECT 1"))
	require.NoError(t, in[0].Fence(ctx, adminUser, replUser))
	require.Error(t, client.Exec(ctx, "CREATE DATABASE nope"), "the application's session was ended or is read-only")
	_, err := root.ExecContext(ctx, "CREATE DATABASE nope")
	require.ErrorContains(t, err, "super-read-only", "root writes nothing either")
}

// A rotation of the operator's accounts on a primary and its replica, as the operator runs
// it: the admin account changes its own password, the users account the others' (its own
// too), each keeping the old one; the replica's channel is pointed at its source again with
// the new replication password; then the old passwords are discarded, on both instances.
func TestTheOperatorsAccountsRotateWithDualPasswords(t *testing.T) {
	ctx := testContext(t)
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{SemiSync: true, WaitForReplicaCount: 1, Timeout: time.Hour}))
	require.NoError(t, in[1].ConfigureReplica(ctx, replicaOf(servers[0])))
	semiSyncClients(t, ctx, in[0], 1, in[1])

	const next = "nextPassword9"
	others := []string{resources.ReplicationUser, resources.ExporterUser, resources.BackupUser, resources.UsersUser}
	var changes []mysql.PasswordChange
	for _, u := range others {
		changes = append(changes, mysql.PasswordChange{User: u, Password: next})
	}
	require.NoError(t, in[0].RetainPasswords(ctx, []mysql.PasswordChange{{User: adminUser, Password: next}}))
	require.NoError(t, usersOf(t, servers[0]).RetainPasswords(ctx, changes))
	// Run again (a pass that failed halfway): the old passwords must survive it.
	require.NoError(t, in[0].RetainPasswords(ctx, []mysql.PasswordChange{{User: adminUser, Password: next}}))
	require.NoError(t, usersOf(t, servers[0]).RetainPasswords(ctx, changes))

	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	all := append([]string{adminUser}, others...)
	for _, s := range servers {
		for _, u := range all {
			for _, pw := range []string{replPassword, next} {
				require.NoError(t, connectAs(t, s.Addr(), u, pw, "").PingContext(ctx), "%s on %s with either password", u, s.Addr())
			}
		}
	}

	renewed := replicaOf(servers[0])
	renewed.Password, renewed.Renew = next, true
	require.NoError(t, in[1].ConfigureReplica(ctx, renewed))
	receiving(t, ctx, in[0], in[1])
	admin, err := mysql.Open(mysql.Config{Addr: servers[0].Addr(), User: adminUser, Password: next})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.DiscardOldPasswords(ctx, []string{adminUser}))
	users, err := mysql.Open(mysql.Config{Addr: servers[0].Addr(), User: resources.UsersUser, Password: next})
	require.NoError(t, err)
	defer users.Close()
	require.NoError(t, users.DiscardOldPasswords(ctx, others))
	require.NoError(t, users.DiscardOldPasswords(ctx, others), "idempotent")
	require.ErrorIs(t, users.DiscardOldPasswords(ctx, []string{adminUser}), mysql.ErrNoPasswordPrivilege,
		"the users account cannot touch the admin account (SYSTEM_USER)")
	backup, err := mysql.Open(mysql.Config{Addr: servers[0].Addr(), User: resources.BackupUser, Password: next})
	require.NoError(t, err)
	defer backup.Close()
	require.ErrorIs(t, backup.RetainPasswords(ctx, []mysql.PasswordChange{{User: resources.BackupUser, Password: "yetAnother7"}}),
		mysql.ErrNoPasswordPrivilege, "its own secondary password needs APPLICATION_PASSWORD_ADMIN")

	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	for _, s := range servers {
		for _, u := range all {
			require.ErrorContains(t, connectAs(t, s.Addr(), u, replPassword, "").PingContext(ctx), "Error 1045", "%s's old password", u)
			require.NoError(t, connectAs(t, s.Addr(), u, next, "").PingContext(ctx))
		}
	}
	// The replica still replicates: its channel has the new password. A receiver that
	// reconnects proves it (the old password is gone).
	require.NoError(t, in[1].StopReplication(ctx, false))
	require.NoError(t, asRoot(t, servers[1]).Exec(ctx, "START REPLICA IO_THREAD"))
	receiving(t, ctx, in[0], in[1])
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE rotated"))
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
}

// receiving waits until replica's receiver is connected to primary again: a write on the
// primary (semi-sync, so it waits for the replica's acknowledgement) arrives.
func receiving(t *testing.T, ctx context.Context, primary, replica mysql.Instance) {
	t.Helper()
	eventually(t, "the replica's receiver connected", func() error {
		st, err := replica.Status(ctx)
		if err != nil {
			return err
		}
		if r := st.Replica; r == nil || !r.IORunning || r.LastIOError != "" {
			return fmt.Errorf("replica: %+v", r)
		}
		return nil
	})
	semiSyncClients(t, ctx, primary, 1, replica)
}
