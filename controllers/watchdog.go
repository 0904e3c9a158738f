package controllers

import (
	"fmt"
	"sync"
	"time"
)

// DefaultStuckAfter is how long one reconcile may run before the liveness check fails.
// Every call a reconcile makes is bounded (API requests by their client's timeout, object
// stores by storeTimeout, index reads by 10 s, the topology handed to its own loop), so a
// reconcile still running after this is stuck: a restart frees its worker.
const DefaultStuckAfter = 5 * time.Minute

// Watchdog tracks the reconciles in flight, for the liveness check; the zero value is ready
// to use, and a nil one tracks nothing.
type Watchdog struct {
	// StuckAfter is how long a reconcile may run (DefaultStuckAfter when zero); Now the
	// clock (time.Now when nil).
	StuckAfter time.Duration
	Now        func() time.Time

	mu       sync.Mutex
	next     uint64
	inflight map[uint64]reconcileRun
}

type reconcileRun struct {
	what  string
	since time.Time
}

// Start records a reconcile of what beginning now; the returned func records its end.
func (w *Watchdog) Start(what string) (done func()) {
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight == nil {
		w.inflight = map[uint64]reconcileRun{}
	}
	w.next++
	id := w.next
	w.inflight[id] = reconcileRun{what: what, since: w.now()}
	return func() {
		w.mu.Lock()
		delete(w.inflight, id)
		w.mu.Unlock()
	}
}

// Check fails while a reconcile has run longer than StuckAfter, naming it.
func (w *Watchdog) Check() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	bound := w.StuckAfter
	if bound <= 0 {
		bound = DefaultStuckAfter
	}
	now := w.now()
	for _, run := range w.inflight {
		if ran := now.Sub(run.since); ran > bound {
			return fmt.Errorf("the reconcile of %s has run for %s (more than %s)", run.what, ran.Round(time.Second), bound)
		}
	}
	return nil
}

func (w *Watchdog) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}
