package main

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/workload"
)

const ns, name = "bench", "bench"

type bench struct {
	g   *ground.Ground
	k8s client.Client
	// service writes through the primary Service (DNS, ClusterIP, kube-proxy) as an
	// application does; direct follows the Service's ready endpoint itself and dials that
	// pod's IP, as the benchmark's writer did before the ground had real nodes: the
	// operator's part without Kubernetes' plumbing, measured in the same run.
	service, direct *workload.Writer
	key             client.ObjectKey
}

// result is one measurement: what each writer saw, and the acknowledged writes missing on
// the primary afterwards (both writers').
type result struct {
	service, direct time.Duration
	lost            int
}

func newBench(ctx context.Context, g *ground.Ground, delay time.Duration) (*bench, error) {
	k8s, err := g.Client()
	if err != nil {
		return nil, err
	}
	b := &bench{g: g, k8s: k8s, key: client.ObjectKey{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	size := resource.MustParse("1Gi")
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)), Storage: mysqlv1beta1.StorageSpec{Size: &size},
			MySQL: mysqlv1beta1.MySQLSpec{Version: g.MySQLSeries()}}}
	c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: delay}
	if err := k8s.Create(ctx, c); err != nil {
		return nil, err
	}
	if _, err := b.settled(ctx, ""); err != nil {
		return nil, err
	}
	if b.service, err = workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, ns, name, ground.ServiceHost(ns, name+"-primary"))
	}); err != nil {
		return nil, err
	}
	if b.direct, err = workload.StartWriterInto(ctx, "direct", func(ctx context.Context) (*sql.DB, error) {
		pod := workload.PrimaryEndpoint(ctx, k8s, ns, name)
		if pod == "" {
			return nil, fmt.Errorf("the primary Service has no ready endpoint")
		}
		return g.DB(ctx, ns, name, pod)
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// settled waits for a healthy cluster whose primary (want, when given) is behind the
// primary Service, and returns the primary.
func (b *bench) settled(ctx context.Context, want string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c := &mysqlv1beta1.MySQLCluster{}
	for {
		err := b.k8s.Get(ctx, b.key, c)
		if err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) &&
			(want == "" || c.Status.CurrentPrimary == want) &&
			workload.PrimaryEndpoint(ctx, b.k8s, ns, name) == c.Status.CurrentPrimary && b.allReplicas(ctx, c) {
			return c.Status.CurrentPrimary, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the cluster did not settle (primary %q, conditions %v): %w", c.Status.CurrentPrimary, c.Status.Conditions, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *bench) allReplicas(ctx context.Context, c *mysqlv1beta1.MySQLCluster) bool {
	pods := &corev1.PodList{}
	if err := b.k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return false
	}
	replicas := 0
	for _, p := range pods.Items {
		if p.Labels[resources.LabelRole] == string(resources.RoleReplica) {
			replicas++
		}
	}
	return replicas == len(pods.Items)-1
}

// switchover moves the primary to the next instance and measures the longest time each
// writer went without an acknowledged write.
func (b *bench) switchover(ctx context.Context) (result, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := b.k8s.Get(ctx, b.key, c); err != nil {
		return result{}, err
	}
	target := next(c.Status.CurrentPrimary)
	start := time.Now()
	c.Spec.Primary = target
	if err := b.k8s.Update(ctx, c); err != nil {
		return result{}, err
	}
	if _, err := b.settled(ctx, target); err != nil {
		return result{}, err
	}
	now := time.Now()
	var r result
	for _, m := range []struct {
		w   *workload.Writer
		gap *time.Duration
	}{{b.service, &r.service}, {b.direct, &r.direct}} {
		end, err := m.w.AckedAfter(ctx, now)
		if err != nil {
			return result{}, err
		}
		*m.gap = m.w.LongestGap(start, end)
	}
	var err error
	r.lost, err = b.lost(ctx, target)
	return r, err
}

// firstAcks is how long after t each writer had a write acknowledged.
func (b *bench) firstAcks(ctx context.Context, t time.Time) (result, error) {
	s, err := b.service.AckedAfter(ctx, t)
	if err != nil {
		return result{}, fmt.Errorf("the writer through the Service: %w", err)
	}
	d, err := b.direct.AckedAfter(ctx, t)
	if err != nil {
		return result{}, fmt.Errorf("the writer to the endpoint: %w", err)
	}
	return result{service: s.Sub(t), direct: d.Sub(t)}, nil
}

// primaryPod reads the cluster and its primary's pod.
func (b *bench) primaryPod(ctx context.Context) (*mysqlv1beta1.MySQLCluster, *corev1.Pod, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := b.k8s.Get(ctx, b.key, c); err != nil {
		return nil, nil, err
	}
	pod := &corev1.Pod{}
	if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Status.CurrentPrimary}, pod); err != nil {
		return nil, nil, err
	}
	return c, pod, nil
}

