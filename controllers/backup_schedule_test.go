package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestDecideSchedule(t *testing.T) {
	nightly, err := mysqlv1beta1.ParseSchedule("0 2 * * *")
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		now, since string
		running    bool
		due, next  string
	}{
		{name: "not yet due", now: "2026-12-02T01:00:00Z", since: "2026-12-01T12:00:00Z", next: "2026-12-02T02:00:00Z"},
		{name: "due", now: "2026-12-02T02:00:30Z", since: "2026-12-01T12:00:00Z", due: "2026-12-02T02:00:00Z", next: "2026-12-03T02:00:00Z"},
		{name: "just created for that due time", now: "2026-12-02T02:00:30Z", since: "2026-12-02T02:00:00Z", next: "2026-12-03T02:00:00Z"},
		{name: "three missed: only the latest runs", now: "2026-12-05T03:00:00Z", since: "2026-12-01T12:00:00Z",
			due: "2026-12-05T02:00:00Z", next: "2026-12-06T02:00:00Z"},
		{name: "the previous one still runs", now: "2026-12-03T02:00:10Z", since: "2026-12-02T02:00:00Z", running: true,
			next: "2026-12-04T02:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideSchedule(scheduleInput{now: at(tc.now), schedule: nightly, since: at(tc.since), running: tc.running})
			if tc.due == "" {
				require.True(t, d.due.IsZero(), "nothing due, got %s", d.due)
			} else {
				require.Equal(t, at(tc.due), d.due)
			}
			require.Equal(t, at(tc.next), d.next)
		})
	}
}

func ended(name string, phase mysqlv1beta1.BackupPhase, end string) mysqlv1beta1.MySQLBackup {
	b := mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: mysqlv1beta1.MySQLBackupStatus{Phase: phase}}
	if end != "" {
		b.Status.CompletedAt = &metav1.Time{Time: at(end)}
		b.CreationTimestamp = metav1.Time{Time: at(end).Add(-time.Minute)}
	}
	return b
}

func TestRetentionExpires(t *testing.T) {
	c, f, r := mysqlv1beta1.BackupPhaseCompleted, mysqlv1beta1.BackupPhaseFailed, mysqlv1beta1.BackupPhaseRunning
	five := []mysqlv1beta1.MySQLBackup{ended("b1", c, "2026-11-01T02:00:00Z"), ended("b5", c, "2026-11-05T02:00:00Z"),
		ended("b3", c, "2026-11-03T02:00:00Z"), ended("b2", c, "2026-11-02T02:00:00Z"), ended("b4", c, "2026-11-04T02:00:00Z")}
	now := at("2026-11-05T12:00:00Z")
	week, day := &metav1.Duration{Duration: 7 * 24 * time.Hour}, &metav1.Duration{Duration: 36 * time.Hour}
	for _, tc := range []struct {
		name    string
		backups []mysqlv1beta1.MySQLBackup
		r       mysqlv1beta1.BackupRetention
		want    []string
	}{
		{name: "count 3 of 5", backups: five, r: mysqlv1beta1.BackupRetention{Count: new(int32(3))}, want: []string{"b1", "b2"}},
		{name: "the default keeps 7", backups: five},
		{name: "max age", backups: five, r: mysqlv1beta1.BackupRetention{MaxAge: day}, want: []string{"b1", "b2", "b3"}},
		{name: "max age alone has no count", backups: five, r: mysqlv1beta1.BackupRetention{MaxAge: week}},
		{name: "either rule expires", backups: five, r: mysqlv1beta1.BackupRetention{Count: new(int32(4)), MaxAge: day},
			want: []string{"b1", "b2", "b3"}},
		{name: "never the newest completed", backups: five[:2], r: mysqlv1beta1.BackupRetention{MaxAge: &metav1.Duration{Duration: time.Hour}},
			want: []string{"b1"}},
		{name: "failed: the newest 3 are kept; running never expires",
			backups: []mysqlv1beta1.MySQLBackup{ended("f1", f, "2026-11-01T02:00:00Z"), ended("f2", f, "2026-11-02T02:00:00Z"),
				ended("f3", f, "2026-11-03T02:00:00Z"), ended("f4", f, "2026-11-04T02:00:00Z"), ended("r", r, "")},
			r: mysqlv1beta1.BackupRetention{Count: new(int32(1))}, want: []string{"f1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := expired(tc.backups, tc.r, now)
			slices.Sort(got)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestASchedulePicksUpFromWhereItWas(t *testing.T) {
	now := at("2026-12-02T02:00:30Z")
	newCluster := func(last *metav1.Time, suspend bool) *mysqlv1beta1.MySQLCluster {
		return &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns",
			CreationTimestamp: metav1.Time{Time: now.Add(-7 * 24 * time.Hour)}},
			Spec:   mysqlv1beta1.MySQLClusterSpec{Backup: &mysqlv1beta1.BackupSpec{Schedule: "0 * * * *", Suspend: suspend}},
			Status: mysqlv1beta1.MySQLClusterStatus{Backup: mysqlv1beta1.BackupStatus{LastScheduleTime: last}}}
	}
	created := func(t *testing.T, c *mysqlv1beta1.MySQLCluster) (*state, []string) {
		r, _ := fakeReconciler(t)
		r.Now = func() time.Time { return now }
		st := &state{cluster: c}
		require.NoError(t, r.schedule(context.Background(), st))
		list := &mysqlv1beta1.MySQLBackupList{}
		require.NoError(t, r.List(context.Background(), list))
		var names []string
		for _, b := range list.Items {
			names = append(names, b.Name)
		}
		return st, names
	}

	// A schedule seen for the first time does not run the due time before it.
	st, names := created(t, newCluster(nil, false))
	require.Empty(t, names, "a week-old cluster given a schedule now")
	require.Equal(t, now, st.lastScheduled)
	require.Equal(t, at("2026-12-02T03:00:00Z"), st.nextBackup)

	// Known since before 02:00: the 02:00 backup is created.
	st, names = created(t, newCluster(&metav1.Time{Time: at("2026-12-02T01:00:00Z")}, false))
	require.Equal(t, []string{"db-20261202-0200"}, names)
	require.Equal(t, at("2026-12-02T02:00:00Z"), st.lastScheduled)

	// Suspended: 02:00 passes unrun, and is marked as reached.
	st, names = created(t, newCluster(&metav1.Time{Time: at("2026-12-02T01:00:00Z")}, true))
	require.Empty(t, names)
	require.Equal(t, at("2026-12-02T02:00:00Z"), st.lastScheduled)

	// Suspended without a schedule (backups by hand, or only the binary log archive):
	// nothing is due, and nothing fails.
	c := newCluster(nil, true)
	c.Spec.Backup.Schedule = ""
	st, names = created(t, c)
	require.Empty(t, names)
	require.True(t, st.nextBackup.IsZero())
}
