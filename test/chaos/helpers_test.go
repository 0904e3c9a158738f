package chaos_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
)

// recoveryBound is how long the cluster may take to be Ready again after a fault ends
// (every instance replicating from one writable primary). The slowest round is the one
// that kills the operator, whose successor first waits out the leader-election lease
// (15 s) and then the restart back-off of its container.
const recoveryBound = 150 * time.Second

func namespace(t *testing.T) string { return suite.Namespace(t, k8s, "chaos") }

func newCluster(ns, name string, instances int32) *mysqlv1beta1.MySQLCluster {
	size := mustQuantity("1Gi")
	return &mysqlv1beta1.MySQLCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(instances), DeletionPolicy: mysqlv1beta1.DeletionPolicyDelete,
			MySQL:   mysqlv1beta1.MySQLSpec{Version: g.MySQLSeries(), Config: map[string]string{"innodb_buffer_pool_size": "64M"}},
			Storage: mysqlv1beta1.StorageSpec{Size: &size},
			Replication: mysqlv1beta1.ReplicationSpec{Failover: mysqlv1beta1.FailoverSpec{
				DetectionDelay: &metav1.Duration{Duration: 2 * time.Second}}}},
	}
}

// ready waits until the cluster is Ready with every instance replicating, and returns how
// long that took and the cluster as then read.
func ready(ctx context.Context, ns, name string, within time.Duration) (time.Duration, *mysqlv1beta1.MySQLCluster, error) {
	c := &mysqlv1beta1.MySQLCluster{}
	start := time.Now()
	err := ground.Poll(ctx, within, func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) ||
			!meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy) ||
			c.Status.ReadyInstances != *c.Spec.Instances || c.Status.CurrentPrimary == "" ||
			c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("phase %s, primary %q, ready %d, conditions %v", c.Status.Phase, c.Status.CurrentPrimary,
				c.Status.ReadyInstances, c.Status.Conditions)
		}
		return nil
	})
	return time.Since(start), c, err
}

func pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
}

// operatorPod is the operator's one running pod.
func operatorPod(ctx context.Context) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ground.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no operator pod with an address among %d", len(pods.Items))
}

// podDB opens a root connection to an instance at its pod's IP (no lookup), for checks.
func podDB(ctx context.Context, ns, cluster, name string) (*sql.DB, error) {
	return g.DB(ctx, ns, cluster, name)
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
