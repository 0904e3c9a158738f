package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/event"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

// TopologyManager decides and enforces which instance is primary, off the reconciler's
// workers: the reconciler hands it the cluster on every pass once every Kubernetes object
// is in place, and reads back what it last saw; the manager speaks SQL to the instances
// and labels the pods (the primary and replicas Services select on the role label).
type TopologyManager interface {
	// Observe hands over the cluster as this pass sees it and returns the latest report.
	// It must not wait on a database.
	Observe(ctx context.Context, c *mysqlv1beta1.MySQLCluster) topology.Report
	// Forget drops whatever the manager keeps about a cluster being deleted. It is called
	// with a deadline; deletion goes on when it fails.
	Forget(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error
	// Changes delivers a cluster whenever its report changed (nil: never).
	Changes() <-chan event.GenericEvent
}

// NoTopology is the manager used until replication management is switched on: it
// changes nothing and says so.
type NoTopology struct{}

// Observe implements TopologyManager.
func (NoTopology) Observe(context.Context, *mysqlv1beta1.MySQLCluster) topology.Report {
	return topology.NotManaged()
}

// Forget implements TopologyManager.
func (NoTopology) Forget(context.Context, *mysqlv1beta1.MySQLCluster) error { return nil }

// Changes implements TopologyManager.
func (NoTopology) Changes() <-chan event.GenericEvent { return nil }
