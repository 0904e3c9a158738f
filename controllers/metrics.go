package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Backup metrics, per cluster, from its MySQLBackups as the cluster reconciler last listed
// them; on the operator's metrics endpoint with controller-runtime's own.
var (
	backupLastSuccess = clusterGauge("dolphin_backup_last_success_timestamp_seconds",
		"When the cluster's newest completed backup completed (Unix time).")
	backupLastFailure = clusterGauge("dolphin_backup_last_failure_timestamp_seconds",
		"When the cluster's newest failed backup failed (Unix time).")
	backupDuration = clusterGauge("dolphin_backup_duration_seconds",
		"How long the cluster's newest completed backup took, start to completion.")
	backupSize = clusterGauge("dolphin_backup_size_bytes",
		"The stored size of the cluster's newest completed backup.")
	backupMetrics = []*prometheus.GaugeVec{backupLastSuccess, backupLastFailure, backupDuration, backupSize}
	// archiveLastSuccess is kept through a failed read of the index: the archiver's last
	// complete round is no newer for it.
	archiveLastSuccess = clusterGauge("dolphin_binlog_archive_last_success_timestamp_seconds",
		"When the cluster's binary log archiver last found every closed file of the primary stored (Unix time).")
	verifyLastSuccess = clusterGauge("dolphin_backup_last_verified_timestamp_seconds",
		"When a restore verification of the cluster's newest backup last succeeded (Unix time).")
)

func clusterGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"namespace", "cluster"})
}

func init() {
	for _, m := range append(backupMetrics, archiveLastSuccess, verifyLastSuccess) {
		metrics.Registry.MustRegister(m)
	}
}

// recordArchiveMetrics sets the cluster's archive metric from what the pass read of its
// index; without an archive, or before the archiver's first round, it has no series.
func recordArchiveMetrics(c *mysqlv1beta1.MySQLCluster, obs *archiveObservation) {
	l := prometheus.Labels{"namespace": c.Namespace, "cluster": c.Name}
	switch {
	case obs == nil || obs.blocked != "":
		archiveLastSuccess.Delete(l)
	case obs.read.err != nil:
	case obs.read.ix.CheckedAt.IsZero():
		archiveLastSuccess.Delete(l)
	default:
		archiveLastSuccess.With(l).Set(float64(obs.read.ix.CheckedAt.Unix()))
	}
}

// recordVerifyMetrics sets the cluster's verification metric from its verification
// status; before a first success, or without verification, it has no series.
func recordVerifyMetrics(c *mysqlv1beta1.MySQLCluster, vs *mysqlv1beta1.VerificationStatus) {
	l := prometheus.Labels{"namespace": c.Namespace, "cluster": c.Name}
	if vs == nil || vs.LastSucceeded == nil {
		verifyLastSuccess.Delete(l)
		return
	}
	verifyLastSuccess.With(l).Set(float64(vs.LastSucceeded.Unix()))
}

// recordBackupMetrics sets the cluster's backup metrics from its backups; a metric with
// nothing to say (no completed backup, no failed one) has no series.
func recordBackupMetrics(c *mysqlv1beta1.MySQLCluster, backups []mysqlv1beta1.MySQLBackup) {
	l := prometheus.Labels{"namespace": c.Namespace, "cluster": c.Name}
	forgetBackupMetrics(c)
	if b := newestEnded(backups, mysqlv1beta1.BackupPhaseCompleted); b != nil {
		backupLastSuccess.With(l).Set(float64(b.Status.CompletedAt.Unix()))
		if b.Status.StartedAt != nil {
			backupDuration.With(l).Set(b.Status.CompletedAt.Sub(b.Status.StartedAt.Time).Seconds())
		}
		if b.Status.Size != nil {
			backupSize.With(l).Set(float64(b.Status.Size.Value()))
		}
	}
	if b := newestEnded(backups, mysqlv1beta1.BackupPhaseFailed); b != nil {
		backupLastFailure.With(l).Set(float64(b.Status.CompletedAt.Unix()))
	}
}

// forgetBackupMetrics removes the cluster's series (it is gone, or has nothing to report).
func forgetBackupMetrics(c *mysqlv1beta1.MySQLCluster) {
	for _, m := range backupMetrics {
		m.DeletePartialMatch(prometheus.Labels{"namespace": c.Namespace, "cluster": c.Name})
	}
}
