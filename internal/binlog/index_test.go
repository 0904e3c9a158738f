package binlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheIndexKeepsOneEntryAFileInTheOrderOfTheirEvents(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ix, err := DecodeIndex(nil)
	require.NoError(t, err)
	ix = ix.With(File{ServerUUID: "b", Name: "binlog.000001", FirstEvent: t0.Add(time.Hour), LastEvent: t0.Add(2 * time.Hour)})
	ix = ix.With(File{ServerUUID: "a", Name: "binlog.000009", FirstEvent: t0, LastEvent: t0.Add(time.Hour)})
	ix = ix.With(File{ServerUUID: "b", Name: "binlog.000001", FirstEvent: t0.Add(time.Hour), LastEvent: t0.Add(3 * time.Hour)})
	require.Len(t, ix.Files, 2)
	require.Equal(t, "a", ix.Files[0].ServerUUID)
	require.True(t, ix.Has("b", "binlog.000001"))
	require.False(t, ix.Has("a", "binlog.000001"))
	require.Equal(t, t0.Add(3*time.Hour), ix.Last())

	back, err := DecodeIndex(ix.Encode())
	require.NoError(t, err)
	require.Equal(t, ix.Files, back.Files)

	_, err = DecodeIndex([]byte(`{"version": 2}`))
	require.ErrorContains(t, err, "version 2")
	require.ErrorIs(t, err, ErrIndexInvalid)
	_, err = DecodeIndex([]byte(`{`))
	require.ErrorIs(t, err, ErrIndexInvalid)
}

func TestTheRecoverableWindowStartsAtTheOldestBaseTheArchiveContinues(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	const v = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
	ix := Index{Files: []File{
		{ServerUUID: u, Name: "binlog.000003", GTIDSet: u + ":101-200", FirstEvent: t0, LastEvent: t0.Add(time.Hour)},
		{ServerUUID: v, Name: "binlog.000002", GTIDSet: u + ":150-200," + v + ":1-10", FirstEvent: t0.Add(time.Hour), LastEvent: t0.Add(2 * time.Hour)},
	}}
	for name, tc := range map[string]struct {
		bases []Base
		want  Window
		ok    bool
	}{
		"no base": {},
		"a base the archive continues": {bases: []Base{{Name: "b1", GTIDSet: u + ":1-120", CompletedAt: t0.Add(10 * time.Minute)}},
			want: Window{First: t0.Add(10 * time.Minute), Last: t0.Add(2 * time.Hour), From: "b1"}, ok: true},
		"the oldest of two": {bases: []Base{
			{Name: "new", GTIDSet: u + ":1-200," + v + ":1-5", CompletedAt: t0.Add(90 * time.Minute)},
			{Name: "old", GTIDSet: u + ":1-100", CompletedAt: t0.Add(-time.Minute)}},
			want: Window{First: t0.Add(-time.Minute), Last: t0.Add(2 * time.Hour), From: "old"}, ok: true},
		"a gap: files the primary removed before they were archived": {
			bases: []Base{{Name: "b1", GTIDSet: u + ":1-50", CompletedAt: t0.Add(-time.Hour)}}},
		"a gap behind one base, not the other": {bases: []Base{
			{Name: "gap", GTIDSet: u + ":1-50", CompletedAt: t0.Add(-time.Hour)},
			{Name: "b2", GTIDSet: u + ":1-150", CompletedAt: t0.Add(30 * time.Minute)}},
			want: Window{First: t0.Add(30 * time.Minute), Last: t0.Add(2 * time.Hour), From: "b2"}, ok: true},
		"a base newer than the archive": {bases: []Base{{Name: "b1", GTIDSet: u + ":1-200", CompletedAt: t0.Add(3 * time.Hour)}}},
	} {
		t.Run(name, func(t *testing.T) {
			w, ok, err := ix.Recoverable(tc.bases)
			require.NoError(t, err)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, w)
		})
	}
	_, _, err := ix.Recoverable([]Base{{Name: "bad", GTIDSet: "nonsense"}})
	require.ErrorContains(t, err, "backup bad")
}
