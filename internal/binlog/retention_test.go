package binlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPruningDropsOnlyWhatTheOldestKeptBackupHoldsAndNeverTheNewestFile(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	file := func(name, set string, last time.Duration) File {
		return File{ServerUUID: u, Name: name, GTIDSet: set, FirstEvent: t0.Add(last - time.Hour), LastEvent: t0.Add(last)}
	}
	ix := Index{Files: []File{
		file("binlog.000001", u+":1-100", time.Hour),       // all in the backup, before it: goes
		file("binlog.000002", u+":101-150", 2*time.Hour),   // after the backup's set: stays
		file("binlog.000003", "", 2*time.Hour+time.Minute), // no transaction, before the backup completed: goes
		file("binlog.000004", u+":90-95", 4*time.Hour),     // in the set, but ends after completion: stays
		file("binlog.000005", "", 5*time.Hour),             // the newest: stays
	}}
	keep := Retention{Backup: "nightly", GTIDSet: u + ":1-120", CompletedAt: t0.Add(3 * time.Hour)}
	gone, err := ix.Prunable(keep)
	require.NoError(t, err)
	var names []string
	for _, f := range gone {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"binlog.000001", "binlog.000003"}, names)
	left := ix.Without(gone)
	require.Len(t, left.Files, 3)
	require.Len(t, ix.Files, 5, "Without leaves the index it was called on alone")

	back, ok, err := DecodeRetention(keep.Encode())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, keep.GTIDSet, back.GTIDSet)
	require.True(t, keep.CompletedAt.Equal(back.CompletedAt))
	_, ok, err = DecodeRetention(nil)
	require.NoError(t, err)
	require.False(t, ok, "no record: nothing is pruned")
	_, _, err = DecodeRetention([]byte(`{"version": 1, "gtidSet": "not a set"}`))
	require.Error(t, err)
	_, _, err = DecodeRetention([]byte(`{"version": 7}`))
	require.ErrorContains(t, err, "version 7")
}