// crash kills the primary's mysqld (SIGKILL from its node; kubelet restarts the container)
// and measures from the kill to the first write acknowledged after it, by whichever
// instance the operator then makes primary; then it waits for the cluster to settle.
func (b *bench) crash(ctx context.Context) (result, error) {
	c, pod, err := b.primaryPod(ctx)
	if err != nil {
		return result{}, err
	}
	// Timed once the signal is delivered: a write acknowledged just before is not a write
	// after the kill.
	if err := b.g.Signal(pod, "mysqld", "mysqld", syscall.SIGKILL); err != nil {
		return result{}, err
	}
	killed := time.Now()
	r, err := b.firstAcks(ctx, killed)
	if err != nil {
		return result{}, err
	}
	primary, err := b.settled(ctx, c.Spec.Primary)
	if err != nil {
		return result{}, err
	}
	r.lost, err = b.lost(ctx, primary)
	return r, err
}

// down kills the primary's mysqld and keeps it down while it measures: the container's first
// process (the shell that runs mysqld and would exit with it) is stopped first, so that the
// kubelet, which sees the container still running, restarts nothing. That is the ground the
// failover was measured on before the test ground had real nodes (a killed mysqld that stays
// down, with no restart to race). It measures from the kill to the first write acknowledged
// after it, then resumes the shell (the container exits and the kubelet restarts it) and
// waits for the cluster to settle.
func (b *bench) down(ctx context.Context) (result, error) {
	c, pod, err := b.primaryPod(ctx)
	if err != nil {
		return result{}, err
	}
	shell, err := b.g.ContainerPID(pod, "mysqld")
	if err != nil {
		return result{}, err
	}
	if err := syscall.Kill(shell, syscall.SIGSTOP); err != nil {
		return result{}, fmt.Errorf("while stopping the shell of %s: %w", pod.Name, err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(shell, syscall.SIGCONT)
		}
	}
	defer resume()
	if err := b.g.Signal(pod, "mysqld", "mysqld", syscall.SIGKILL); err != nil {
		return result{}, err
	}
	killed := time.Now()
	r, err := b.firstAcks(ctx, killed)
	resume()
	if err != nil {
		return result{}, err
	}
	primary, err := b.settled(ctx, c.Spec.Primary)
	if err != nil {
		return result{}, err
	}
	r.lost, err = b.lost(ctx, primary)
	return r, err
}

// hung stops the primary's mysqld with SIGSTOP: the process is there, its port accepts
// connections in the kernel, and nothing answers. It measures from the stop to the first
// write acknowledged after it (by the replica the operator promotes), then resumes the old
// primary (SIGCONT) and waits for the cluster to settle with spec.primary's instance back.
func (b *bench) hung(ctx context.Context) (result, error) {
	c, pod, err := b.primaryPod(ctx)
	if err != nil {
		return result{}, err
	}
	if err := b.g.Signal(pod, "mysqld", "mysqld", syscall.SIGSTOP); err != nil {
		return result{}, err
	}
	stopped := time.Now()
	r, err := b.firstAcks(ctx, stopped)
	// Resumed whatever happened (its liveness probe may have restarted it meanwhile).
	_ = b.g.Signal(pod, "mysqld", "mysqld", syscall.SIGCONT)
	if err != nil {
		return result{}, err
	}
	primary, err := b.settled(ctx, c.Spec.Primary)
	if err != nil {
		return result{}, err
	}
	r.lost, err = b.lost(ctx, primary)
	return r, err
}

