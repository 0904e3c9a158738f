package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
)

// stuckAfter is how long a pass may run before the health check calls the loop stuck:
// every call of a pass has a deadline (PassTimeout in all), so a pass running this long
// means a bug, and the operator is better restarted.
const stuckAfter = PassTimeout + 30*time.Second

// loop looks after one cluster on its own goroutine: a pass, then a wait of at most
// PollInterval (less when the decision asks for it, or when the reconciler says the spec
// changed; UnreachableInterval's rest when no instance answered), for as long as the
// cluster is managed. The reconciler never waits on it.
type loop struct {
	key  string
	wake chan struct{} // capacity 1: a change seen while a pass runs starts the next one at once
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	cluster *mysqlv1beta1.MySQLCluster // the reconciler's latest (defaulted) copy
	report  Report
	running time.Time // when the current pass started; zero between passes
	// history is what the loop's passes did, the last mysqlv1beta1.HistoryLength actions.
	history []mysqlv1beta1.HistoryEntry
}

// Start runs the loops until ctx ends (the manager's, so only the elected leader runs
// them); loops asked for before it begin now.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.base = ctx
	for _, l := range m.loops {
		m.startLocked(l)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	loops := make([]*loop, 0, len(m.loops))
	for _, l := range m.loops {
		loops = append(loops, l)
	}
	m.mu.Unlock()
	// Every call of a pass ends at the context's end; a call that ignores it (a bug) must
	// not hold the shutdown, so the wait is bounded.
	deadline := time.After(shutdownWait)
	for _, l := range loops {
		select {
		case <-l.done:
		case <-deadline:
			return fmt.Errorf("topology passes still running %s after the stop", shutdownWait)
		}
	}
	return nil
}

// shutdownWait bounds how long Start waits for the loops' passes to end once stopped.
const shutdownWait = 10 * time.Second

// Changes delivers a cluster each time its report changes: the MySQLCluster controller
// watches it and reconciles (writes the status) then.
func (m *Manager) Changes() <-chan event.GenericEvent { return m.changes() }

func (m *Manager) changes() chan event.GenericEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = make(chan event.GenericEvent, 1024)
	}
	return m.events
}

