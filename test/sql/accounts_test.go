package sql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/mysql"
)

// connectAs opens a client session as an account on addr, for what an application would do.
func connectAs(t *testing.T, addr, user, password, database string) *sql.DB {
	t.Helper()
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = "tcp", addr, user, password, database
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
	require.NoError(t, in[0].Exec(ctx, "CREATE DATABASE other"))
	require.NoError(t, in[0].Exec(ctx, "CREATE TABLE other.secrets (id INT PRIMARY KEY)"))

	o := mysql.AccountOptions{Database: "shop", User: "web", Password: "firstPassword1"}
	require.NoError(t, in[0].EnsureAccount(ctx, o))
	require.NoError(t, in[0].EnsureAccount(ctx, o), "idempotent")
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
	require.NoError(t, in[0].EnsureAccount(ctx, o))
	require.ErrorContains(t, connectAs(t, servers[0].Addr(), "web", "firstPassword1", "shop").PingContext(ctx), "Error 1045")
	require.NoError(t, connectAs(t, servers[0].Addr(), "web", "secondPassword2", "shop").QueryRowContext(ctx,
		"SELECT COUNT(*) FROM orders").Scan(&n))
	require.Equal(t, 1, n)

	// A rotation: the new password becomes the account's, the previous one stays accepted
	// (MySQL's dual passwords), also when the same rotation is applied again; then the
	// previous one is discarded.
	o.Password, o.Previous = "thirdPassword3", "secondPassword2"
	require.NoError(t, in[0].EnsureAccount(ctx, o))
	require.NoError(t, in[0].EnsureAccount(ctx, o), "applied again, the previous password must survive")
	for _, pw := range []string{"secondPassword2", "thirdPassword3"} {
		require.NoError(t, connectAs(t, servers[0].Addr(), "web", pw, "shop").PingContext(ctx), pw)
	}
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))
	require.NoError(t, connectAs(t, servers[1].Addr(), "web", "secondPassword2", "shop").PingContext(ctx), "the replica too")
	o.Previous = ""
	require.NoError(t, in[0].EnsureAccount(ctx, o))
	require.ErrorContains(t, connectAs(t, servers[0].Addr(), "web", "secondPassword2", "shop").PingContext(ctx), "Error 1045")
	require.NoError(t, connectAs(t, servers[0].Addr(), "web", "thirdPassword3", "shop").PingContext(ctx))

	// Names and passwords it would have to quote are refused before any statement.
	for _, bad := range []mysql.AccountOptions{{Database: "shop`; DROP", User: "web", Password: "longenough1"},
		{Database: "shop", User: "we'b", Password: "longenough1"}, {Database: "shop", User: "web", Password: "it's'long"}} {
		require.Error(t, in[0].EnsureAccount(context.Background(), bad))
	}
}
