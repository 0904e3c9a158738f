package topology

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// clock is a settable clock for the manager.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A hung primary accepts the connection and answers nothing; each read costs the whole
// StatusTimeout. Detection counts from the start of the first unanswered read, so the
// pass after the one that saw it hang already fails over with a detection delay of two
// read timeouts and a poll.
func TestAHungPrimaryCountsFromTheFirstReadThatWentUnanswered(t *testing.T) {
	w, clk := clockedWorld(t)

	w.instances["db-0"].hang = func(context.Context) error {
		clk.add(StatusTimeout) // the read waits out its deadline
		return context.DeadlineExceeded
	}
	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonPrimaryUnavailable, d.Reason, d.Message)
	require.Contains(t, d.Message, "unreachable for 2s")
	require.Empty(t, w.logged(), "nothing is done within the detection delay")

	clk.add(PollInterval)
	d = w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonFailover, d.Reason, d.Message)
	require.ElementsMatch(t, []string{"db-1 StopReplication all=false", "db-2 StopReplication all=false"}, strings.Split(w.logged(), "\n"))
	in := w.m.gather(context.Background(), mustLoad(t, w))
	require.Equal(t, mysql.FaultNoAnswer, in.Instances[0].Fault, "a hung instance is told apart from a refused one")
	w.instances["db-0"].hang = nil
	w.instances["db-0"].down = true
	in = w.m.gather(context.Background(), mustLoad(t, w))
	require.Equal(t, mysql.FaultRefused, in.Instances[0].Fault)
}

// A primary slowed down (a busy node: a fresh TLS session and the status queries took a
// second) that missed one read is not failed over for being slower than
// DownStatusTimeout: while its detection delay runs it gets the whole StatusTimeout.
func TestASlowPrimaryThatMissedOneReadIsNotFailedOver(t *testing.T) {
	w, clk := clockedWorld(t)

	missed := false
	w.instances["db-0"].hang = func(ctx context.Context) error {
		deadline, _ := ctx.Deadline()
		if !missed || time.Until(deadline) < time.Second {
			missed = true
			clk.add(time.Until(deadline).Round(100 * time.Millisecond)) // waits it out
			return context.DeadlineExceeded
		}
		clk.add(time.Second)
		return nil // answers after a second
	}
	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonPrimaryUnavailable, d.Reason, d.Message)
	for range 3 {
		clk.add(PollInterval)
		d = w.pass(t)
		require.True(t, d.Healthy, "%s: %s", d.Reason, d.Message)
	}
	require.Empty(t, w.logged(), "nothing was done to a primary that answers")
}

// clockedWorld is a settled world with db-0 primary whose Manager reads the clock
// returned, with a detection delay of two read timeouts and a poll.
func clockedWorld(t *testing.T) (*world, *clock) {
	t.Helper()
	w := newWorld(t)
	clk := &clock{t: time.Unix(1000, 0)}
	w.m.Now = clk.now
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 2*StatusTimeout + PollInterval}
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	return w, clk
}

func mustLoad(t *testing.T, w *world) *cluster {
	t.Helper()
	cl, err := w.m.load(context.Background(), w.c)
	require.NoError(t, err)
	return cl
}

// CLONE runs for as long as the copy takes: a pass only starts it and later passes only
// look, so passes keep their pace while it runs, and nothing else is asked of the recipient.
func TestACloneRunsOffThePassAndIsOnlyObserved(t *testing.T) {
	w := newWorld(t)
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.instances["db-0"].status.GTIDPurged = u1 + ":1-3"
	w.instances["db-1"].status = mysql.Status{ReadOnly: true, SuperReadOnly: true} // empty: lacks purged transactions
	gate := make(chan struct{})
	w.instances["db-1"].cloneGate = gate

	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonCloning, d.Reason, d.Message)
	require.Eventually(t, func() bool { return strings.Contains(w.logged(), "db-1 Clone") }, 5*time.Second, 10*time.Millisecond)
	for range 3 {
		d = w.pass(t)
		require.Equal(t, mysqlv1beta1.ReasonCloning, d.Reason, d.Message)
		require.Contains(t, d.Message, "db-1 is being cloned")
		require.Empty(t, w.logged(), "a running clone is observed, not started again, and its recipient is left alone")
	}
	close(gate)
	require.Eventually(t, func() bool { return !w.m.cloning(mustLoad(t, w), "db-1") }, 5*time.Second, 10*time.Millisecond)
	// Still lacking the transactions (the fake's data did not change): the next clone
	// waits for cloneRetryDelay instead of starting again at once.
	r, _, _ := w.m.pass(context.Background(), w.c)
	require.Contains(t, r.Message, "the last clone into db-1 ended")
	require.NotContains(t, w.logged(), "db-1 PrepareClone")
}

