package controllers

import (
	"context"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// TopologyManager decides and enforces which instance is primary. The reconciler hands
// over to it once every Kubernetes object of the cluster is in place; it speaks SQL to
// the instances and labels the pods (the primary and replicas Services select on the
// role label). It must be idempotent: the reconciler calls it on every pass.
type TopologyManager interface {
	// Reconcile moves the cluster's replication one step towards health and reports it.
	Reconcile(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (TopologyStatus, error)
	// Forget drops whatever the manager keeps about a cluster being deleted. It is called
	// with a deadline; deletion goes on when it fails.
	Forget(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error
}

// TopologyStatus is what the topology manager observed.
type TopologyStatus struct {
	// Managed is false when no manager runs: readiness then means only that Kubernetes
	// reports the pods ready, not that replication works.
	Managed bool
	// CurrentPrimary is the instance that accepts writes, "" when none does.
	CurrentPrimary string
	// Healthy is true when every replica replicates from the primary.
	Healthy bool
	// Reason and Message explain an unhealthy state (for the ReplicationHealthy condition).
	Reason, Message string
	// RequeueAfter asks for another pass (a switchover or failover in progress).
	RequeueAfter time.Duration
}

// NoTopology is the manager used until replication management is switched on: it
// changes nothing and says so.
type NoTopology struct{}

// Reconcile implements TopologyManager.
func (NoTopology) Reconcile(context.Context, *mysqlv1beta1.MySQLCluster) (TopologyStatus, error) {
	return TopologyStatus{Managed: false, Reason: mysqlv1beta1.ReasonTopologyNotManaged,
		Message: "replication is not managed by this operator build; readiness reflects Kubernetes pod readiness only"}, nil
}

// Forget implements TopologyManager.
func (NoTopology) Forget(context.Context, *mysqlv1beta1.MySQLCluster) error { return nil }
