package backup_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// newPassword is the restored cluster's password for the operator's accounts (the
// source's is backupPassword).
const newPassword = "restored-password"

// restoreOf is the restore of m into data, as a restore Job's pod runs it, with this
// cluster's passwords: root's stays the harness's, so that the harness can start a server
// on the result. RekeySQL drops root over TCP; the harness, which connects over TCP, makes
// it again after the accounts (a statement only the tests add).
func restoreOf(t *testing.T, f *fixture, m backup.Manifest, data string) backup.Restore {
	env := map[string]string{"MYSQL_ROOT_PASSWORD": mysqld.RootPassword, "DOLPHIN_ADMIN_PASSWORD": newPassword,
		"DOLPHIN_REPLICATION_PASSWORD": newPassword, "DOLPHIN_EXPORTER_PASSWORD": newPassword, "DOLPHIN_BACKUP_PASSWORD": newPassword,
		"DOLPHIN_USERS_PASSWORD": newPassword, "DOLPHIN_PROBE_PASSWORD": newPassword}
	accounts, err := backup.Statements(resources.RekeySQL, func(k string) string { return env[k] })
	require.NoError(t, err)
	accounts = append(accounts, "CREATE USER 'root'@'%' IDENTIFIED BY '"+mysqld.RootPassword+"'",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION")
	return backup.Restore{Mysqld: f.in.MysqldPath(), Mysql: f.in.ClientPath("mysql"), Store: f.st, Key: m.Key,
		SHA256: m.SHA256, Size: m.Size, GTIDSet: m.GTIDSet, Method: mysqlv1beta1.BackupMethod(m.Method),
		Data: data, Work: t.TempDir(), Accounts: accounts}
}

// bothBackups takes a logical (key ns/db/base/b1/…) and a physical (b2) backup of the
// fixture's source.
func bothBackups(t *testing.T, f *fixture) (backup.Manifest, backup.Manifest) {
	t.Helper()
	lm, err := logical(f.servers[0], f.st, f.in, t.TempDir()).Run(f.ctx)
	require.NoError(t, err)
	p := physical(f.servers[0], f.st, f.in, t.TempDir())
	p.Key = "ns/db/base/b2/data.tar.zst"
	pm, err := p.Run(f.ctx)
	require.NoError(t, err)
	return lm, pm
}

// login tries the backup account with password.
func login(ctx context.Context, s *mysqld.Instance, password string) error {
	c := gomysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = resources.BackupUser, password, "tcp", s.Addr()
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func TestLogicalAndPhysicalBackupsRestoreIntoAServerWithTheSameRowsAndThisClustersPasswords(t *testing.T) {
	f := newFixture(t, 1, 400, clonePlugin)
	ctx := f.ctx
	lm, pm := bothBackups(t, f)
	want := tables(t, ctx, f.db)

	for _, m := range []backup.Manifest{lm, pm} {
		t.Run(m.Method, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			require.NoError(t, os.MkdirAll(filepath.Join(data, "lost+found"), 0o750), "a fresh volume's folder")
			r := restoreOf(t, f, m, data)
			done, err := r.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, m.GTIDSet, done.GTIDSet)
			require.Equal(t, m.Method, done.Method)
			require.Equal(t, f.st.URL(m.Key), done.Location)
			for _, marker := range []string{backup.AccountsMarker, backup.RestoredMarker, "mysql"} {
				_, err := os.Stat(filepath.Join(data, marker))
				require.NoError(t, err, "%s is in place", marker)
			}
			require.NoDirExists(t, filepath.Join(data, "dolphin-restore-stage"), "the stage is gone")

			// Run again (a pod run twice): the same report, nothing redone.
			again, err := r.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, done.GTIDSet, again.GTIDSet)
			require.Equal(t, done.CompletedAt.Unix(), again.CompletedAt.Unix())

			restored, err := f.in.Start(ctx, mysqld.Options{Dir: dir, ServerID: 901})
			require.NoError(t, err, "a server starts on the restored data")
			defer restored.Stop()
			db, err := restored.DB()
			require.NoError(t, err)
			defer db.Close()
			require.Equal(t, want, tables(t, ctx, db))
			require.Equal(t, m.GTIDSet, gtidExecuted(t, ctx, db))
			var purged string
			require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_purged").Scan(&purged))
			require.NotEmpty(t, purged, "restored transactions are in no binary log: replicas must clone")
			require.NoError(t, login(ctx, restored, newPassword), "the operator's accounts have this cluster's passwords")
			require.Error(t, login(ctx, restored, backupPassword), "and no longer the source's")
		})
	}
}