// The clone status the recipient reports is believed over the manager's memory (an
// operator restarted mid-clone has none).
func TestACloneInProgressOnTheServerIsLeftAlone(t *testing.T) {
	w := newWorld(t)
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.instances["db-1"].status.Clone = &mysql.CloneStatus{State: mysql.CloneInProgress}
	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonCloning, d.Reason, d.Message)
	require.Empty(t, w.logged())
}

// Each cluster has its own loop: a cluster whose every call hangs holds only its own.
func TestAClusterWhoseDatabasesHangCostsAnotherNothing(t *testing.T) {
	w := newWorld(t, "other")
	release := make(chan struct{})
	for _, n := range []string{"db-0", "db-1", "db-2"} {
		// Worse than a hung mysqld: the call ignores its deadline too.
		w.instances[n].hang = func(context.Context) error { <-release; return context.DeadlineExceeded }
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- w.m.Start(ctx) }()
	defer func() { close(release); cancel(); require.NoError(t, <-started) }()

	w.m.Observe(ctx, w.clusters["db"])
	other := w.clusters["other"]
	require.Eventually(t, func() bool { return w.m.Observe(ctx, other).CurrentPrimary == "other-0" }, 10*time.Second, 20*time.Millisecond,
		"the other cluster bootstraps while every pass of db hangs")
	select {
	case ev := <-w.m.Changes():
		require.NotNil(t, ev.Object)
	case <-time.After(5 * time.Second):
		t.Fatal("no change was announced to the reconciler")
	}
	r := w.m.Observe(ctx, w.clusters["db"])
	require.True(t, r.Observed.IsZero(), "db's first pass has not ended: %+v", r)
	require.Equal(t, mysqlv1beta1.ReasonWaitingForInstances, r.Reason)
}

// A reconciler that takes no events (its channel full) holds no loop up: the cluster is
// still bootstrapped, and its event is sent once there is room.
func TestAFullChangesChannelHoldsNoLoopUp(t *testing.T) {
	w := newWorld(t)
	w.m.events = make(chan event.GenericEvent, 1)
	w.m.events <- event.GenericEvent{Object: w.clusters["db"]} // nobody reads it
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- w.m.Start(ctx) }()
	defer func() { cancel(); require.NoError(t, <-started) }()

	w.m.Observe(ctx, w.c)
	// Bootstrapped and then, passes later, the replicas pointed at the primary.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.log, "db-1 ConfigureReplica 10.0.0.1")
	}, 10*time.Second, 20*time.Millisecond, "the loop goes on while its events cannot be delivered")
	<-w.m.Changes() // the reconciler catches up
	select {
	case ev := <-w.m.Changes():
		require.Equal(t, "db", ev.Object.GetName())
	case <-time.After(5 * time.Second):
		t.Fatal("the event that did not fit was never sent")
	}
}

func TestCheckFailsWhileAPassOutlivesItsDeadlines(t *testing.T) {
	w := newWorld(t)
	clk := &clock{t: time.Unix(1000, 0)}
	w.m.Now = clk.now
	w.m.loops = map[string]*loop{clusterKey(w.c): {key: clusterKey(w.c), running: clk.now()}}
	require.NoError(t, w.m.Check())
	clk.add(stuckAfter + time.Second)
	err := w.m.Check()
	require.ErrorContains(t, err, "ns/db")
}

