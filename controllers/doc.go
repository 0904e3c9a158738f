// Package controllers holds one reconciler per kind (MySQLCluster, MySQLBackup), one file
// per concern. Reconcilers own Kubernetes objects; SQL lives in internal/mysql and
// decisions about which instance is primary in internal/topology.
package controllers
