// Package metrics holds every metric of Dolphin's own (prefixed dolphin_), registered on
// controller-runtime's registry, so that they are served on the operator's metrics
// endpoint beside controller-runtime's. Labels are bounded: namespace, cluster, instance
// and small fixed sets (phase, kind); never a UID or an error's text. A cluster's series
// go with it (ForgetCluster). docs/metrics.md lists them; a test keeps the two equal.
package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Label names.
const (
	LabelNamespace = "namespace"
	LabelCluster   = "cluster"
	LabelInstance  = "instance"
	LabelPhase     = "phase"
	LabelKind      = "kind"
	LabelAccount   = "account"
)

// Kinds of primary change (LabelKind of PrimaryChanges).
const (
	KindFailover   = "failover"
	KindSwitchover = "switchover"
)

var (
	clusterLabels  = []string{LabelNamespace, LabelCluster}
	instanceLabels = []string{LabelNamespace, LabelCluster, LabelInstance}
)

func clusterGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, clusterLabels)
}

func instanceGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, instanceLabels)
}

// Cluster metrics, from the status each pass of the cluster reconciler computes.
var (
	ClusterPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dolphin_cluster_phase",
		Help: "1 for the cluster's phase (status.phase), 0 for every other phase."},
		[]string{LabelNamespace, LabelCluster, LabelPhase})
	ClusterInstances = clusterGauge("dolphin_cluster_instances",
		"How many instances the cluster's StatefulSet runs.")
	ClusterReadyInstances = clusterGauge("dolphin_cluster_ready_instances",
		"How many of the cluster's instances are ready.")
)

// Topology metrics, from each topology pass.
var (
	FailoverBlocked = clusterGauge("dolphin_cluster_failover_blocked",
		"1 while the cluster's primary is lost and a failover is refused (too few replicas reached to prove no acknowledged write is lost).")
	PrimaryChanges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dolphin_cluster_primary_changes_total",
		Help: "Primary changes the operator carried out, by kind (failover, switchover), since it started."},
		[]string{LabelNamespace, LabelCluster, LabelKind})
	InstanceUp = instanceGauge("dolphin_instance_up",
		"1 when the operator could read the instance's state on its last topology pass, else 0.")
	InstancePrimary = instanceGauge("dolphin_instance_primary",
		"1 for the cluster's current primary, 0 for its other instances.")
	InstanceFenced = instanceGauge("dolphin_instance_fenced",
		"1 when the instance is fenced on request (the annotation mysql.dolphin-operator.io/fenced-instances), else 0.")
	ReplicationIORunning = instanceGauge("dolphin_instance_replication_io_running",
		"1 when the replica's receiver thread runs, else 0 (replicas only).")
	ReplicationSQLRunning = instanceGauge("dolphin_instance_replication_sql_running",
		"1 when the replica's applier thread runs, else 0 (replicas only).")
	ReplicationLag = instanceGauge("dolphin_instance_replication_lag_transactions",
		"Transactions the primary executed that the replica has not (replicas only).")
	ErrantTransactions = instanceGauge("dolphin_instance_errant_transactions",
		"Transactions the replica executed that the primary never did (replicas only).")
	SemiSyncOn = instanceGauge("dolphin_instance_semisync_on",
		"1 when semi-sync is on: the primary's source side, a replica's replica side.")
	SemiSyncReplicas = clusterGauge("dolphin_cluster_semisync_replicas",
		"Semi-sync replicas connected to the primary (Rpl_semi_sync_source_clients), while semi-sync is wanted.")
	SemiSyncWaitFor = clusterGauge("dolphin_cluster_semisync_wait_for_replicas",
		"Replica acknowledgements each commit on the primary waits for, while semi-sync is wanted.")
	TopologyPassDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dolphin_topology_pass_duration_seconds",
		Help:    "How long one topology pass (gather, decide, act) took, over every cluster.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}})
)

// Backup metrics, from the cluster's MySQLBackups and its archive and verification.
var (
	BackupLastSuccess = clusterGauge("dolphin_backup_last_success_timestamp_seconds",
		"When the cluster's newest completed backup completed (Unix time).")
	BackupLastFailure = clusterGauge("dolphin_backup_last_failure_timestamp_seconds",
		"When the cluster's newest failed backup failed (Unix time).")
	BackupDuration = clusterGauge("dolphin_backup_duration_seconds",
		"How long the cluster's newest completed backup took, start to completion.")
	BackupSize = clusterGauge("dolphin_backup_size_bytes",
		"The stored size of the cluster's newest completed backup.")
	// ArchiveLastSuccess is kept through a failed read of the index: the archiver's last
	// complete round is no newer for it.
	ArchiveLastSuccess = clusterGauge("dolphin_binlog_archive_last_success_timestamp_seconds",
		"When the cluster's binary log archiver last found every closed file of the primary stored (Unix time).")
	VerifyLastSuccess = clusterGauge("dolphin_backup_last_verified_timestamp_seconds",
		"When a restore verification of the cluster's newest backup last succeeded (Unix time).")
	VerifyLastFailure = clusterGauge("dolphin_backup_last_verification_failure_timestamp_seconds",
		"When the cluster's newest ended restore verification failed (Unix time); absent when it succeeded.")
	BackupScheduleInterval = clusterGauge("dolphin_backup_schedule_interval_seconds",
		"The longest time between two consecutive due times of the cluster's backup schedule; absent without one or while suspended.")
)