// failover stops the node of the primary (first moved, unmeasured, to an instance away from
// the operator's node: the operator must survive the loss) and measures from the stop to
// the first write the new primary acknowledged; then the node returns and the cluster
// settles with the old primary back (spec.primary names it).
func (b *bench) failover(ctx context.Context) (result, error) {
	old, err := b.awayFromOperator(ctx)
	if err != nil {
		return result{}, err
	}
	pod := &corev1.Pod{}
	if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, pod); err != nil {
		return result{}, err
	}
	node, err := b.g.NodeOf(pod)
	if err != nil {
		return result{}, err
	}
	// Measured from the moment the node is gone (its processes dead): a write the old
	// primary acknowledged while it was being stopped is not the new primary's.
	if err := node.Stop(); err != nil {
		return result{}, err
	}
	stopped := time.Now()
	var promoted string
	for promoted == "" || promoted == old {
		if time.Since(stopped) > 3*time.Minute {
			return result{}, fmt.Errorf("no failover away from %s", old)
		}
		promoted = workload.PrimaryEndpoint(ctx, b.k8s, ns, name)
		time.Sleep(5 * time.Millisecond)
	}
	r, err := b.firstAcks(ctx, stopped)
	if err != nil {
		return result{}, err
	}
	if r.lost, err = b.lost(ctx, promoted); err != nil {
		return result{}, err
	}
	if err := b.g.RestartNode(ctx, node); err != nil {
		return result{}, err
	}
	if _, err := b.settled(ctx, old); err != nil {
		return result{}, err
	}
	return r, nil
}

// awayFromOperator makes the primary an instance whose node does not run the operator
// (a switchover if needed) and returns it.
func (b *bench) awayFromOperator(ctx context.Context) (string, error) {
	ops := &corev1.PodList{}
	if err := b.k8s.List(ctx, ops, client.InNamespace(ground.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}); err != nil || len(ops.Items) != 1 {
		return "", fmt.Errorf("finding the operator's pod: %d pods (%w)", len(ops.Items), err)
	}
	c := &mysqlv1beta1.MySQLCluster{}
	if err := b.k8s.Get(ctx, b.key, c); err != nil {
		return "", err
	}
	for i := range 3 {
		candidate := c.Status.CurrentPrimary
		for range i {
			candidate = next(candidate)
		}
		pod := &corev1.Pod{}
		if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: candidate}, pod); err != nil {
			return "", err
		}
		if pod.Spec.NodeName == ops.Items[0].Spec.NodeName {
			continue
		}
		// spec.primary names it, so that it becomes primary again once its node returns.
		if i > 0 || c.Spec.Primary != candidate {
			c.Spec.Primary = candidate
			if err := b.k8s.Update(ctx, c); err != nil {
				return "", err
			}
			if _, err := b.settled(ctx, candidate); err != nil {
				return "", err
			}
		}
		return candidate, nil
	}
	return "", fmt.Errorf("every instance runs on the operator's node %s", ops.Items[0].Spec.NodeName)
}

// lost counts both writers' acknowledged writes missing on primary. Reading them is
// retried for up to 30 s: right after a crash the instance may drop a first connection.
func (b *bench) lost(ctx context.Context, primary string) (int, error) {
	db, err := b.g.DB(ctx, ns, name, primary)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	total := 0
	for _, w := range []*workload.Writer{b.service, b.direct} {
		// Only writes acknowledged a moment ago may still be on their way: check those older.
		var acks []workload.Ack
		for _, a := range w.Acks() {
			if time.Since(a.At) > 100*time.Millisecond {
				acks = append(acks, a)
			}
		}
		var lost []int
		if err := ground.Poll(ctx, 30*time.Second, func() error {
			lost, err = workload.LostIn(ctx, db, w.Table(), acks)
			return err
		}); err != nil {
			return 0, err
		}
		total += len(lost)
	}
	return total, nil
}

func (b *bench) acked() int { return len(b.service.Acks()) + len(b.direct.Acks()) }

func next(primary string) string {
	for i := range 3 {
		if primary == fmt.Sprintf("%s-%d", name, i) {
			return fmt.Sprintf("%s-%d", name, (i+1)%3)
		}
	}
	return name + "-0"
}
