package backup_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// clonePlugin is what a source needs for a physical backup (instances load it).
const clonePlugin = "--plugin-load-add=mysql_clone.so"

func physical(s *mysqld.Instance, st backup.Store, in *mysqld.Install, work string) backup.Physical {
	return backup.Physical{Mysqld: in.MysqldPath(), Work: work, Store: st, Cluster: "db", Name: "p1",
		Key: "ns/db/base/p1/data.tar.zst", Source: backup.Source{Instance: "db-0", Host: "127.0.0.1", Port: s.Port(),
			User: resources.BackupUser, Password: backupPassword}}
}

func TestAPhysicalBackupToS3StartsAsAServerWithTheSameRows(t *testing.T) {
	f := newFixture(t, 1, 300, clonePlugin)
	ctx, in, servers, db, st := f.ctx, f.in, f.servers, f.db, f.st

	m, err := physical(servers[0], st, in, t.TempDir()).Run(ctx)
	require.NoError(t, err)
	require.Equal(t, string(mysqlv1beta1.BackupMethodPhysical), m.Method)
	require.Equal(t, gtidExecuted(t, ctx, db), m.GTIDSet, "the backup's GTID set is the source's")
	require.NotEmpty(t, m.BinlogFile)
	require.True(t, len(m.MySQLVersion) > 0)
	// Its tables as the source has them: tables() is "n rows, checksum c" per shop table.
	require.Len(t, m.Tables, 2)
	for name, want := range tables(t, ctx, db) {
		got := m.Tables["shop."+name]
		require.Equal(t, want, fmt.Sprintf("%d rows, checksum %d", got.Rows, got.Checksum), name)
	}

	r, err := st.Get(ctx, m.Key)
	require.NoError(t, err)
	raw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	require.EqualValues(t, len(raw), m.Size)
	sum := sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), m.SHA256)
	// Restoring it (a server starts on it, with the same rows): restore_test.go.
}

func TestAPhysicalBackupFailureSaysWhy(t *testing.T) {
	f := newFixture(t, 1, 10, clonePlugin)
	ctx, in, servers, st := f.ctx, f.in, f.servers, f.st

	p := physical(servers[0], st, in, t.TempDir())
	p.Source.Password = "wrong"
	_, err := p.Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonSourceAccessDenied, reason(err), "%v", err)

	p = physical(servers[0], st, in, t.TempDir())
	p.Source.Port = 1
	_, err = p.Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonSourceUnreachable, reason(err), "%v", err)
	listed, err := st.List(ctx, "ns/")
	require.NoError(t, err)
	require.Empty(t, listed)
}

// The backup pod's work volume too small for the copy: BackupDiskFull, nothing stored.
func TestAPhysicalBackupWithoutRoomFails(t *testing.T) {
	f := newFixture(t, 1, 10, clonePlugin)
	ctx, in, servers, st := f.ctx, f.in, f.servers, f.st
	work := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", work).CombinedOutput()
	require.NoError(t, err, "a small volume (root mounts it): %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", work).Run() })
	_, err = physical(servers[0], st, in, work).Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonBackupDiskFull, reason(err), "%v", err)
	listed, err := st.List(ctx, "ns/")
	require.NoError(t, err)
	require.Empty(t, listed)
}