// Forget stops the loop and drops the cluster's connections; a later Observe starts anew.
func TestForgetStopsTheLoop(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- w.m.Start(ctx) }()
	defer func() { cancel(); require.NoError(t, <-started) }()
	require.Eventually(t, func() bool { return w.m.Observe(ctx, w.c).CurrentPrimary == "db-0" }, 10*time.Second, 20*time.Millisecond)
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	require.NoError(t, w.m.Forget(fctx, w.c))
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	require.Empty(t, w.m.loops)
	require.Empty(t, w.m.conns)
}

// A hung primary whose pod still runs is evicted (its kubelet kills mysqld) in the pass
// that freezes the receivers, and the successor is promoted once the pod is gone.
func TestAHungPrimaryIsEvictedBeforeItsSuccessorIsPromoted(t *testing.T) {
	w := hungPrimary(t, nil, func() {})
	ctx := context.Background()
	p := &corev1.Pod{}

	w.pass(t)
	require.ElementsMatch(t, []string{"db-1 StopReplication all=false", "db-2 StopReplication all=false"}, strings.Split(w.logged(), "\n"))
	err := w.m.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-0"}, p)
	require.True(t, apierrors.IsNotFound(err), "the hung primary's pod is deleted: %v", err)
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	d := w.pass(t)
	require.Equal(t, "db-1", d.Primary, d.Message)
	require.Equal(t, "db-1", w.holder(t))
}