func TestARestoreOfDataThatIsNotTheBackupFailsAndLeavesTheVolumeEmpty(t *testing.T) {
	f := newFixture(t, 1, 200, clonePlugin)
	ctx := f.ctx
	lm, m := bothBackups(t, f)
	// stored is a copy of the backup b at key, changed by change.
	stored := func(b backup.Manifest, key string, change func([]byte) []byte) backup.Manifest {
		r, err := f.st.Get(ctx, b.Key)
		require.NoError(t, err)
		raw, err := io.ReadAll(r)
		r.Close()
		require.NoError(t, err)
		b.Key = key
		_, err = f.st.Put(ctx, key, bytes.NewReader(change(bytes.Clone(raw))))
		require.NoError(t, err)
		return b
	}
	// A dump cut short fails its replay first; it is still the data that is wrong.
	truncated := stored(lm, "ns/db/base/cut/dump.sql.zst", func(raw []byte) []byte { return raw[:len(raw)/2] })
	flipped := stored(m, "ns/db/base/flipped/data.tar.zst", func(raw []byte) []byte { raw[len(raw)/2] ^= 0x40; return raw })
	otherSum := m
	otherSum.SHA256 = fmt.Sprintf("%064x", 1)
	missing := lm
	missing.Key = "ns/db/base/gone/dump.sql.zst"
	otherGTIDs := m
	otherGTIDs.GTIDSet = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
	// The same data beside a manifest whose table sums are not the data's.
	require.Contains(t, m.Tables, "shop.orders", "a physical backup records its tables")
	otherRows := stored(m, "ns/db/base/rows/data.tar.zst", func(raw []byte) []byte { return raw })
	otherRows.Tables = map[string]backup.TableSum{"shop.orders": {Rows: m.Tables["shop.orders"].Rows + 1, Checksum: m.Tables["shop.orders"].Checksum},
		"shop.empty": m.Tables["shop.empty"]}
	rawManifest, err := json.Marshal(otherRows)
	require.NoError(t, err)
	_, err = f.st.Put(ctx, backup.ManifestKey(otherRows.Key), bytes.NewReader(rawManifest))
	require.NoError(t, err)

	for _, c := range []struct {
		name   string
		m      backup.Manifest
		reason string
	}{
		{"truncated", truncated, mysqlv1beta1.ReasonBackupCorrupted},
		{"a byte changed", flipped, mysqlv1beta1.ReasonBackupCorrupted},
		{"another checksum", otherSum, mysqlv1beta1.ReasonBackupCorrupted},
		{"nothing stored", missing, mysqlv1beta1.ReasonBackupDataMissing},
		{"another GTID set", otherGTIDs, mysqlv1beta1.ReasonRestoreFailed},
		{"other rows than the manifest records", otherRows, mysqlv1beta1.ReasonBackupCorrupted},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			_, err := restoreOf(t, f, c.m, data).Run(ctx)
			require.Error(t, err)
			require.Equal(t, c.reason, reason(err), "%v", err)
			entries, err := os.ReadDir(data)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is left in the data folder")
		})
	}

	// A volume that holds data is never restored over.
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "ibdata1"), []byte("x"), 0o640))
	_, err = restoreOf(t, f, m, data).Run(ctx)
	require.Error(t, err)
	require.Equal(t, mysqlv1beta1.ReasonRestoreFailed, reason(err))
	require.Contains(t, err.Error(), "ibdata1")
}
