package controllers

import (
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Scheduled backups are MySQLBackup objects the cluster reconciler creates, one per due
// time of spec.backup.schedule, named <cluster>-<due time, UTC> so that a pass that
// repeats itself creates nothing twice. What happens to them is the MySQLBackup
// reconciler's business; retention deletes the old ones.

// scheduleInput is what deciding the next scheduled backup needs.
type scheduleInput struct {
	now      time.Time
	schedule cron.Schedule
	// since is when scheduling began: the cluster's creation, or the newest scheduled
	// backup's due time.
	since time.Time
	// running: a scheduled backup has not ended yet.
	running bool
}

// scheduleDecision says which due time to create a backup for (zero: none now) and when
// the next one is due.
type scheduleDecision struct {
	due, next time.Time
}

// missedLookBack bounds how far back missed due times are looked for: after an outage
// only the latest one is run, as a CronJob does.
const missedLookBack = 24 * time.Hour

// decideSchedule is the latest due time after since and not after now, if any and if no
// scheduled backup is still running (a backup that outlasts the interval delays the next
// one instead of running beside it), and the due time after now.
func decideSchedule(in scheduleInput) scheduleDecision {
	from := in.since
	if from.Before(in.now.Add(-missedLookBack)) {
		from = in.now.Add(-missedLookBack)
	}
	var due time.Time
	t := in.schedule.Next(from)
	for !t.IsZero() && !t.After(in.now) {
		due = t
		t = in.schedule.Next(t)
	}
	if in.running {
		due = time.Time{}
	}
	return scheduleDecision{due: due, next: t}
}

// Retention defaults.
const (
	defaultRetentionCount = 7
	// failedKept is how many failed backups of a cluster are kept (for their reasons).
	failedKept = 3
)

// expired is the backups of a cluster that retention deletes: completed ones beyond the
// newest count or older than maxAge, but never the newest completed one; failed ones
// beyond the newest failedKept or older than maxAge. Pending and running backups never
// expire. Without a count, 7 are kept unless maxAge is set.
func expired(backups []mysqlv1beta1.MySQLBackup, r mysqlv1beta1.BackupRetention, now time.Time) []string {
	count := 0
	switch {
	case r.Count != nil:
		count = int(*r.Count)
	case r.MaxAge == nil:
		count = defaultRetentionCount
	}
	var completed, failed []mysqlv1beta1.MySQLBackup
	for _, b := range backups {
		switch b.Status.Phase {
		case mysqlv1beta1.BackupPhaseCompleted:
			completed = append(completed, b)
		case mysqlv1beta1.BackupPhaseFailed:
			failed = append(failed, b)
		}
	}
	newestFirst := func(a, b mysqlv1beta1.MySQLBackup) int { return endTime(b).Compare(endTime(a)) }
	slices.SortStableFunc(completed, newestFirst)
	slices.SortStableFunc(failed, newestFirst)
	var out []string
	for k, b := range completed {
		tooMany := count > 0 && k >= count
		tooOld := r.MaxAge != nil && now.Sub(endTime(b)) > r.MaxAge.Duration
		if k > 0 && (tooMany || tooOld) {
			out = append(out, b.Name)
		}
	}
	for k, b := range failed {
		tooOld := r.MaxAge != nil && now.Sub(endTime(b)) > r.MaxAge.Duration
		if k >= failedKept || tooOld {
			out = append(out, b.Name)
		}
	}
	return out
}

// endTime is when a backup ended, else when it was created.
func endTime(b mysqlv1beta1.MySQLBackup) time.Time {
	if b.Status.CompletedAt != nil {
		return b.Status.CompletedAt.Time
	}
	return b.CreationTimestamp.Time
}
