package olm

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Timeline records the states OLM's objects in one namespace go through (Subscriptions,
// InstallPlans, CSVs), each with the time since the timeline started, and prints every
// change as it sees it: the log of an install or upgrade, with its timings.
type Timeline struct {
	k8s   client.Client
	ns    string
	start time.Time
	log   io.Writer
	mu    sync.Mutex
	first map[string]time.Duration // "<object> <state>" -> first seen
	last  map[string]string        // object -> its state when last polled
	stop  chan struct{}
	done  chan struct{}
}

// Watch starts a timeline of namespace ns, polling every 100 ms.
func (m *OLM) Watch(ns string, log io.Writer) *Timeline {
	t := &Timeline{k8s: m.k8s, ns: ns, start: time.Now(), log: log, first: map[string]time.Duration{},
		last: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			t.poll()
			select {
			case <-t.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return t
}

// Stop ends the polling.
func (t *Timeline) Stop() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
}

// At says when object (e.g. "CSV dolphin-operator.v0.1.0") was first seen in state, waiting
// up to five seconds for the timeline's poll to catch up with what a test saw itself.
func (t *Timeline) At(object, state string) (time.Duration, bool) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if d, ok := t.Seen(object, state); ok || time.Now().After(deadline) {
			return d, ok
		}
	}
}

// Seen says whether, and when, object has been seen in state so far.
func (t *Timeline) Seen(object, state string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.first[object+" "+state]
	return d, ok
}

// Mark records an event of the test's own (the new catalog published, say) in the log.
func (t *Timeline) Mark(event string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := time.Since(t.start)
	t.first[event] = d
	fmt.Fprintf(t.log, "olm timeline %7.2fs  %s\n", d.Seconds(), event)
	return d
}

func (t *Timeline) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states := map[string]string{}
	subs := &operatorsv1alpha1.SubscriptionList{}
	plans := &operatorsv1alpha1.InstallPlanList{}
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	for _, l := range []client.ObjectList{subs, plans, csvs} {
		// A failed list would read as every object deleted: skip the round instead.
		if t.k8s.List(ctx, l, client.InNamespace(t.ns)) != nil {
			return
		}
	}
	for _, s := range subs.Items {
		states["Subscription "+s.Name] = fmt.Sprintf("%s current=%s installed=%s", s.Status.State, s.Status.CurrentCSV, s.Status.InstalledCSV)
	}
	for _, p := range plans.Items {
		states["InstallPlan "+p.Name] = fmt.Sprintf("%s %v", p.Status.Phase, p.Spec.ClusterServiceVersionNames)
	}
	for _, c := range csvs.Items {
		states["CSV "+c.Name] = string(c.Status.Phase)
		if c.Status.Reason != "" {
			states["CSV "+c.Name] += " (" + string(c.Status.Reason) + ")"
		}
	}
	t.record(states)
}

func (t *Timeline) record(states map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := time.Since(t.start)
	for obj, st := range states {
		if t.last[obj] == st {
			continue
		}
		t.last[obj] = st
		if _, seen := t.first[obj+" "+st]; !seen {
			t.first[obj+" "+st] = d
		}
		// The phase alone (without the details) is what At looks up.
		if phase, _, _ := strings.Cut(st, " "); phase != st {
			if _, seen := t.first[obj+" "+phase]; !seen {
				t.first[obj+" "+phase] = d
			}
		}
		fmt.Fprintf(t.log, "olm timeline %7.2fs  %s: %s\n", d.Seconds(), obj, st)
	}
	for obj := range t.last {
		if _, ok := states[obj]; !ok {
			delete(t.last, obj)
			t.first[obj+" deleted"] = d
			fmt.Fprintf(t.log, "olm timeline %7.2fs  %s: deleted\n", d.Seconds(), obj)
		}
	}
}
