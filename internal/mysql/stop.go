package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// How long stopReplica lets the applier's coordinator go on scheduling transactions the
// receiver has whole before it stops it anyway (see stopReplica).
const coordinatorSettle = time.Second

// stopReplica stops both replication threads without waiting for a transaction that can
// no longer arrive.
//
// A receiver stops wherever it is in the stream: stopped by a freeze, or cut off from a
// source that died or was partitioned mid-send, it can leave the first part of a
// transaction in the relay log. When the multi-threaded applier (MySQL's default) has
// begun to schedule that transaction, STOP REPLICA waits up to 60 s for its rest (MySQL's
// sql_slave_killed defers a stop, not a kill; the likely cause of a promotion's STOP REPLICA
// seen blocking until the operator's read timeout). A KILL of the coordinator sent before
// STOP REPLICA ends it at once (test/sql): its workers roll the part back, and the
// transaction, not in the executed set, is fetched whole again from whichever source the
// instance replicates from next (GTID auto-positioning).
//
// So: the receiver stops first, so that nothing more arrives; then, while the
// coordinator schedules a transaction the receiver has whole it is left to go on (a
// STOP REPLICA then waits only for that transaction's scheduled end), for at most
// coordinatorSettle; once it is idle the threads stop, and once it is in a transaction
// received in part it is killed first. A coordinator that moves from a whole transaction
// into a part one after the last look and before the STOP still makes MySQL wait.
func (i *instance) stopReplica(ctx context.Context) error {
	if err := i.Exec(ctx, "STOP REPLICA IO_THREAD"); err != nil {
		return err
	}
	settle := time.Now().Add(coordinatorSettle)
	for {
		c, err := i.coordinator(ctx)
		if err != nil {
			return err
		}
		switch {
		case c.scheduling == "": // idle, or no coordinator
			return i.Exec(ctx, "STOP REPLICA")
		case !c.whole:
			if err := i.killCoordinator(ctx, c.processID); err != nil {
				return err
			}
			return i.Exec(ctx, "STOP REPLICA")
		case time.Now().After(settle):
			return i.Exec(ctx, "STOP REPLICA")
		}
		if err := i.pause(ctx, "stopping replication"); err != nil {
			return err
		}
	}
}

// pause waits a moment between two looks at the coordinator, or until ctx ends.
func (i *instance) pause(ctx context.Context, what string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s: %s: %w", i.cfg.Addr, what, ctx.Err())
	case <-time.After(20 * time.Millisecond):
		return nil
	}
}

// coordinatorState is what the applier's coordinator is doing: the transaction it
// schedules ("" when idle or not running), whether the receiver has it whole, and the
// coordinator's connection id.
type coordinatorState struct {
	scheduling string
	whole      bool
	processID  int64
}

func (i *instance) coordinator(ctx context.Context) (coordinatorState, error) {
	var c coordinatorState
	var id sql.NullInt64
	err := i.db.QueryRowContext(ctx, qCoordinator).Scan(&c.scheduling, &c.whole, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return coordinatorState{}, nil // not a replica, or no coordinator running
	}
	if err != nil {
		return c, fmt.Errorf("%s: reading the applier's coordinator: %w", i.cfg.Addr, err)
	}
	c.processID = id.Int64
	return c, nil
}

// killCoordinator kills the applier's coordinator and waits until it no longer runs.
func (i *instance) killCoordinator(ctx context.Context, id int64) error {
	var me *mysql.MySQLError
	if id == 0 {
		return fmt.Errorf("%s: the applier's coordinator has no connection id", i.cfg.Addr)
	}
	if err := i.Exec(ctx, fmt.Sprintf("KILL %d", id)); err != nil &&
		(!errors.As(err, &me) || me.Number != 1094) { // 1094: it ended meanwhile
		return err
	}
	for {
		c, err := i.coordinator(ctx)
		if err != nil {
			return err
		}
		if c.processID != id {
			return nil
		}
		if err := i.pause(ctx, "waiting for the killed coordinator to end"); err != nil {
			return err
		}
	}
}