// Observe makes sure the cluster has a loop, hands it the cluster as the reconciler sees
// it, and returns the loop's latest report. It never waits on a database.
func (m *Manager) Observe(_ context.Context, c *mysqlv1beta1.MySQLCluster) Report {
	key := clusterKey(c)
	m.mu.Lock()
	if m.loops == nil {
		m.loops = map[string]*loop{}
	}
	l := m.loops[key]
	if l == nil {
		// Born with the cluster: its goroutine may run before the hand-over below.
		l = &loop{key: key, wake: make(chan struct{}, 1), done: make(chan struct{}), cluster: c.DeepCopy()}
		m.loops[key] = l
		if m.base != nil {
			m.startLocked(l)
		}
	}
	m.mu.Unlock()
	l.mu.Lock()
	changed := l.cluster.Generation != c.Generation || l.cluster.UID != c.UID ||
		!maps.Equal(l.cluster.Annotations, c.Annotations)
	l.cluster = c.DeepCopy()
	r := l.report
	l.mu.Unlock()
	if changed {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	if r.Observed.IsZero() {
		return Report{Managed: true, Reason: mysqlv1beta1.ReasonWaitingForInstances,
			Message: "the topology manager has not read the instances yet"}
	}
	return r
}

// Forget stops the cluster's loop (waiting for its pass to end, within ctx) and drops
// everything kept about the cluster.
func (m *Manager) Forget(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error {
	m.mu.Lock()
	l := m.loops[clusterKey(c)]
	delete(m.loops, clusterKey(c))
	m.mu.Unlock()
	var waitErr error
	if l != nil && l.stop != nil {
		l.stop()
		select {
		case <-l.done:
		case <-ctx.Done():
			// Its connections are closed below, which ends the pass's calls too.
			waitErr = fmt.Errorf("the topology pass of %s/%s did not end in time: %w", c.Namespace, c.Name, ctx.Err())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(waitErr, m.forgetLocked(c))
}

// Check is a health check: it fails while a pass has run past stuckAfter.
func (m *Manager) Check() error {
	m.mu.Lock()
	loops := make([]*loop, 0, len(m.loops))
	for _, l := range m.loops {
		loops = append(loops, l)
	}
	m.mu.Unlock()
	now := m.now()
	var stuck []string
	for _, l := range loops {
		l.mu.Lock()
		if !l.running.IsZero() && now.Sub(l.running) > stuckAfter {
			stuck = append(stuck, fmt.Sprintf("%s (%s)", strings.TrimSuffix(l.key, "/"), now.Sub(l.running).Round(time.Second)))
		}
		l.mu.Unlock()
	}
	if len(stuck) > 0 {
		sort.Strings(stuck)
		return fmt.Errorf("topology passes running past %s: %s", stuckAfter, strings.Join(stuck, ", "))
	}
	return nil
}

// startLocked starts a loop's goroutine; the caller holds m.mu and m.base is set.
func (m *Manager) startLocked(l *loop) {
	ctx, cancel := context.WithCancel(m.base)
	l.stop = cancel
	go m.run(ctx, l)
}

func (m *Manager) run(ctx context.Context, l *loop) {
	defer close(l.done)
	log := logf.FromContext(ctx).WithName("topology").WithValues("MySQLCluster", strings.TrimSuffix(l.key, "/"))
	unsent := false // a changed report the reconciler has not been told of yet
	for {
		l.mu.Lock()
		c := l.cluster
		l.running = m.now()
		l.mu.Unlock()
		var r Report
		var after time.Duration
		var p probe
		if c.Spec.Paused {
			// A paused cluster is left as it is, its topology too.
			r = Report{Managed: true, Reason: mysqlv1beta1.ReasonPaused, Message: "the cluster is paused: nothing is changed"}
		} else {
			pctx, cancel := context.WithTimeout(logf.IntoContext(ctx, log), PassTimeout)
			r, after, p = m.pass(pctx, c)
			cancel()
		}
		r.Observed = m.now()
		l.mu.Lock()
		l.history = appendHistory(l.history, r.History) // a pass reports its own actions
		r.History = l.history
		changed := !r.same(l.report)
		l.report, l.running = r, time.Time{}
		l.mu.Unlock()
		if changed || unsent {
			unsent = !m.notify(c)
		}
		if after <= 0 {
			after = PollInterval // paused
		}
		if m.wait(ctx, l, jitter(after, rand.Float64()), p) == endDone {
			return
		}
	}
}

// jitter shortens a wait by up to a tenth, by the fraction f of that tenth (f in [0, 1)):
// loops started together (every cluster's, when the operator starts) drift apart instead of
// reading their instances in the same instant every second, and no wait grows past what
// the pass asked for.
func jitter(d time.Duration, f float64) time.Duration {
	return d - time.Duration(float64(d/10)*f)
}

// probe is the primary a loop watches between passes: its connection and its key in m.down.
type probe struct {
	conn mysql.Instance
	key  string
}

// waitEnd says why a wait between passes ended.
type waitEnd int

const (
	endDue   waitEnd = iota // the next pass is due
	endWake                 // the reconciler saw a change
	endProbe                // the watched primary did not answer a ping
	endDone                 // the loop is stopping
)

// wait holds the loop until the next pass is due, the reconciler wakes it or ctx ends, and
// meanwhile pings the watched primary every WatchInterval, each ping bounded by
// StatusTimeout (a ping runs on its own goroutine, so a hung primary delays neither a wake
// nor the due pass). A ping that fails marks the primary unreachable from the ping's start,
// as a pass's read would, and starts the next pass at once.
func (m *Manager) wait(ctx context.Context, l *loop, after time.Duration, p probe) waitEnd {
	due := time.NewTimer(after)
	defer due.Stop()
	var tick <-chan time.Time
	if p.conn != nil && m.WatchInterval > 0 {
		t := time.NewTicker(m.WatchInterval)
		defer t.Stop()
		tick = t.C
	}
	// A ping still out when the wait ends is cancelled, and marks nothing: the pass that
	// follows looks for itself.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan bool, 1)
	pinging := false
	for {
		select {
		case <-ctx.Done():
			return endDone
		case <-l.wake:
			return endWake
		case <-due.C:
			return endDue
		case <-tick:
			if !pinging {
				pinging = true
				go func() { answered <- m.ping(wctx, p) }()
			}
		case ok := <-answered:
			pinging = false
			if !ok {
				return endProbe
			}
		}
	}
}

// ping asks the primary for an answer within StatusTimeout; false when it gave none, with
// the primary then marked unreachable since the ping's start (unless already marked).
func (m *Manager) ping(ctx context.Context, p probe) bool {
	start := m.now()
	pctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	err := p.conn.Ping(pctx)
	cancel()
	if err == nil || ctx.Err() != nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markDownLocked(p.key, start)
	return false
}

// notify asks the reconciler to write the cluster's status, and says whether it could.
// It never waits: a loop held up by a reconciler that does not take its events would stop
// failing over. A loop whose event did not fit tries again after its next pass; the
// reconciler reads the latest report whenever it runs, so one event stands for many.
func (m *Manager) notify(c *mysqlv1beta1.MySQLCluster) bool {
	select {
	case m.changes() <- event.GenericEvent{Object: c}:
		return true
	default:
		return false
	}
}
