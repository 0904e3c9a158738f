package backup_test

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// ids are the ids in shop.orders.
func ids(t *testing.T, ctx context.Context, db *sql.DB) []int {
	rows, err := db.QueryContext(ctx, "SELECT id FROM shop.orders ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	var out []int
	for rows.Next() {
		var id int
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// waitSecond waits for the next whole second and returns it.
func waitSecond() time.Time {
	next := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next))
	return next
}

// recoveryOf is the restore of m to target, with the fixture's archive.
func recoveryOf(t *testing.T, f *fixture, m backup.Manifest, data string, target time.Time) backup.Restore {
	r := restoreOf(t, f, m, data)
	r.RootPassword = mysqld.RootPassword
	r.Recovery = &backup.Recovery{Store: f.st, Prefix: archivePrefix, Target: target, Mysqlbinlog: f.in.ClientPath("mysqlbinlog")}
	return r
}

// TestAPointInTimeRecoveryGivesExactlyTheRowsBeforeTheTarget: rows written after a base
// backup, across two archived files, a time T, then a bad DELETE and DROP: the archive
// pruned of what the backup holds, a recovery to T from either kind of backup gives the
// rows written before T, by id, and the GTID set of the source at T.
func TestAPointInTimeRecoveryGivesExactlyTheRowsBeforeTheTarget(t *testing.T) {
	f := newFixture(t, 1, 20, clonePlugin)
	ctx := f.ctx
	a := f.archiver(t, f.servers[0])
	_, err := a.Round(ctx)
	require.NoError(t, err)
	lm, pm := bothBackups(t, f)

	insert := func(from, to int) {
		for i := from; i <= to; i++ {
			_, err := f.db.ExecContext(ctx, "INSERT INTO shop.orders VALUES (?, 'after', NULL)", i)
			require.NoError(t, err)
		}
	}
	insert(101, 105)
	_, err = a.Round(ctx) // a file boundary between the good writes
	require.NoError(t, err)
	insert(106, 109)
	before := gtid.MustParse(gtidExecuted(t, ctx, f.db))
	insert(110, 110)
	want := ids(t, ctx, f.db)
	atTarget := gtidExecuted(t, ctx, f.db)
	lastGood := gtid.MustParse(atTarget).Subtract(before).String() // the insert of 110
	target := waitSecond()
	for _, q := range []string{"DELETE FROM shop.orders WHERE id <= 15", "DROP TABLE shop.empty"} {
		_, err := f.db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	_, err = a.Round(ctx)
	require.NoError(t, err)
	require.Len(t, ids(t, ctx, f.db), len(want)-15, "the bad DELETE ran on the source")

	// Retention keeps the logical backup as the oldest: the archiver prunes the files
	// it holds all of, and recoveries from it still reach the target.
	keep := binlog.Retention{Version: binlog.RetentionVersion, Backup: "b1", GTIDSet: lm.GTIDSet, CompletedAt: lm.CompletedAt}
	_, err = f.st.Put(ctx, binlog.RetentionKey(archivePrefix), bytes.NewReader(keep.Encode()))
	require.NoError(t, err)
	indexed := f.index(t)
	pruned, err := a.Round(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pruned.Pruned, "the files written before the backup")
	for _, gone := range pruned.Pruned {
		require.True(t, gtid.MustParse(lm.GTIDSet).Contains(gtid.MustParse(gone.GTIDSet)), "%s holds what the backup lacks", gone.Name)
		_, err := f.st.Get(ctx, gone.Key)
		require.Equal(t, mysqlv1beta1.ReasonBackupDataMissing, objectstore.Reason(err), "%s is deleted", gone.Key)
	}
	require.Len(t, f.index(t).Files, len(indexed.Files)+len(pruned.Archived)-len(pruned.Pruned))

	for _, m := range []backup.Manifest{lm, pm} {
		t.Run(m.Method, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			require.NoError(t, os.MkdirAll(data, 0o750))
			done, err := recoveryOf(t, f, m, data, target).Run(ctx)
			require.NoError(t, err)
			require.True(t, gtid.MustParse(atTarget).Equal(gtid.MustParse(done.GTIDSet)), "restored %s, the source had %s at the target", done.GTIDSet, atTarget)
			require.GreaterOrEqual(t, done.BinlogFiles, 2)
			require.Equal(t, target, *done.TargetTime)

			restored, err := f.in.Start(ctx, mysqld.Options{Dir: dir, ServerID: 902})
			require.NoError(t, err)
			defer restored.Stop()
			db, err := restored.DB()
			require.NoError(t, err)
			defer db.Close()
			require.Equal(t, want, ids(t, ctx, db), "exactly the rows written before the target")
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = 'empty'").Scan(&n))
			require.Equal(t, 1, n, "the table dropped after the target is there")
			require.NoError(t, login(ctx, restored, newPassword), "this cluster's passwords")
		})
	}

	t.Run("to a transaction", func(t *testing.T) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		require.NoError(t, os.MkdirAll(data, 0o750))
		r := recoveryOf(t, f, lm, data, time.Time{})
		r.Recovery.TargetGTID = strings.ToUpper(lastGood)
		done, err := r.Run(ctx)
		require.NoError(t, err)
		require.True(t, gtid.MustParse(atTarget).Equal(gtid.MustParse(done.GTIDSet)), "restored %s, the source had %s after %s", done.GTIDSet, atTarget, lastGood)
		require.Equal(t, lastGood, done.TargetGTID)
		restored, err := f.in.Start(ctx, mysqld.Options{Dir: dir, ServerID: 903})
		require.NoError(t, err)
		defer restored.Stop()
		db, err := restored.DB()
		require.NoError(t, err)
		defer db.Close()
		require.Equal(t, want, ids(t, ctx, db), "the rows up to and with the target transaction")
	})
	for name, target := range map[string]string{
		"a transaction the backup holds": strings.Split(lm.GTIDSet, ":")[0] + ":1",
		"a transaction nowhere archived": strings.Split(lastGood, ":")[0] + ":999999",
		"not one transaction":            lastGood + "-999999",
	} {
		t.Run(name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.MkdirAll(data, 0o750))
			r := recoveryOf(t, f, lm, data, time.Time{})
			r.Recovery.TargetGTID = target
			_, err := r.Run(ctx)
			require.Equal(t, mysqlv1beta1.ReasonTargetNotRecoverable, reason(err), "%v", err)
			requireEmpty(t, data)
		})
	}
	t.Run("a target after the archive's newest event", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.MkdirAll(data, 0o750))
		_, err := recoveryOf(t, f, lm, data, time.Now().Add(time.Hour)).Run(ctx)
		require.Equal(t, mysqlv1beta1.ReasonTargetNotRecoverable, reason(err), "%v", err)
		requireEmpty(t, data)
	})
	t.Run("an archived file changed in the store", func(t *testing.T) {
		ix := f.index(t)
		var changed binlog.File
		for _, file := range ix.Files {
			if !gtid.MustParse(lm.GTIDSet).Contains(gtid.MustParse(file.GTIDSet)) {
				changed = file
				break
			}
		}
		require.NotEmpty(t, changed.Key)
		rc, err := f.st.Get(ctx, changed.Key)
		require.NoError(t, err)
		raw, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		raw[len(raw)/2] ^= 0x40
		_, err = f.st.Put(ctx, changed.Key, bytes.NewReader(raw))
		require.NoError(t, err)
		data := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.MkdirAll(data, 0o750))
		_, err = recoveryOf(t, f, lm, data, target).Run(ctx)
		require.Equal(t, mysqlv1beta1.ReasonBackupCorrupted, reason(err), "%v", err)
		require.ErrorContains(t, err, changed.Name)
		requireEmpty(t, data)
	})
}

func requireEmpty(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the volume is left empty")
}
