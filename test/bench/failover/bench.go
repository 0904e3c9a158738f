package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/envtest"
	"github.com/dolphin-operator/dolphin/test/localcluster"
	"github.com/dolphin-operator/dolphin/test/mysqld"
	"github.com/dolphin-operator/dolphin/test/workload"
)

const ns, name = "bench", "bench"

type bench struct {
	k8s    client.Client
	runner *localcluster.PodRunner
	writer *workload.Writer
	key    client.ObjectKey
}

func newBench(ctx context.Context, d *localcluster.Dolphin, delay time.Duration) (*bench, error) {
	k8s, err := client.New(d.RESTConfig(), client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return nil, err
	}
	b := &bench{k8s: k8s, runner: d.Runner, key: client.ObjectKey{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	size := resource.MustParse("1Gi")
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)), Storage: mysqlv1beta1.StorageSpec{Size: &size}}}
	c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: delay}
	if err := k8s.Create(ctx, c); err != nil {
		return nil, err
	}
	if _, err := b.settled(ctx, ""); err != nil {
		return nil, err
	}
	if b.writer, err = workload.StartWriter(ctx, workload.ViaPodRunner(k8s, d.Runner, ns, name)); err != nil {
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
		if p.Labels[resources.LabelRole] == resources.RoleReplica {
			replicas++
		}
	}
	return replicas == len(pods.Items)-1
}

// switchover moves the primary to the next instance and measures the longest time the
// writer went without an acknowledged write.
func (b *bench) switchover(ctx context.Context) (time.Duration, int, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := b.k8s.Get(ctx, b.key, c); err != nil {
		return 0, 0, err
	}
	target := next(c.Status.CurrentPrimary)
	start := time.Now()
	c.Spec.Primary = target
	if err := b.k8s.Update(ctx, c); err != nil {
		return 0, 0, err
	}
	if _, err := b.settled(ctx, target); err != nil {
		return 0, 0, err
	}
	end, err := b.writer.AckedAfter(ctx, time.Now())
	if err != nil {
		return 0, 0, err
	}
	lost, err := b.lost(ctx, target)
	return b.writer.LongestGap(start, end), lost, err
}

// failover kills the primary's mysqld and measures from the kill to the first write the
// new primary acknowledged; then it brings the old one back and waits for it to rejoin.
func (b *bench) failover(ctx context.Context) (time.Duration, int, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	if err := b.k8s.Get(ctx, b.key, c); err != nil {
		return 0, 0, err
	}
	old := c.Status.CurrentPrimary
	inst, err := b.runner.Instance(ctx, ns, old)
	if err != nil {
		return 0, 0, err
	}
	inst.SetRestartPolicy(mysqld.RestartNever)
	killed := time.Now()
	if err := inst.Kill(); err != nil {
		return 0, 0, err
	}
	var promoted string
	for promoted == "" || promoted == old {
		if time.Since(killed) > 2*time.Minute {
			return 0, 0, fmt.Errorf("no failover away from %s", old)
		}
		promoted = workload.PrimaryEndpoint(ctx, b.k8s, ns, name)
		time.Sleep(5 * time.Millisecond)
	}
	first, err := b.writer.AckedAfter(ctx, killed)
	if err != nil {
		return 0, 0, err
	}
	took := first.Sub(killed)
	inst.SetRestartPolicy(mysqld.RestartAlways)
	if err := inst.Resume(ctx); err != nil {
		return 0, 0, err
	}
	// spec.primary names the killed instance: once it has rejoined, the operator switches
	// back to it.
	primary, err := b.settled(ctx, c.Spec.Primary)
	if err != nil {
		return 0, 0, err
	}
	lost, err := b.lost(ctx, primary)
	return took, lost, err
}

func (b *bench) lost(ctx context.Context, primary string) (int, error) {
	db, err := b.runner.DB(ctx, ns, primary)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	// Only writes acknowledged a moment ago may still be on their way: check those older.
	var acks []workload.Ack
	for _, a := range b.writer.Acks() {
		if time.Since(a.At) > 100*time.Millisecond {
			acks = append(acks, a)
		}
	}
	lost, err := workload.Lost(ctx, db, acks)
	return len(lost), err
}

func (b *bench) acked() int { return len(b.writer.Acks()) }

func next(primary string) string {
	for i := range 3 {
		if primary == fmt.Sprintf("%s-%d", name, i) {
			return fmt.Sprintf("%s-%d", name, (i+1)%3)
		}
	}
	return name + "-0"
}
