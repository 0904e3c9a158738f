// Package controllers holds one reconciler per kind (MySQLCluster now, MySQLBackup next),
// one file per concern: the pass and its order (mysqlcluster_controller.go), the children
// (mysqlcluster_children.go), status (mysqlcluster_status.go) and the seam to the topology
// manager (topology.go). Reconcilers own Kubernetes objects; SQL lives in internal/mysql
// and decisions about which instance is primary in internal/topology.
//
// The order of a pass and why is written down in docs/design/reconcile.md.
package controllers
