package controllers

import (
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
)

// The cluster's metrics the reconciler sets (internal/metrics defines them all).

// recordArchiveMetrics sets the cluster's archive metric from what the pass read of its
// index; without an archive, or before the archiver's first round, it has no series.
func recordArchiveMetrics(c *mysqlv1beta1.MySQLCluster, obs *archiveObservation) {
	l := metrics.Cluster(c)
	switch {
	case obs == nil || obs.blocked != "":
		metrics.ArchiveLastSuccess.Delete(l)
	case obs.read.err != nil:
	case obs.read.ix.CheckedAt.IsZero():
		metrics.ArchiveLastSuccess.Delete(l)
	default:
		metrics.ArchiveLastSuccess.With(l).Set(float64(obs.read.ix.CheckedAt.Unix()))
	}
}

// recordVerifyMetrics sets the cluster's verification metric from its verification
// status; before a first success, or without verification, it has no series.
func recordVerifyMetrics(c *mysqlv1beta1.MySQLCluster, vs *mysqlv1beta1.VerificationStatus) {
	l := metrics.Cluster(c)
	if vs == nil || vs.LastSucceeded == nil {
		metrics.VerifyLastSuccess.Delete(l)
		return
	}
	metrics.VerifyLastSuccess.With(l).Set(float64(vs.LastSucceeded.Unix()))
}

// recordBackupMetrics sets the cluster's backup metrics from its backups; a metric with
// nothing to say (no completed backup, no failed one) has no series.
func recordBackupMetrics(c *mysqlv1beta1.MySQLCluster, backups []mysqlv1beta1.MySQLBackup) {
	l := metrics.Cluster(c)
	for _, m := range metrics.BackupMetrics {
		m.Delete(l)
	}
	if b := newestEnded(backups, mysqlv1beta1.BackupPhaseCompleted); b != nil {
		metrics.BackupLastSuccess.With(l).Set(float64(b.Status.CompletedAt.Unix()))
		if b.Status.StartedAt != nil {
			metrics.BackupDuration.With(l).Set(b.Status.CompletedAt.Sub(b.Status.StartedAt.Time).Seconds())
		}
		if b.Status.Size != nil {
			metrics.BackupSize.With(l).Set(float64(b.Status.Size.Value()))
		}
	}
	if b := newestEnded(backups, mysqlv1beta1.BackupPhaseFailed); b != nil {
		metrics.BackupLastFailure.With(l).Set(float64(b.Status.CompletedAt.Unix()))
	}
}
