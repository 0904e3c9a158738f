package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

func (i *instance) Status(ctx context.Context) (*Status, error) {
	s := &Status{}
	if err := i.db.QueryRowContext(ctx, qGlobals).Scan(&s.ServerUUID, &s.GTIDExecuted, &s.GTIDPurged,
		&s.ReadOnly, &s.SuperReadOnly); err != nil {
		return nil, fmt.Errorf("%s: reading server state: %w", i.cfg.Addr, err)
	}
	s.GTIDExecuted = normalizeGTID(s.GTIDExecuted)
	s.GTIDPurged = normalizeGTID(s.GTIDPurged)
	r, err := i.replica(ctx)
	if err != nil {
		return nil, err
	}
	s.Replica = r
	if s.Clone, err = i.cloneStatus(ctx); err != nil {
		return nil, err
	}
	if err := i.globalStatus(ctx, s); err != nil {
		return nil, fmt.Errorf("%s: reading the global status: %w", i.cfg.Addr, err)
	}
	return s, nil
}

// SSLTimeLayout is how mysqld prints a certificate's dates (OpenSSL's ASN1_TIME_print), as
// in the status variable Ssl_server_not_after.
const SSLTimeLayout = "Jan _2 15:04:05 2006 MST"

// globalStatus reads semi-sync's state and the served certificate's expiry.
func (i *instance) globalStatus(ctx context.Context, s *Status) error {
	rows, err := i.db.QueryContext(ctx, qGlobalStatus)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		switch name {
		case "Rpl_semi_sync_source_status":
			s.SemiSyncSource = value == "ON"
		case "Rpl_semi_sync_source_clients":
			_, _ = fmt.Sscan(value, &s.SemiSyncSourceClients)
		case "Rpl_semi_sync_replica_status":
			s.SemiSyncReplica = value == "ON"
		case "Ssl_server_not_after":
			if value == "" {
				continue
			}
			if s.TLSNotAfter, err = time.Parse(SSLTimeLayout, value); err != nil {
				return fmt.Errorf("status variable Ssl_server_not_after %q: %w", value, err)
			}
		}
	}
	return rows.Err()
}

func (i *instance) ReloadTLS(ctx context.Context) error {
	return i.Exec(ctx, "ALTER INSTANCE RELOAD TLS")
}

func (i *instance) replica(ctx context.Context) (*ReplicaStatus, error) {
	r := &ReplicaStatus{}
	var io, sqlState string
	var ioErrNo, sqlErrNo sql.NullInt64
	var ioErr, sqlErr, caFile sql.NullString
	var verify string
	err := i.db.QueryRowContext(ctx, qReplica).Scan(&r.SourceHost, &r.SourcePort, &io, &sqlState,
		&r.ReceivedGTIDSet, &ioErrNo, &ioErr, &sqlErrNo, &sqlErr, &caFile, &verify)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading replication state: %w", i.cfg.Addr, err)
	}
	r.IORunning, r.SQLRunning, r.IOConnecting = io == "ON", sqlState == "ON", io == "CONNECTING"
	r.ReceivedGTIDSet = normalizeGTID(r.ReceivedGTIDSet)
	r.TLSCAFile, r.TLSVerifyName = caFile.String, verify == "YES"
	if ioErrNo.Int64 != 0 {
		r.LastIOError = fmt.Sprintf("%d: %s", ioErrNo.Int64, ioErr.String)
	}
	if sqlErrNo.Int64 != 0 {
		r.LastSQLError = fmt.Sprintf("%d: %s", sqlErrNo.Int64, sqlErr.String)
	}
	return r, nil
}

// normalizeGTID removes the line breaks MySQL puts in long GTID sets.
func normalizeGTID(s string) string { return strings.ReplaceAll(s, "\n", "") }

