package sql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// bigInsert is one transaction of 5,000 rows of 1 kB: some 600 row events, several MB of
// binary log, so that a stream cut after 256 kB ends in its middle.
const bigInsert = `INSERT INTO app.t (id, pad)
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000)
SELECT a.n + 1000 * b.k, REPEAT('x', 1000) FROM s a, (SELECT 0 k UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) b`

// halfReceived leaves the replica with the first part of a transaction in its relay log
// and its multi-threaded applier (MySQL's default) in the middle of scheduling it: the
// replica's stream from its source stalls after 256 kB of a several-MB transaction. A
// source cut off or killed mid-send, or a receiver stopped by a freeze mid-transaction,
// leave the same. It returns the source's executed set once the transaction committed.
func halfReceived(t *testing.T, ctx context.Context) ([]*mysqld.Instance, []mysql.Instance, *stallProxy, string) {
	t.Helper()
	servers, in := cluster(t, 2)
	require.NoError(t, in[0].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE DATABASE app"))
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, "CREATE TABLE app.t (id INT PRIMARY KEY, pad VARCHAR(1000))"))
	proxy := newStallProxy(t, servers[0].Addr())
	via := replicaOf(servers[0])
	via.SourcePort, via.SemiSync = proxy.port(), false
	require.NoError(t, in[1].ConfigureReplica(ctx, via))
	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.NoError(t, in[1].WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second))

	proxy.stallAfter(256 << 10)
	require.NoError(t, asRoot(t, servers[0]).Exec(ctx, bigInsert))
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	db, err := servers[1].DB()
	require.NoError(t, err)
	defer db.Close()
	eventually(t, "the applier scheduling a half-received transaction", func() error {
		trx, complete, err := coordinator(ctx, db)
		switch {
		case err != nil:
			return err
		case trx == "" || complete:
			return fmt.Errorf("the coordinator processes %q (received whole: %v)", trx, complete)
		}
		return nil
	})
	return servers, in, proxy, st.GTIDExecuted
}

// coordinator says which transaction the applier's coordinator is scheduling, and whether
// the receiver has it whole (the received set holds only transactions received whole).
func coordinator(ctx context.Context, db *sql.DB) (string, bool, error) {
	var trx string
	var complete bool
	err := db.QueryRowContext(ctx, `SELECT c.PROCESSING_TRANSACTION, GTID_SUBSET(c.PROCESSING_TRANSACTION, s.RECEIVED_TRANSACTION_SET)
FROM performance_schema.replication_applier_status_by_coordinator c
JOIN performance_schema.replication_connection_status s ON s.CHANNEL_NAME = c.CHANNEL_NAME
WHERE c.CHANNEL_NAME = ''`).Scan(&trx, &complete)
	return trx, complete, err
}

func rows(t *testing.T, ctx context.Context, s *mysqld.Instance) int {
	t.Helper()
	db, err := s.DB()
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.t").Scan(&n))
	return n
}

// MySQL's STOP REPLICA waits up to 60 s for the rest of a transaction that a
// multi-threaded applier began to schedule, and with the receiver stopped the rest never
// comes. A failover freezes the candidate's receiver (wherever it is in the stream), then
// promotes it: the promotion must not wait for that transaction, and must not apply half
// of it.
func TestPromotingAReplicaLeftWithAHalfReceivedTransaction(t *testing.T) {
	ctx := testContext(t)
	servers, in, _, _ := halfReceived(t, ctx)
	require.NoError(t, in[1].StopReplication(ctx, false), "the freeze")

	promote, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, in[1].ConfigurePrimary(promote, mysql.PrimaryOptions{}), "after %s", time.Since(start))
	t.Logf("promoted in %s", time.Since(start))

	st, err := in[1].Status(ctx)
	require.NoError(t, err)
	require.Nil(t, st.Replica, "the promoted instance replicates from nobody")
	require.False(t, st.ReadOnly || st.SuperReadOnly, "the promoted instance is writable")
	require.Zero(t, rows(t, ctx, servers[1]), "none of the half-received transaction is applied")
}

// A replica whose source died in the middle of sending a transaction is pointed at
// another source (a failover's new primary): the repointing must not wait for the old
// source's rest, and the new source's copy of the transaction arrives whole.
func TestRepointingAReplicaLeftWithAHalfReceivedTransaction(t *testing.T) {
	ctx := testContext(t)
	servers, in, proxy, executed := halfReceived(t, ctx)
	proxy.close() // the source is gone; the receiver keeps trying to reconnect

	repoint, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, in[1].ConfigureReplica(repoint, replicaOf(servers[0])), "after %s", time.Since(start))
	t.Logf("repointed in %s", time.Since(start))

	require.NoError(t, in[1].WaitForGTID(ctx, executed, 30*time.Second))
	require.Equal(t, 5000, rows(t, ctx, servers[1]), "the transaction arrived whole from the new source")
	st, err := in[1].Status(ctx)
	require.NoError(t, err)
	require.True(t, st.Replica.IORunning && st.Replica.SQLRunning, "%+v", st.Replica)
	require.Empty(t, st.Replica.LastIOError+st.Replica.LastSQLError)
}