// Once the hung primary's pod is being deleted, the passes that wait for its kubelet do not
// ask it again (each would wait out DownStatusTimeout on it).
func TestAnEvictedPrimaryIsNotAskedAgain(t *testing.T) {
	asked := 0
	// A finalizer, so that the deletion leaves a pod being deleted.
	w := hungPrimary(t, []string{"test/keep"}, func() { asked++ })
	ctx := context.Background()
	p := &corev1.Pod{}

	w.pass(t) // freezes and evicts
	require.NoError(t, w.m.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-0"}, p))
	require.NotNil(t, p.DeletionTimestamp)
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	asked = 0
	d := w.pass(t)
	require.Zero(t, asked, "the evicted primary was asked again")
	require.Contains(t, d.Message, "waiting for its kubelet", d.Message)
}

// hungPrimary is a world whose primary db-0 (detection delay 0) has a running mysqld
// container, the given finalizers, and hangs from now on (each read calls asked).
func hungPrimary(t *testing.T, finalizers []string, asked func()) *world {
	t.Helper()
	w := newWorld(t)
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 0}
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	ctx := context.Background()
	p := &corev1.Pod{}
	require.NoError(t, w.m.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-0"}, p))
	if finalizers != nil {
		p.Finalizers = finalizers
		require.NoError(t, w.m.Client.Update(ctx, p))
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.ContainerMySQL,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	require.NoError(t, w.m.Client.Status().Update(ctx, p))
	w.instances["db-0"].hang = func(context.Context) error { asked(); return context.DeadlineExceeded }
	return w
}

// settledProbe runs passes until the cluster "db" is settled and returns what the last
// pass asks the loop to watch.
func settledProbe(t *testing.T, w *world) probe {
	t.Helper()
	_, _, p := w.m.pass(context.Background(), w.c)
	require.Nil(t, p.conn, "a pass that changes something watches nothing")
	w.replicate("db-0", u1+":1-5")
	_, _, p = w.m.pass(context.Background(), w.c)
	require.NotNil(t, p.conn, "a settled pass watches its primary")
	return p
}

// Between passes the loop pings the primary; one that refuses is marked unreachable from
// that ping's start and the next pass starts at once, instead of up to a PollInterval later.
func TestTheWatchFindsARefusingPrimaryBetweenPasses(t *testing.T) {
	w := newWorld(t)
	clk := &clock{t: time.Unix(1000, 0)}
	w.m.Now, w.m.WatchInterval = clk.now, 5*time.Millisecond
	p := settledProbe(t, w)
	l := &loop{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	require.Equal(t, endDue, w.m.wait(ctx, l, 100*time.Millisecond, p), "a primary that answers lets the wait run out")

	w.instances["db-0"].down = true
	refused := clk.now()
	require.Equal(t, endProbe, w.m.wait(ctx, l, time.Hour, p))
	clk.add(1500 * time.Millisecond)
	in := w.m.gather(context.Background(), mustLoad(t, w))
	require.Equal(t, 1500*time.Millisecond, in.Instances[0].UnreachableFor, "counted from the ping that found it, at %s", refused)
}

// A ping that hangs holds neither the reconciler's wake nor the loop's stop, and, cut
// short by the wait's end, marks nothing.
func TestAHangingPingHoldsNoWakeUp(t *testing.T) {
	w := newWorld(t)
	w.m.WatchInterval = 5 * time.Millisecond
	p := settledProbe(t, w)
	l := &loop{wake: make(chan struct{}, 1)}
	pinged, returned := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.instances["db-0"].hang = func(ctx context.Context) error {
		once.Do(func() { close(pinged) })
		<-ctx.Done()
		defer close(returned)
		return ctx.Err()
	}
	go func() { <-pinged; l.wake <- struct{}{} }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Equal(t, endWake, w.m.wait(ctx, l, time.Hour, p))
	<-returned
	time.Sleep(50 * time.Millisecond) // the ping's goroutine decides whether to mark
	w.m.mu.Lock()
	_, marked := w.m.down[p.key]
	w.m.mu.Unlock()
	require.False(t, marked, "a ping cancelled by the wait's end is no observation")
}

// A wait is shortened by at most a tenth, never lengthened: the longest gap between two
// passes stays PollInterval.
func TestJitterShortensAWaitByAtMostATenth(t *testing.T) {
	for _, f := range []float64{0, 0.25, 0.5, 0.999999} {
		got := jitter(PollInterval, f)
		if got > PollInterval || got <= PollInterval-PollInterval/10 {
			t.Errorf("jitter(%s, %v) = %s, want in (%s, %s]", PollInterval, f, got, PollInterval-PollInterval/10, PollInterval)
		}
	}
	if a, b := jitter(PollInterval, 0.1), jitter(PollInterval, 0.9); a <= b {
		t.Errorf("a larger fraction must shorten more: %s, %s", a, b)
	}
	if got := jitter(time.Millisecond, 0.5); got <= 0 {
		t.Errorf("a millisecond wait jittered to %s", got)
	}
}

// A cluster none of whose instances answers is looked at every UnreachableInterval (the
// pass's own time counts), never sooner than PollInterval after a pass; any instance
// answering, anything to do or a shorter wait asked for keeps the usual pace.
func TestNextWaitsLongerOnlyWhenNoInstanceAnswers(t *testing.T) {
	down := []Instance{{Name: "db-0"}, {Name: "db-1"}, {Name: "db-2"}}
	oneUp := []Instance{{Name: "db-0"}, {Name: "db-1", Reachable: true}, {Name: "db-2"}}
	for _, tc := range []struct {
		name string
		in   []Instance
		d    Decision
		took time.Duration
		want time.Duration
	}{
		{"every instance down, a quick pass", down, Decision{}, 10 * time.Millisecond, UnreachableInterval - 10*time.Millisecond},
		{"every instance down, a pass of silent dials", down, Decision{}, 2500 * time.Millisecond, PollInterval},
		{"one instance answers", oneUp, Decision{}, 10 * time.Millisecond, PollInterval},
		{"no pods yet", nil, Decision{}, time.Millisecond, PollInterval},
		{"every instance down, an action to retry", down, Decision{Actions: []Action{{Kind: ActEvict, Target: "db-0"}}}, time.Millisecond, PollInterval},
		{"every instance down, a sooner look asked for", down, Decision{RequeueAfter: 200 * time.Millisecond}, time.Millisecond, 200 * time.Millisecond},
		{"every instance down, a new cluster's wait", down, Decision{RequeueAfter: 2 * time.Second}, 10 * time.Millisecond, UnreachableInterval - 10*time.Millisecond},
		{"a sooner look asked for", oneUp, Decision{RequeueAfter: 200 * time.Millisecond}, time.Millisecond, 200 * time.Millisecond},
		{"a later look asked for", oneUp, Decision{RequeueAfter: time.Minute}, time.Millisecond, PollInterval},
	} {
		if got := next(Input{Instances: tc.in}, tc.d, tc.took); got != tc.want {
			t.Errorf("%s: next = %s, want %s", tc.name, got, tc.want)
		}
	}
}