// PasswordSet is when each of the cluster's MySQL accounts got its current password.
var PasswordSet = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dolphin_cluster_password_set_timestamp_seconds",
	Help: "When the account's current password was set (Unix time): the operator's rotated accounts and the application account their last rotation, else (and root and the probe account always) the creation time of their Secret."},
	[]string{LabelNamespace, LabelCluster, LabelAccount})

// SetPasswords sets the cluster's PasswordSet series, one per account in setAt. An
// account's series stays until the cluster goes (ForgetCluster): the operator never drops
// an account it made.
func SetPasswords(c *mysqlv1beta1.MySQLCluster, setAt map[string]time.Time) {
	for account, at := range setAt {
		PasswordSet.With(prometheus.Labels{LabelNamespace: c.Namespace, LabelCluster: c.Name, LabelAccount: account}).
			Set(float64(at.Unix()))
	}
}

// BackupMetrics are the gauges set from the cluster's MySQLBackups.
var BackupMetrics = []*prometheus.GaugeVec{BackupLastSuccess, BackupLastFailure, BackupDuration, BackupSize}

// vectors are every per-cluster vector, for ForgetCluster.
var vectors = []interface {
	DeletePartialMatch(prometheus.Labels) int
}{ClusterPhase, ClusterInstances, ClusterReadyInstances, FailoverBlocked, PrimaryChanges,
	InstanceUp, InstancePrimary, InstanceFenced, ReplicationIORunning, ReplicationSQLRunning, ReplicationLag,
	ErrantTransactions, SemiSyncOn, SemiSyncReplicas, SemiSyncWaitFor, BackupLastSuccess, BackupLastFailure,
	BackupDuration, BackupSize, ArchiveLastSuccess, VerifyLastSuccess, VerifyLastFailure, BackupScheduleInterval, PasswordSet}

// Collectors are every metric of this package (registered on controller-runtime's registry).
var Collectors = []prometheus.Collector{ClusterPhase, ClusterInstances, ClusterReadyInstances, FailoverBlocked,
	PrimaryChanges, InstanceUp, InstancePrimary, InstanceFenced, ReplicationIORunning, ReplicationSQLRunning, ReplicationLag,
	ErrantTransactions, SemiSyncOn, SemiSyncReplicas, SemiSyncWaitFor, TopologyPassDuration, BackupLastSuccess,
	BackupLastFailure, BackupDuration, BackupSize, ArchiveLastSuccess, VerifyLastSuccess, VerifyLastFailure,
	BackupScheduleInterval, PasswordSet}

func init() {
	metrics.Registry.MustRegister(Collectors...)
}

// Cluster is the labels of a cluster's series.
func Cluster(c *mysqlv1beta1.MySQLCluster) prometheus.Labels {
	return prometheus.Labels{LabelNamespace: c.Namespace, LabelCluster: c.Name}
}

// ForgetCluster removes every series of the cluster (it is deleted).
func ForgetCluster(c *mysqlv1beta1.MySQLCluster) {
	for _, v := range vectors {
		v.DeletePartialMatch(Cluster(c))
	}
	seenMu.Lock()
	delete(seen, c.Namespace+"/"+c.Name)
	seenMu.Unlock()
}

// SetClusterStatus sets the cluster's phase and instance counts from its status.
func SetClusterStatus(c *mysqlv1beta1.MySQLCluster, s *mysqlv1beta1.MySQLClusterStatus) {
	l := Cluster(c)
	for _, p := range mysqlv1beta1.ClusterPhases {
		v := 0.0
		if s.Phase == p {
			v = 1
		}
		ClusterPhase.With(prometheus.Labels{LabelNamespace: c.Namespace, LabelCluster: c.Name, LabelPhase: string(p)}).Set(v)
	}
	ClusterInstances.With(l).Set(float64(s.Instances))
	ClusterReadyInstances.With(l).Set(float64(s.ReadyInstances))
}

