package mysqld_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/mysqld"
)

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

func open(t *testing.T, i *mysqld.Instance) *sql.DB {
	t.Helper()
	db, err := i.DB()
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestThreeInstancesReplicateARowWithGTID(t *testing.T) {
	inst := mysqld.StartN(t, 3)
	dbs := make([]*sql.DB, len(inst))
	for k, i := range inst {
		dbs[k] = open(t, i)
		var version string
		require.NoError(t, dbs[k].QueryRow("SELECT @@version").Scan(&version))
		require.True(t, strings.HasPrefix(version, "9.7."), "instance %d runs %s, want 9.7.x", k, version)
		var gtid string
		require.NoError(t, dbs[k].QueryRow("SELECT @@gtid_executed").Scan(&gtid))
		require.Empty(t, gtid, "a fresh instance has written no transaction")
	}
	var uuids []string
	for _, db := range dbs {
		var u string
		require.NoError(t, db.QueryRow("SELECT @@server_uuid").Scan(&u))
		require.NotContains(t, uuids, u, "every copy of the template gets its own server_uuid")
		uuids = append(uuids, u)
	}

	exec(t, dbs[0],
		"CREATE USER 'repl'@'%' IDENTIFIED BY 'repl-pw'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%'")
	for _, k := range []int{1, 2} {
		exec(t, dbs[k], "SET GLOBAL super_read_only = ON",
			fmt.Sprintf(`CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=%d,
				SOURCE_USER='repl', SOURCE_PASSWORD='repl-pw', SOURCE_AUTO_POSITION=1,
				GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1`, inst[0].Port()),
			"START REPLICA")
	}
	exec(t, dbs[0],
		"CREATE DATABASE smoke",
		"CREATE TABLE smoke.t (id INT PRIMARY KEY, v VARCHAR(32))",
		"INSERT INTO smoke.t VALUES (1, 'carried')")
	var executed string
	require.NoError(t, dbs[0].QueryRow("SELECT @@gtid_executed").Scan(&executed))
	require.NotEmpty(t, executed)

	for _, k := range []int{1, 2} {
		var timedOut int
		require.NoError(t, dbs[k].QueryRow("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 30)", executed).Scan(&timedOut))
		require.Zero(t, timedOut, "replica %d did not apply %s", k, executed)
		var v string
		require.NoError(t, dbs[k].QueryRow("SELECT v FROM smoke.t WHERE id = 1").Scan(&v))
		require.Equal(t, "carried", v)
		var replicaGTID string
		require.NoError(t, dbs[k].QueryRow("SELECT @@gtid_executed").Scan(&replicaGTID))
		require.Equal(t, executed, replicaGTID, "the replica executed exactly the source's transactions")
	}
}

func TestSupervisorRestartsAKilledServerAndKeepsItsData(t *testing.T) {
	inst := mysqld.StartN(t, 1)[0]
	inst.SetRestartPolicy(mysqld.RestartAlways)
	db := open(t, inst)
	exec(t, db, "CREATE DATABASE keep", "CREATE TABLE keep.t (id INT PRIMARY KEY)", "INSERT INTO keep.t VALUES (7)")
	before := inst.PID()
	require.NoError(t, inst.Kill())
	require.Eventually(t, func() bool { return inst.PID() != 0 && inst.PID() != before }, time.Minute, 50*time.Millisecond)
	require.NoError(t, inst.WaitReady(context.Background()))
	// A new pool: the old one's connections died with the server.
	var id int
	require.NoError(t, open(t, inst).QueryRow("SELECT id FROM keep.t").Scan(&id))
	require.Equal(t, 7, id)
	require.Equal(t, 2, inst.Starts())
}

func TestNeverPolicyLeavesAKilledServerDownUntilResumed(t *testing.T) {
	inst := mysqld.StartN(t, 1)[0]
	inst.SetRestartPolicy(mysqld.RestartNever)
	require.NoError(t, inst.Kill())
	require.Eventually(t, func() bool { return inst.PID() == 0 }, time.Minute, 50*time.Millisecond)
	db := open(t, inst)
	require.Error(t, db.Ping(), "a lost instance does not answer")
	require.NoError(t, inst.Resume(context.Background()))
	require.NoError(t, db.Ping())
}

func TestRestartStatementIsHonouredBySupervisor(t *testing.T) {
	inst := mysqld.StartN(t, 1)[0] // default policy: restart on request only
	db := open(t, inst)
	exec(t, db, "RESTART")
	require.Eventually(t, func() bool { return inst.Starts() == 2 }, time.Minute, 50*time.Millisecond)
	require.NoError(t, inst.WaitReady(context.Background()))
}