// ensurePlugins installs the semi-sync and clone plugins where my.cnf did not load them.
func (i *instance) ensurePlugins(ctx context.Context) error {
	rows, err := i.db.QueryContext(ctx, qPlugins)
	if err != nil {
		return fmt.Errorf("%s: listing plugins: %w", i.cfg.Addr, err)
	}
	active := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("%s: listing plugins: %w", i.cfg.Addr, err)
		}
		active[n] = true
	}
	rows.Close()
	for _, p := range plugins {
		if !active[p.name] {
			if err := i.Exec(ctx, installPlugin(p.name, p.library)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ConfigurePrimary stops replicating, turns semi-sync's source side on (before the first
// write, so that no acknowledged write is unreplicated) and makes the instance writable.
func (i *instance) ConfigurePrimary(ctx context.Context, o PrimaryOptions) error {
	if err := i.ensurePlugins(ctx); err != nil {
		return err
	}
	if err := i.stopReplica(ctx); err != nil {
		return err
	}
	stmts := []string{"RESET REPLICA ALL", "SET GLOBAL rpl_semi_sync_replica_enabled = OFF"}
	stmts = append(stmts, primarySettings(o)...)
	stmts = append(stmts, "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF")
	return i.execAll(ctx, stmts...)
}

// ConfigureReplica fences the instance (super_read_only) and points it at its source,
// restarting replication only when something changed (or o.Renew asks).
func (i *instance) ConfigureReplica(ctx context.Context, o ReplicaOptions) error {
	if err := i.ensurePlugins(ctx); err != nil {
		return err
	}
	if err := i.Exec(ctx, "SET GLOBAL super_read_only = ON"); err != nil {
		return err
	}
	st, err := i.Status(ctx)
	if err != nil {
		return err
	}
	r := st.Replica
	if o.Renew || r == nil || r.SourceHost != o.SourceHost || r.SourcePort != o.SourcePort || !r.IORunning || !r.SQLRunning ||
		st.SemiSyncReplica != o.SemiSync || !r.TLSAs(o) {
		semi := "OFF"
		if o.SemiSync {
			semi = "ON"
		}
		// The replica side of semi-sync takes effect when the IO thread starts.
		if err := i.stopReplica(ctx); err != nil {
			return err
		}
		if err := i.execAll(ctx, "SET GLOBAL rpl_semi_sync_replica_enabled = "+semi, changeSource(o), "START REPLICA"); err != nil {
			return err
		}
	}
	// An old primary's source side of semi-sync goes last: turning it off waits for its
	// acknowledgement receiver to stop (970 ms on MySQL 9.7), and until this
	// instance replicates its new source may have no replica to acknowledge its commits.
	return i.Exec(ctx, "SET GLOBAL rpl_semi_sync_source_enabled = OFF")
}

func (i *instance) SetSuperReadOnly(ctx context.Context, on bool) error {
	if on {
		return i.Exec(ctx, "SET GLOBAL super_read_only = ON")
	}
	return i.execAll(ctx, "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF")
}

// StopReplication stops the receiver, so that nothing more arrives (and no acknowledgement
// leaves), or both threads, so that nothing more is applied either.
func (i *instance) StopReplication(ctx context.Context, all bool) error {
	if all {
		return i.stopReplica(ctx)
	}
	return i.Exec(ctx, "STOP REPLICA IO_THREAD")
}

// Fence makes the instance read-only for everyone (super_read_only) and ends every client
// session but keep's, so that no transaction begun before can commit afterwards.
//
// SET GLOBAL super_read_only waits for the commits in progress, and on a primary cut off
// from its replicas those wait for a semi-sync acknowledgement that cannot come; killing
// their sessions does not end that wait (seen on MySQL 9.7: the thread stays "Killed",
// "Waiting for semi-sync ACK from replica"). So: the SET is sent first and left pending
// (a pending global read lock holds every new write back), client sessions are killed
// (their sockets close: nobody can be told of a commit any more), and if the SET still
// waits, semi-sync's source side is turned off, which lets the killed sessions' commits
// end. Those commits are acknowledged to nobody; they stay in this instance's binary log
// (errant transactions, for the topology manager to deal with).
func (i *instance) Fence(ctx context.Context, keep ...string) error {
	set := make(chan error, 1)
	go func() { set <- i.Exec(ctx, "SET GLOBAL super_read_only = ON") }()
	wait := func(d time.Duration) (bool, error) {
		select {
		case err := <-set:
			return true, err
		case <-time.After(d):
			return false, nil
		case <-ctx.Done():
			return false, fmt.Errorf("%s: fencing: %w", i.cfg.Addr, ctx.Err())
		}
	}
	done, err := wait(500 * time.Millisecond)
	if err != nil {
		return err
	}
	if err := i.KillConnections(ctx, keep...); err != nil {
		return err
	}
	if !done {
		if done, err = wait(time.Second); err != nil {
			return err
		}
	}
	if !done {
		if err := i.Exec(ctx, "SET GLOBAL rpl_semi_sync_source_enabled = OFF"); err != nil {
			return err
		}
		if done, err = wait(time.Until(deadline(ctx))); err != nil {
			return err
		}
	}
	if !done {
		// The timer and the context's end can fire together; either way the SET has not
		// returned, and a fence that has not taken effect must not be reported as one.
		return fmt.Errorf("%s: fencing: super_read_only not set by the deadline", i.cfg.Addr)
	}
	return i.KillConnections(ctx, keep...)
}

// deadline is ctx's deadline, or a minute from now when it has none.
func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// KillConnections ends every client session except the listed users' (the operator's,
// replication's): after fencing, a session that began a transaction before
// super_read_only could otherwise still commit it.
func (i *instance) KillConnections(ctx context.Context, exceptUsers ...string) error {
	users := []string{"''"}
	for _, u := range exceptUsers {
		users = append(users, quote(u))
	}
	rows, err := i.db.QueryContext(ctx, fmt.Sprintf(qUserProcesses, strings.Join(users, ", ")))
	if err != nil {
		return fmt.Errorf("%s: listing connections: %w", i.cfg.Addr, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("%s: listing connections: %w", i.cfg.Addr, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		var me *mysql.MySQLError
		if err := i.Exec(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil &&
			(!errors.As(err, &me) || me.Number != 1094) { // 1094: the session ended meanwhile
			return err
		}
	}
	return nil
}

// WaitForGTID waits until the instance has applied set.
func (i *instance) WaitForGTID(ctx context.Context, set string, timeout time.Duration) error {
	var res sql.NullInt64
	secs := max(int64(timeout.Round(time.Second)/time.Second), 1)
	if err := i.db.QueryRowContext(ctx, qWaitForGTID, set, secs).Scan(&res); err != nil {
		return fmt.Errorf("%s: waiting for %s: %w", i.cfg.Addr, set, err)
	}
	if res.Int64 != 0 {
		return fmt.Errorf("%s: %w %s after %s", i.cfg.Addr, ErrWaitTimeout, set, timeout)
	}
	return nil
}

// GTIDSubtract returns the transactions of a that are not in b: on a replica's executed
// set minus the primary's, the errant transactions.
func (i *instance) GTIDSubtract(ctx context.Context, a, b string) (string, error) {
	var out string
	if err := i.db.QueryRowContext(ctx, qGTIDSubtract, a, b).Scan(&out); err != nil {
		return "", fmt.Errorf("%s: GTID_SUBTRACT: %w", i.cfg.Addr, err)
	}
	return normalizeGTID(out), nil
}

// PrepareClone readies the instance to receive a clone: the clone plugin, the donor
// allowed, replication stopped. CLONE refuses to run under super_read_only, so the
// recipient keeps read_only (no ordinary client can write) and is out of every Service;
// its data is replaced and it restarts fenced by its configuration.
func (i *instance) PrepareClone(ctx context.Context, o CloneOptions) error {
	if err := i.ensurePlugins(ctx); err != nil {
		return err
	}
	if err := i.Exec(ctx, fmt.Sprintf("SET GLOBAL clone_valid_donor_list = %s", quote(fmt.Sprintf("%s:%d", o.DonorHost, o.DonorPort)))); err != nil {
		return err
	}
	if err := i.Exec(ctx, cloneCA(o)); err != nil {
		return err
	}
	if err := i.stopReplica(ctx); err != nil {
		return err
	}
	return i.execAll(ctx, "SET GLOBAL read_only = ON", "SET GLOBAL super_read_only = OFF")
}

// Clone runs CLONE INSTANCE, which copies the donor's data and restarts mysqld at the end
// (its supervisor, the kubelet, starts it again), so the statement's connection drops: that
// counts as the clone having ended, and clone_status (Status().Clone) says how. The call
// lasts as long as the copy; run it on a connection whose IOTimeout allows that, and with a
// context deadline.
func (i *instance) Clone(ctx context.Context, o CloneOptions) error {
	if err := i.Exec(ctx, cloneFrom(o)); err != nil && !restarting(err) {
		return err
	}
	return nil
}

// restarting tells the errors that mean "the server is restarting after the clone": its
// own refusal to restart without a supervisor, or the connection dropping.
func restarting(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 3707 // restart failed: not supervised
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// cloneStatus reads performance_schema.clone_status (nil when the instance never received
// a clone, or the clone plugin is not loaded yet).
func (i *instance) cloneStatus(ctx context.Context) (*CloneStatus, error) {
	var state string
	var errNo int64
	var msg sql.NullString
	err := i.db.QueryRowContext(ctx, qCloneState).Scan(&state, &errNo, &msg)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.As(err, &me) && me.Number == 1146: // no such table: no plugin
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: reading clone status: %w", i.cfg.Addr, err)
	}
	cs := &CloneStatus{State: state}
	if errNo != 0 {
		cs.Error = fmt.Sprintf("%d: %s", errNo, msg.String)
	}
	return cs, nil
}
