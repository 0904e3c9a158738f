package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/metrics"
)

const archiveUUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

var archiveT0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// archivedIndex holds two files of one server, transactions 1-5 and 6-9, the last
// archived at t0 and checked at checked.
func archivedIndex(checked time.Time) binlog.Index {
	return binlog.Index{Version: binlog.IndexVersion, CheckedAt: checked, Files: []binlog.File{
		{ServerUUID: archiveUUID, Name: "binlog.000001", GTIDSet: archiveUUID + ":1-5",
			FirstEvent: archiveT0.Add(-20 * time.Minute), LastEvent: archiveT0.Add(-10 * time.Minute)},
		{ServerUUID: archiveUUID, Name: "binlog.000002", GTIDSet: archiveUUID + ":6-9",
			FirstEvent: archiveT0.Add(-10 * time.Minute), LastEvent: archiveT0},
	}}
}

func observed(ix binlog.Index, at time.Time, err error, bases ...binlog.Base) *archiveObservation {
	obs := &archiveObservation{timeout: time.Minute, read: archiveRead{at: at, ix: ix, err: err}}
	if err == nil {
		obs.window, obs.windowOK, obs.windowErr = ix.Recoverable(bases)
	}
	return obs
}

func TestTheArchivingConditionIsJudgedByTheArchiversLastCompleteRound(t *testing.T) {
	base := binlog.Base{Name: "nightly", GTIDSet: archiveUUID + ":1-3", CompletedAt: archiveT0.Add(-15 * time.Minute)}
	for _, tc := range []struct {
		name   string
		obs    *archiveObservation
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{name: "checked lately", obs: observed(archivedIndex(archiveT0), archiveT0.Add(time.Minute), nil),
			status: metav1.ConditionTrue, reason: mysqlv1beta1.ReasonArchiving, msg: "newest file " + archiveUUID + "/binlog.000002"},
		{name: "checked two timeouts and half a minute ago, just", obs: observed(archivedIndex(archiveT0), archiveT0.Add(150*time.Second), nil),
			status: metav1.ConditionTrue, reason: mysqlv1beta1.ReasonArchiving},
		{name: "checked longer ago", obs: observed(archivedIndex(archiveT0), archiveT0.Add(151*time.Second), nil),
			status: metav1.ConditionFalse, reason: mysqlv1beta1.ReasonArchiveStalled, msg: "2m31s before the check"},
		{name: "no round ended yet", obs: observed(binlog.Index{Version: binlog.IndexVersion}, archiveT0, nil),
			status: metav1.ConditionUnknown, reason: mysqlv1beta1.ReasonArchivePending},
		{name: "store unreachable", obs: observed(binlog.Index{}, archiveT0, fmt.Errorf("get: %w", context.DeadlineExceeded)),
			status: metav1.ConditionFalse, reason: mysqlv1beta1.ReasonStorageUnreachable, msg: "reading the archive's index"},
		{name: "index unreadable", obs: observed(binlog.Index{}, archiveT0, fmt.Errorf("x: %w", binlog.ErrIndexInvalid)),
			status: metav1.ConditionFalse, reason: mysqlv1beta1.ReasonArchiveIndexInvalid},
		{name: "index names a bad set", obs: func() *archiveObservation {
			ix := archivedIndex(archiveT0)
			ix.Files[0].GTIDSet = "nonsense"
			return observed(ix, archiveT0, nil, base)
		}(), status: metav1.ConditionFalse, reason: mysqlv1beta1.ReasonArchiveIndexInvalid, msg: "binlog.000001"},
		{name: "no operator image", obs: &archiveObservation{blocked: mysqlv1beta1.ReasonNoOperatorImage, blockedMsg: "set DOLPHIN_OPERATOR_IMAGE"},
			status: metav1.ConditionFalse, reason: mysqlv1beta1.ReasonNoOperatorImage, msg: "DOLPHIN_OPERATOR_IMAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			setArchiving(&conds, tc.obs, 4)
			got := meta.FindStatusCondition(conds, mysqlv1beta1.ConditionBinlogArchiving)
			require.NotNil(t, got)
			require.Equal(t, tc.status, got.Status, got.Message)
			require.Equal(t, tc.reason, got.Reason, got.Message)
			require.Contains(t, got.Message, tc.msg)
			require.Equal(t, int64(4), got.ObservedGeneration)
		})
	}
	t.Run("no archive: no condition", func(t *testing.T) {
		conds := []metav1.Condition{{Type: mysqlv1beta1.ConditionBinlogArchiving, Status: metav1.ConditionTrue}}
		setArchiving(&conds, nil, 1)
		require.Empty(t, conds)
	})
}

