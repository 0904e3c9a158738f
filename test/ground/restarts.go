package ground

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// PodUIDs is each named pod's UID: a pod replaced since has another.
func PodUIDs(ctx context.Context, k8s client.Client, ns string, names ...string) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, n := range names {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod); err != nil {
			return nil, fmt.Errorf("while reading pod %s: %w", n, err)
		}
		out[n] = pod.UID
	}
	return out, nil
}

// Uptimes is each named instance's mysqld uptime in seconds (its Uptime status): one
// that restarted, in the same pod or another, starts again from 0.
func (g *Ground) Uptimes(ctx context.Context, ns, cluster string, names ...string) (map[string]int, error) {
	out := map[string]int{}
	for _, n := range names {
		d, err := g.DB(ctx, ns, cluster, n)
		if err != nil {
			return nil, err
		}
		var up int
		err = d.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'").Scan(&up)
		_ = d.Close()
		if err != nil {
			return nil, fmt.Errorf("while reading %s's uptime: %w", n, err)
		}
		out[n] = up
	}
	return out, nil
}

// RestartWatch records, every 100 ms, the order in which a cluster's pods were deleted or
// replaced, and the roll progress status.rollout reported meanwhile.
type RestartWatch struct {
	mu       sync.Mutex
	restarts []string
	rollouts []string
	done     chan struct{}
	stopped  chan struct{}
}

// WatchRestarts starts watching the named pods of a cluster, from the UIDs they have now.
func WatchRestarts(ctx context.Context, k8s client.Client, ns, cluster string, names ...string) (*RestartWatch, error) {
	uids, err := PodUIDs(ctx, k8s, ns, names...)
	if err != nil {
		return nil, err
	}
	rw := &RestartWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(rw.stopped)
		for {
			select {
			case <-rw.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			rw.look(k8s, ns, cluster, uids)
		}
	}()
	return rw, nil
}

func (rw *RestartWatch) look(k8s client.Client, ns, cluster string, uids map[string]types.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for n, uid := range uids {
		pod := &corev1.Pod{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, pod)
		changed := apierrors.IsNotFound(err) || (err == nil && (pod.UID != uid || pod.DeletionTimestamp != nil))
		if changed && !slices.Contains(rw.restarts, n) {
			rw.restarts = append(rw.restarts, n)
		}
	}
	c := &mysqlv1beta1.MySQLCluster{}
	if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c) == nil && c.Status.Rollout != nil {
		r := fmt.Sprintf("%d/%d %s", c.Status.Rollout.Updated, c.Status.Rollout.Total, c.Status.Rollout.Step)
		if len(rw.rollouts) == 0 || rw.rollouts[len(rw.rollouts)-1] != r {
			rw.rollouts = append(rw.rollouts, r)
		}
	}
}

// Order is the pods restarted so far, in order.
func (rw *RestartWatch) Order() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.restarts)
}

// Stop ends the watch (again is fine) and returns the restart order and the roll progress seen.
func (rw *RestartWatch) Stop() (order, rollouts []string) {
	select {
	case <-rw.done:
	default:
		close(rw.done)
	}
	<-rw.stopped
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return slices.Clone(rw.restarts), slices.Clone(rw.rollouts)
}

// UpdateCluster changes a cluster's spec, retrying for up to 30 s on conflicts (the
// operator writes its status meanwhile).
func UpdateCluster(t T, k8s client.Client, ns, name string, change func(*mysqlv1beta1.MySQLCluster)) {
	t.Helper()
	WaitFor(t, 30*time.Second, "the change of "+name+" to be accepted", func() error {
		c := &mysqlv1beta1.MySQLCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		change(c)
		return k8s.Update(context.Background(), c)
	})
}

// LeaseTransitions is how many times a cluster's primary Lease changed holder: one a
// switchover or failover.
func LeaseTransitions(ctx context.Context, k8s client.Client, ns, cluster string) (int32, error) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}
	l := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PrimaryLeaseName(c)}, l); err != nil {
		return 0, fmt.Errorf("while reading %s's primary Lease: %w", cluster, err)
	}
	return ptr.Deref(l.Spec.LeaseTransitions, 0), nil
}
