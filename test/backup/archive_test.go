package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

const archivePrefix = "ns/db/binlog"

// archiver reads the fixture's source the way the archiver's Deployment does, with the
// operator's accounts, rotating its log every round.
func (f *fixture) archiver(t *testing.T, s *mysqld.Instance) *backup.Archiver {
	return &backup.Archiver{Mysqlbinlog: f.in.ClientPath("mysqlbinlog"), Tmp: t.TempDir(), Primary: "127.0.0.1",
		Port: s.Port(), Store: f.st, Prefix: archivePrefix, Flush: time.Nanosecond, FileTimeout: time.Minute,
		Admin:  backup.Credentials{User: resources.BackupUser, Password: backupPassword},
		Reader: backup.Credentials{User: resources.ReplicationUser, Password: backupPassword}}
}

func (f *fixture) index(t *testing.T) binlog.Index {
	rc, err := f.st.Get(f.ctx, binlog.IndexKey(archivePrefix))
	require.NoError(t, err)
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	require.NoError(t, err)
	ix, err := binlog.DecodeIndex(raw)
	require.NoError(t, err)
	return ix
}

func TestTheArchiverStoresEveryClosedBinaryLogWithItsTransactions(t *testing.T) {
	f := newFixture(t, 1, 20)
	a := f.archiver(t, f.servers[0])
	var uuid string
	require.NoError(t, f.db.QueryRowContext(f.ctx, "SELECT @@server_uuid").Scan(&uuid))

	before := time.Now().UTC().Truncate(time.Second)
	first, err := a.Round(f.ctx)
	require.NoError(t, err)
	require.True(t, first.Flushed)
	require.Equal(t, uuid, first.Primary)
	require.NotEmpty(t, first.Archived, "the files written before the first round")
	executed := gtid.MustParse(gtidExecuted(t, f.ctx, f.db))

	// Rows written between rounds are in the next round's file, and in nothing before.
	for i := 1000; i < 1010; i++ {
		_, err := f.db.ExecContext(f.ctx, "INSERT INTO shop.orders VALUES (?, ?, NULL)", i, fmt.Sprintf("late-%d", i))
		require.NoError(t, err)
	}
	second, err := a.Round(f.ctx)
	require.NoError(t, err)
	require.Len(t, second.Archived, 1, "one file closed since the first round")
	late := gtid.MustParse(gtidExecuted(t, f.ctx, f.db)).Subtract(executed)
	require.EqualValues(t, 10, late.Count())
	require.Equal(t, late.String(), second.Archived[0].GTIDSet)
	require.Equal(t, 10, second.Archived[0].Transactions)
	require.False(t, second.Archived[0].FirstEvent.Before(before), "times are the events'")

	// The index names every file once, and the archive holds all the source executed
	// before the last rotation.
	again, err := a.Round(f.ctx)
	require.NoError(t, err)
	ix := f.index(t)
	require.Len(t, ix.Files, len(first.Archived)+len(second.Archived)+len(again.Archived))
	all := gtid.Set{}
	for _, file := range ix.Files {
		all = all.Union(gtid.MustParse(file.GTIDSet))
		require.Equal(t, uuid, file.ServerUUID)
		requireStoredFile(t, f, file)
	}
	require.True(t, all.Contains(executed.Union(late)), "archived %s, executed %s", all, executed.Union(late))
	require.Equal(t, uuid, ix.Primary)
	require.False(t, ix.CheckedAt.Before(before))
}

// requireStoredFile checks a stored file against its index entry: the object's SHA-256
// and size, and the binary log inside it, whole, with the entry's transactions.
func requireStoredFile(t *testing.T, f *fixture, file binlog.File) {
	t.Helper()
	rc, err := f.st.Get(f.ctx, file.Key)
	require.NoError(t, err)
	raw, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, file.SHA256, hex.EncodeToString(sum[:]), file.Key)
	require.EqualValues(t, len(raw), file.Size)
	dec, err := zstd.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	defer dec.Close()
	info, err := binlog.Read(dec, nil)
	require.NoError(t, err, file.Key)
	require.True(t, info.Closed, "%s ends with its rotation", file.Name)
	require.Equal(t, file.GTIDSet, info.GTIDSet)
	require.Equal(t, file.LastEvent, info.LastEvent)
}

func TestTheArchiverRefusesWhatIsNotThePrimary(t *testing.T) {
	f := newFixture(t, 1, 1)
	_, err := f.db.ExecContext(f.ctx, "SET GLOBAL read_only = ON")
	require.NoError(t, err)
	_, err = f.archiver(t, f.servers[0]).Round(f.ctx)
	require.ErrorContains(t, err, "read-only (not the primary)")

	_, err = f.db.ExecContext(f.ctx, "SET GLOBAL read_only = OFF")
	require.NoError(t, err)
	a := f.archiver(t, f.servers[0])
	a.Reader.Password = "wrong"
	_, err = a.Round(f.ctx)
	require.ErrorContains(t, err, "copying binlog.", "a copy refused by the server fails the round")
	_, err = f.st.Get(f.ctx, binlog.IndexKey(archivePrefix))
	require.Error(t, err, "nothing is indexed")

	f.srv.Stop()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	_, err = f.archiver(t, f.servers[0]).Round(ctx)
	require.Error(t, err, "the store down fails the round")
}