// Instance is what one topology pass saw of one instance.
type Instance struct {
	Name     string
	Up       bool
	Primary  bool
	Fenced   bool
	Replica  bool // it has a replication channel
	SemiSync bool
	// IORunning, SQLRunning, Lag and Errant are a replica's (Replica true).
	IORunning, SQLRunning bool
	Lag, Errant           int64
}

// SetTopology sets the cluster's topology series from one pass: the instances it read
// and whether a failover is blocked. A replica's series are removed while it cannot be
// read or is no replica, and every series of an instance no longer read goes.
func SetTopology(c *mysqlv1beta1.MySQLCluster, instances []Instance, failoverBlocked bool) {
	key := c.Namespace + "/" + c.Name
	seenMu.Lock()
	defer seenMu.Unlock()
	last, ok := seen[key]
	if ok && last.failoverBlocked == failoverBlocked && slices.Equal(last.instances, instances) {
		// What the series already say: with hundreds of clusters, setting them again on
		// every pass cost a twentieth of the operator's CPU.
		return
	}
	now := map[string]bool{}
	for _, i := range instances {
		now[i.Name] = true
		ns, cl, in := c.Namespace, c.Name, i.Name
		InstanceUp.WithLabelValues(ns, cl, in).Set(bit(i.Up))
		InstancePrimary.WithLabelValues(ns, cl, in).Set(bit(i.Primary))
		InstanceFenced.WithLabelValues(ns, cl, in).Set(bit(i.Fenced))
		if i.Up {
			SemiSyncOn.WithLabelValues(ns, cl, in).Set(bit(i.SemiSync))
		} else {
			SemiSyncOn.DeleteLabelValues(ns, cl, in)
		}
		replica := map[*prometheus.GaugeVec]float64{ReplicationIORunning: bit(i.IORunning),
			ReplicationSQLRunning: bit(i.SQLRunning), ReplicationLag: float64(i.Lag), ErrantTransactions: float64(i.Errant)}
		for v, value := range replica {
			if i.Up && i.Replica {
				v.WithLabelValues(ns, cl, in).Set(value)
			} else {
				v.DeleteLabelValues(ns, cl, in)
			}
		}
	}
	for _, i := range last.instances {
		if !now[i.Name] {
			forgetInstance(c, i.Name)
		}
	}
	seen[key] = topologySeen{instances: slices.Clone(instances), failoverBlocked: failoverBlocked}
	FailoverBlocked.WithLabelValues(c.Namespace, c.Name).Set(bit(failoverBlocked))
	// Both kinds exist from the first pass, at 0: increase() and rate() then count the
	// first change too (a counter that appears at 1 shows no increase).
	for _, kind := range []string{KindFailover, KindSwitchover} {
		PrimaryChanges.WithLabelValues(c.Namespace, c.Name, kind).Add(0)
	}
}

// seen is what each cluster's last topology pass set series from (SetTopology): its
// instances, which go when a later pass no longer reads them, and whether its failover
// was blocked.
var (
	seenMu sync.Mutex
	seen   = map[string]topologySeen{}
)

type topologySeen struct {
	instances       []Instance
	failoverBlocked bool
}

func forgetInstance(c *mysqlv1beta1.MySQLCluster, name string) {
	l := prometheus.Labels{LabelNamespace: c.Namespace, LabelCluster: c.Name, LabelInstance: name}
	for _, v := range []*prometheus.GaugeVec{InstanceUp, InstancePrimary, InstanceFenced, ReplicationIORunning,
		ReplicationSQLRunning, ReplicationLag, ErrantTransactions, SemiSyncOn} {
		v.Delete(l)
	}
}

// SetSemiSync sets the cluster's semi-sync series: replicas connected to the primary as
// semi-sync replicas, and acknowledgements each commit waits for.
func SetSemiSync(c *mysqlv1beta1.MySQLCluster, replicas, waitFor int) {
	SemiSyncReplicas.With(Cluster(c)).Set(float64(replicas))
	SemiSyncWaitFor.With(Cluster(c)).Set(float64(waitFor))
}

// ForgetSemiSync removes them: semi-sync is not wanted, or the primary was not read.
func ForgetSemiSync(c *mysqlv1beta1.MySQLCluster) {
	SemiSyncReplicas.Delete(Cluster(c))
	SemiSyncWaitFor.Delete(Cluster(c))
}

// CountPrimaryChange counts one primary change of the kind.
func CountPrimaryChange(c *mysqlv1beta1.MySQLCluster, kind string) {
	PrimaryChanges.With(prometheus.Labels{LabelNamespace: c.Namespace, LabelCluster: c.Name, LabelKind: kind}).Inc()
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
