package topology

import (
	"context"
	"fmt"
	"net"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// A failover evicts a primary that is there but does not answer, and promotes its successor
// only once no mysqld of it can still run: two writable instances at once is what the
// promotion must never make, even when nothing either takes is acknowledged.
//
// The evicted pod's grace period is a second, but its kubelet waits at least two seconds
// between SIGTERM and SIGKILL (the kubelet's minimum), and the mysqld container's fence
// (read-only pending, client sessions ended) may take all of it: 1.6 s was seen in a chaos
// round whose successor, promoted by an earlier two-second fallback, was writable beside it.
// So the kubelet's report that mysqld stopped is what a promotion waits for, or a refusal
// at the pod's MySQL port, which comes sooner: the kubelet reports only once the pod's
// sandbox and network are torn down as well (1.9 s after mysqld ended, in the hung-primary
// run examined on the test ground), while its address refuses connections as soon as no
// mysqld listens there (see knock). Only a kubelet that cannot report (its node is lost) is not waited for: after
// EvictionWait, a pod whose
// node's kubelet has not renewed its node Lease since the deletion was asked is taken as
// stopped (its mysqld can commit nothing acknowledged: the frozen replicas send no
// acknowledgement). One whose kubelet did renew it is waited for up to EvictionCap. (The
// renewal is stamped by the node's clock, the deletion by the API server's: a lost kubelet
// renewed its Lease before the detection delay began, seconds before the eviction, so it
// takes a skew of that size to mistake one case for the other.)
const (
	evictionGrace = 1
	// EvictionWait is how long after the deletion a pod whose kubelet shows no sign of
	// life is taken as stopped: the kubelet's two-second minimum grace, and three seconds
	// for its report to reach the operator's cache.
	EvictionWait = 5 * time.Second
	// EvictionCap bounds the wait on a kubelet that is alive but does not report.
	EvictionCap = 30 * time.Second
	// nodeLeaseTimeout bounds reading a node's Lease.
	nodeLeaseTimeout = time.Second
)

// nodeLeaseNamespace holds each kubelet's heartbeat: a Lease named after its node, renewed
// every quarter of its duration (10 s by default).
const nodeLeaseNamespace = "kube-node-lease"

// podStates fills each instance's Evicting and Stopped from its pod as last read and from
// the deletions this manager asked for.
func (m *Manager) podStates(ctx context.Context, cl *cluster, instances []Instance) {
	now := m.now()
	for k := range instances {
		i := &instances[k]
		pod := cl.pods[i.Name]
		var asked time.Time
		i.Evicting, i.Stopped, asked = podState(pod)
		if i.Evicting && i.Fault == mysql.FaultRefused {
			i.Stopped = true // nothing listens at its port (knock)
		}
		if i.Evicting && !i.Stopped {
			var renewed time.Time
			if since := now.Sub(asked); since >= EvictionWait && since < EvictionCap {
				renewed = m.kubeletRenewed(ctx, pod.Spec.NodeName)
			}
			i.Stopped = evictionOver(asked, now, renewed)
		}
		i.Evicting = i.Evicting || m.evictionAsked(cl, i.Name)
	}
}

// knock is what a pass asks of an evicted primary whose pod is being deleted: a TCP
// connection to its MySQL port, opened and closed, no query. A refusal says that nothing
// listens there: its mysqld was killed, or has begun its shutdown (which closes the
// listeners first, after the container's fence ended its client sessions), and its
// kubelet starts no other in a pod being deleted. It returns errDeleting, joined with the
// dial's error when that was a refusal (then its fault is FaultRefused). A connection that
// is accepted (a hung mysqld's kernel still accepts them) or a dial that gets no answer in
// KnockTimeout (a lost node, a partition) proves nothing, and the wait goes on. A refusal
// is taken as the pod's own answer, as the decision takes a primary's refusal before it:
// a network policy that rejects the operator's connections instead of dropping them
// would be mistaken for it.
func (m *Manager) knock(ctx context.Context, pod *corev1.Pod) error {
	addr, err := podAddr(pod)
	if err != nil {
		return err
	}
	knock := m.Knock
	if knock == nil {
		knock = dialClose
	}
	if err := knock(ctx, addr); mysql.Classify(err) == mysql.FaultRefused {
		return fmt.Errorf("%w; nothing listens at its port: %w", errDeleting, err)
	}
	return errDeleting
}

// dialClose connects to addr over TCP within KnockTimeout and closes the connection.
func dialClose(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, KnockTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// podState says whether an instance's pod is being deleted (and since when the deletion
// was asked) and whether its kubelet reports that no mysqld of it runs.
func podState(pod *corev1.Pod) (evicting, stopped bool, asked time.Time) {
	if pod == nil {
		return false, true, time.Time{}
	}
	if pod.DeletionTimestamp != nil {
		evicting = true
		// The API server keeps whole seconds: asked may be up to a second before the
		// request, so the waits counted from it may end up to a second early.
		asked = pod.DeletionTimestamp.Time
		if g := pod.DeletionGracePeriodSeconds; g != nil {
			asked = asked.Add(-time.Duration(*g) * time.Second)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == resources.ContainerMySQL {
			return evicting, cs.State.Running == nil, asked
		}
	}
	return evicting, true, asked
}

// evictionOver says whether a pod whose deletion was asked at asked, and whose kubelet has
// not reported its mysqld stopped, is taken as stopped at now: past EvictionCap, or past
// EvictionWait when its kubelet last renewed its node Lease (renewed, zero when unknown)
// before the deletion.
func evictionOver(asked, now, renewed time.Time) bool {
	since := now.Sub(asked)
	switch {
	case since >= EvictionCap:
		return true
	case since < EvictionWait:
		return false
	default:
		return renewed.Before(asked)
	}
}

// kubeletRenewed is when the node's kubelet last renewed its node Lease; zero when that
// cannot be read (no node, no Lease: a deleted node's goes with it, or an error, logged).
// Read past the cache: a cache limited to the watched namespaces holds no node Lease.
func (m *Manager) kubeletRenewed(ctx context.Context, node string) time.Time {
	if node == "" {
		return time.Time{}
	}
	r := m.Reader
	if r == nil {
		r = m.Client
	}
	ctx, cancel := context.WithTimeout(ctx, nodeLeaseTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: nodeLeaseNamespace, Name: node}, lease); err != nil {
		if !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Info("Could not read the node Lease of an evicted pod", "node", node, "error", err.Error())
		}
		return time.Time{}
	}
	if lease.Spec.RenewTime == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Time
}

// evictionAsked says whether this manager asked for the deletion of the instance's current
// pod (which the cache may not show yet), forgetting an eviction whose pod is gone.
func (m *Manager) evictionAsked(cl *cluster, name string) bool {
	key := clusterKey(cl.obj) + name
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.evicted[key]
	if !ok {
		return false
	}
	if pod := cl.pods[name]; pod == nil || pod.UID != uid {
		delete(m.evicted, key)
		return false
	}
	return true
}