func TestTheRecoverableWindowIsReportedAndKeptThroughAFailedRead(t *testing.T) {
	base := binlog.Base{Name: "nightly", GTIDSet: archiveUUID + ":1-3", CompletedAt: archiveT0.Add(-15 * time.Minute)}
	var bs mysqlv1beta1.BackupStatus
	archiveStatus(&bs, mysqlv1beta1.BackupStatus{}, observed(archivedIndex(archiveT0), archiveT0, nil, base))
	require.Equal(t, base.CompletedAt, bs.FirstRecoverableTime.Time)
	require.Equal(t, archiveT0, bs.LastRecoverableTime.Time)
	require.Equal(t, archiveUUID+"/binlog.000002", bs.LastArchivedBinlog)

	var none mysqlv1beta1.BackupStatus
	archiveStatus(&none, mysqlv1beta1.BackupStatus{}, observed(archivedIndex(archiveT0), archiveT0, nil))
	require.Nil(t, none.FirstRecoverableTime, "no backup to start from: no window")
	require.Equal(t, archiveUUID+"/binlog.000002", none.LastArchivedBinlog)

	var kept mysqlv1beta1.BackupStatus
	archiveStatus(&kept, bs, observed(binlog.Index{}, archiveT0, context.DeadlineExceeded))
	require.Equal(t, bs, kept, "a failed read does not shrink what is archived")
}

func TestTheArchiveMetricIsTheLastCompleteRoundAndSurvivesAFailedRead(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "metered"}}
	l := prometheus.Labels{"namespace": "ns", "cluster": "metered"}
	recordArchiveMetrics(c, observed(archivedIndex(archiveT0), archiveT0, nil))
	require.Equal(t, float64(archiveT0.Unix()), testutil.ToFloat64(metrics.ArchiveLastSuccess.With(l)))
	recordArchiveMetrics(c, observed(binlog.Index{}, archiveT0.Add(time.Hour), context.DeadlineExceeded))
	require.Equal(t, float64(archiveT0.Unix()), testutil.ToFloat64(metrics.ArchiveLastSuccess.With(l)))
	recordArchiveMetrics(c, nil)
	require.Equal(t, 0, testutil.CollectAndCount(metrics.ArchiveLastSuccess, "dolphin_binlog_archive_last_success_timestamp_seconds"))
}

func TestTheArchiveKeepsFromTheOldestBackupRetentionKeeps(t *testing.T) {
	backup := func(name string, phase mysqlv1beta1.BackupPhase, completed time.Duration, set string) mysqlv1beta1.MySQLBackup {
		b := mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: mysqlv1beta1.MySQLBackupStatus{Phase: phase, GTIDSet: set}}
		if phase == mysqlv1beta1.BackupPhaseCompleted || phase == mysqlv1beta1.BackupPhaseFailed {
			b.Status.CompletedAt = &metav1.Time{Time: archiveT0.Add(completed)}
		}
		return b
	}
	backups := []mysqlv1beta1.MySQLBackup{
		backup("oldest", mysqlv1beta1.BackupPhaseCompleted, -3*time.Hour, archiveUUID+":1-3"),
		backup("failed", mysqlv1beta1.BackupPhaseFailed, -4*time.Hour, ""),
		backup("older", mysqlv1beta1.BackupPhaseCompleted, -2*time.Hour, archiveUUID+":1-5"),
		backup("newest", mysqlv1beta1.BackupPhaseCompleted, -time.Hour, archiveUUID+":1-9"),
		backup("running", mysqlv1beta1.BackupPhaseRunning, 0, ""),
	}
	keep, ok := keptFrom(backups, nil)
	require.True(t, ok)
	require.Equal(t, "oldest", keep.Backup)
	require.Equal(t, archiveUUID+":1-3", keep.GTIDSet)
	require.Equal(t, archiveT0.Add(-3*time.Hour), keep.CompletedAt)

	keep, ok = keptFrom(backups, []string{"oldest"})
	require.True(t, ok)
	require.Equal(t, "older", keep.Backup, "what retention deletes is not kept")

	_, ok = keptFrom(backups[4:], nil)
	require.False(t, ok, "no completed backup: the archive keeps everything")
}
