package topology

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func TestPodState(t *testing.T) {
	now := time.Unix(1000, 0)
	running := []corev1.ContainerStatus{{Name: resources.ContainerMySQL, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	deleting := func(ago time.Duration, containers []corev1.ContainerStatus) *corev1.Pod {
		ts := metav1.NewTime(now.Add(-ago).Add(time.Second)) // deletionTimestamp: the request plus the 1 s grace
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &ts, DeletionGracePeriodSeconds: new(int64(1))},
			Status: corev1.PodStatus{ContainerStatuses: containers}}
	}
	for _, tc := range []struct {
		name              string
		pod               *corev1.Pod
		evicting, stopped bool
		asked             time.Time
	}{
		{"no pod", nil, false, true, time.Time{}},
		{"running", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: running}}, false, false, time.Time{}},
		{"mysqld not running", &corev1.Pod{}, false, true, time.Time{}},
		{"evicted, still running", deleting(time.Minute, running), true, false, now.Add(-time.Minute)},
		{"evicted, its kubelet reports mysqld stopped", deleting(time.Second, nil), true, true, now.Add(-time.Second)},
	} {
		e, s, asked := podState(tc.pod)
		require.Equal(t, tc.evicting, e, tc.name)
		require.Equal(t, tc.stopped, s, tc.name)
		require.True(t, tc.asked.Equal(asked), "%s: asked at %s, want %s", tc.name, asked, tc.asked)
	}
}

func TestEvictionOver(t *testing.T) {
	asked := time.Unix(1000, 0)
	before, after := asked.Add(-3*time.Second), asked.Add(time.Second)
	for _, tc := range []struct {
		name    string
		since   time.Duration
		renewed time.Time
		over    bool
	}{
		{"within the kubelet's grace, whatever its Lease", 2 * time.Second, time.Time{}, false},
		{"just short of the wait, its kubelet silent", EvictionWait - time.Millisecond, before, false},
		{"past the wait, its kubelet silent since the deletion", EvictionWait, before, true},
		{"past the wait, its node Lease unreadable", EvictionWait, time.Time{}, true},
		{"past the wait, its kubelet alive since the deletion", EvictionWait, after, false},
		{"its kubelet alive, just short of the cap", EvictionCap - time.Millisecond, after, false},
		{"its kubelet alive, past the cap", EvictionCap, after, true},
	} {
		require.Equal(t, tc.over, evictionOver(asked, asked.Add(tc.since), tc.renewed), tc.name)
	}
}

// An evicted primary whose kubelet has not reported mysqld stopped: its successor is not
// promoted while that kubelet shows it is alive (it renewed its node Lease after the
// deletion), up to EvictionCap; once the kubelet reports, or its port refuses connections,
// or when it shows no sign of life past EvictionWait (a lost node), the successor is
// promoted.
func TestAPromotionWaitsForALiveKubeletsReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    time.Duration // the pass, after the deletion was asked
		renewed  time.Duration // the node Lease's renewal, after the deletion (none: no Lease)
		lease    bool
		reported bool // the kubelet reports mysqld stopped
		closed   bool // its port refuses connections
		promoted bool
	}{
		{"within the wait", EvictionWait - time.Second, 0, false, false, false, false},
		{"a live kubelet, past the wait", EvictionWait + time.Second, time.Second, true, false, false, false},
		{"a live kubelet that reported", EvictionWait - time.Second, time.Second, true, true, false, true},
		{"a live kubelet, past the cap", EvictionCap, time.Second, true, false, false, true},
		{"a silent kubelet, past the wait", EvictionWait, -5 * time.Second, true, false, false, true},
		{"no node Lease, past the wait", EvictionWait, 0, false, false, false, true},
		{"its port refuses, within the wait", time.Second, 0, false, false, true, true},
		{"its port refuses, a live kubelet that has not reported", EvictionWait + time.Second, time.Second, true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := hungPrimary(t, []string{"test/keep"}, func() {})
			ctx := context.Background()
			p := &corev1.Pod{}
			key := client.ObjectKey{Namespace: "ns", Name: "db-0"}
			require.NoError(t, w.m.Client.Get(ctx, key, p))
			p.Spec.NodeName = "node-a"
			require.NoError(t, w.m.Client.Update(ctx, p))
			w.pass(t) // freezes and evicts
			require.NoError(t, w.m.Client.Get(ctx, key, p))
			require.NotNil(t, p.DeletionTimestamp)
			_, _, asked := podState(p)
			for _, n := range []string{"db-1", "db-2"} {
				w.instances[n].status.Replica.IORunning = false
			}
			if tc.lease {
				renewed := metav1.NewMicroTime(asked.Add(tc.renewed))
				require.NoError(t, w.m.Client.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: nodeLeaseNamespace, Name: "node-a"},
					Spec:       coordinationv1.LeaseSpec{RenewTime: &renewed}}))
			}
			w.instances["db-0"].closed = tc.closed
			if tc.reported {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
				require.NoError(t, w.m.Client.Status().Update(ctx, p))
			}
			w.m.Now = func() time.Time { return asked.Add(tc.after) }
			d := w.pass(t)
			if tc.promoted {
				require.Equal(t, "db-1", w.holder(t), d.Message)
				return
			}
			require.Equal(t, "db-0", w.holder(t), d.Message)
			require.Contains(t, d.Message, "waiting for its kubelet", d.Message)
		})
	}
}

// knock's dial: a connection accepted says nothing, a refusal is FaultRefused, and a
// refusal of an evicted primary's port is errDeleting with the dial's error.
func TestKnock(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, dialClose(ctx, addr), "something listens")
	require.NoError(t, l.Close())
	err = dialClose(ctx, addr)
	require.Equal(t, mysql.FaultRefused, mysql.Classify(err), "%v", err)

	w := newWorld(t)
	cl := mustLoad(t, w)
	err = w.m.knock(ctx, cl.pods["db-0"])
	require.ErrorIs(t, err, errDeleting)
	require.NotEqual(t, mysql.FaultRefused, mysql.Classify(err), "an accepted connection proves nothing: %v", err)
	w.instances["db-0"].closed = true
	err = w.m.knock(ctx, cl.pods["db-0"])
	require.ErrorIs(t, err, errDeleting)
	require.Equal(t, mysql.FaultRefused, mysql.Classify(err), "%v", err)
	require.ErrorContains(t, err, "nothing listens at its port")
}
