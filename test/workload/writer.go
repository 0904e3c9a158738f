// Package workload is the client side of the topology tests and benchmarks: a writer that
// commits rows through a cluster's primary Service for as long as it runs, the way an
// application would, and the checks of what it was told against what the database holds.
package workload

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PrimaryEndpoint is the pod the cluster's primary Service routes to (its ready endpoint),
// "" when it has none.
func PrimaryEndpoint(ctx context.Context, k8s client.Client, namespace, cluster string) string {
	slices := &discoveryv1.EndpointSliceList{}
	if err := k8s.List(ctx, slices, client.InNamespace(namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: cluster + "-primary"}); err != nil {
		return ""
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 && e.TargetRef != nil {
				return e.TargetRef.Name
			}
		}
	}
	return ""
}

// Ack is one write the database acknowledged.
type Ack struct {
	ID int
	// Sent is when the INSERT was sent, At when its commit was acknowledged.
	Sent, At time.Time
}

// Connect opens a connection to the cluster's primary, the way the application under test
// reaches it (through the primary Service).
type Connect func(context.Context) (*sql.DB, error)

// DefaultTable is the table in the workload database a writer fills unless told another.
const DefaultTable = "acked"

// Writer inserts increasing ids into a table of the workload database through connect, one
// at a time, reconnecting after any error; an id whose outcome is unknown is never reused.
type Writer struct {
	connect Connect
	table   string

	mu       sync.Mutex
	acks     []Ack
	failures int
	stop     atomic.Bool
	done     chan struct{}
}

// StartWriter creates the table on the current primary and starts writing. Like an
// application starting, it retries for up to 30 s until the primary answers (a Service's
// rules may lag its endpoints by a moment).
func StartWriter(ctx context.Context, connect Connect) (*Writer, error) {
	return StartWriterInto(ctx, DefaultTable, connect)
}

// StartWriterInto is StartWriter into workload.<table>, for writers that run side by side.
func StartWriterInto(ctx context.Context, table string, connect Connect) (*Writer, error) {
	w := &Writer{connect: connect, table: table, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := w.prepare(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("while preparing the writer's table: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	go w.run()
	return w, nil
}

func (w *Writer) prepare(ctx context.Context) error {
	db, err := w.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{"CREATE DATABASE IF NOT EXISTS workload",
		"CREATE TABLE IF NOT EXISTS workload." + w.table + " (id INT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	next := 1
	var db *sql.DB
	for !w.stop.Load() {
		if db == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			var err error
			db, err = w.connect(ctx)
			if err == nil {
				err = db.PingContext(ctx)
			}
			cancel()
			if err != nil {
				if db != nil {
					_ = db.Close()
				}
				db = nil
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		sent := time.Now()
		_, err := db.ExecContext(ctx, "INSERT INTO workload."+w.table+" (id) VALUES (?)", next)
		cancel()
		next++
		if err != nil {
			w.mu.Lock()
			w.failures++
			w.mu.Unlock()
			_ = db.Close()
			db = nil
			continue
		}
		w.mu.Lock()
		w.acks = append(w.acks, Ack{ID: next - 1, Sent: sent, At: time.Now()})
		w.mu.Unlock()
	}
	if db != nil {
		_ = db.Close()
	}
}

// Acks returns the acknowledged writes so far, in order.
func (w *Writer) Acks() []Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Ack(nil), w.acks...)
}

// AckedAfter waits until a write sent after t is acknowledged and returns when it was. A
// write sent before t may be acknowledged just after it (its commit was done before a
// fault at t), which says nothing of what t did.
func (w *Writer) AckedAfter(ctx context.Context, t time.Time) (time.Time, error) {
	for {
		acks := w.Acks()
		if n := len(acks); n > 0 && acks[n-1].Sent.After(t) {
			for _, a := range acks {
				if a.Sent.After(t) {
					return a.At, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no write acknowledged since %s: %w", t.Format(time.StampMilli), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// LongestGap is the longest time between consecutive acknowledged writes (or between from
// and the first) in [from, to]: how long writes were unavailable to the client.
func (w *Writer) LongestGap(from, to time.Time) time.Duration {
	prev, gap := from, time.Duration(0)
	for _, a := range w.Acks() {
		if a.At.Before(from) || a.At.After(to) {
			continue
		}
		gap = max(gap, a.At.Sub(prev))
		prev = a.At
	}
	return gap
}

// Stop ends the writer and returns every acknowledged write.
func (w *Writer) Stop() []Ack {
	w.stop.Store(true)
	<-w.done
	return w.Acks()
}

// Table is the table of the workload database the writer fills.
func (w *Writer) Table() string { return w.table }

// Lost returns the acknowledged ids missing from the instance's workload.acked.
func Lost(ctx context.Context, db *sql.DB, acks []Ack) ([]int, error) {
	return LostIn(ctx, db, DefaultTable, acks)
}

// LostIn returns the acknowledged ids missing from the instance's workload.<table>.
func LostIn(ctx context.Context, db *sql.DB, table string, acks []Ack) ([]int, error) {
	rows, err := db.QueryContext(ctx, "SELECT id FROM workload."+table)
	if err != nil {
		return nil, fmt.Errorf("while reading the written rows: %w", err)
	}
	defer rows.Close()
	have := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		have[id] = true
	}
	var lost []int
	for _, a := range acks {
		if !have[a.ID] {
			lost = append(lost, a.ID)
		}
	}
	return lost, rows.Err()
}
