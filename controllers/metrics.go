package controllers

import (
	"time"

	"github.com/robfig/cron/v3"

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

// recordVerifyMetrics sets the cluster's verification metrics from its verification
// status: the last success (none before a first one, or without verification) and, when
// the newest ended verification failed, when it did.
func recordVerifyMetrics(c *mysqlv1beta1.MySQLCluster, vs *mysqlv1beta1.VerificationStatus) {
	l := metrics.Cluster(c)
	metrics.VerifyLastSuccess.Delete(l)
	metrics.VerifyLastFailure.Delete(l)
	if vs == nil {
		return
	}
	if vs.LastSucceeded != nil {
		metrics.VerifyLastSuccess.With(l).Set(float64(vs.LastSucceeded.Unix()))
	}
	if last := vs.Last; last != nil && last.CompletedAt != nil && last.Reason != mysqlv1beta1.ReasonVerified {
		metrics.VerifyLastFailure.With(l).Set(float64(last.CompletedAt.Unix()))
	}
}

// scheduleHorizon is how many due times of a backup schedule scheduleInterval looks at:
// enough for a weekly pattern of daily due times to show its longest gap.
const scheduleHorizon = 32

// recordScheduleMetrics sets the longest time between consecutive due times of the
// cluster's backup schedule (over the next scheduleHorizon), which "backup too old"
// alerts measure the newest backup's age against; without a schedule, or while
// suspended, it has no series.
func recordScheduleMetrics(c *mysqlv1beta1.MySQLCluster, now time.Time) {
	l := metrics.Cluster(c)
	b := c.Spec.Backup
	if b == nil || b.Schedule == "" || b.Suspend {
		metrics.BackupScheduleInterval.Delete(l)
		return
	}
	sched, err := mysqlv1beta1.ParseSchedule(b.Schedule)
	if err != nil {
		metrics.BackupScheduleInterval.Delete(l)
		return
	}
	if gap := scheduleInterval(sched, now); gap > 0 {
		metrics.BackupScheduleInterval.With(l).Set(gap.Seconds())
	}
}

// scheduleInterval is the longest gap between consecutive due times of s after now, over
// scheduleHorizon of them (0 if it has fewer than two).
func scheduleInterval(s cron.Schedule, now time.Time) time.Duration {
	var longest time.Duration
	prev := s.Next(now.UTC())
	for range scheduleHorizon {
		next := s.Next(prev)
		if prev.IsZero() || next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(prev))
		prev = next
	}
	return longest
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
