package backup_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/mysqld"
	"github.com/dolphin-operator/dolphin/test/s3server"
)

const backupPassword = "backup-password"

// s3 starts an S3 server for the test; the test's end stops it.
func s3(t *testing.T) *s3server.Server {
	t.Helper()
	srv, err := s3server.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func store(t *testing.T, srv *s3server.Server, secret string) *objectstore.Store {
	st, err := srv.Store("backups", secret)
	require.NoError(t, err)
	return st
}

// fixture is what every backup test starts from: the MySQL install, n servers (the first
// the source, with the operator's accounts and rows rows), an S3 server and its bucket.
type fixture struct {
	ctx     context.Context
	in      *mysqld.Install
	servers []*mysqld.Instance
	db      *sql.DB // the source, as root
	srv     *s3server.Server
	st      *objectstore.Store
}

func newFixture(t *testing.T, n, rows int, args ...string) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	in, err := mysqld.Locate()
	require.NoError(t, err)
	f := &fixture{ctx: ctx, in: in, servers: mysqld.StartN(t, n, args...)}
	f.db = source(t, ctx, f.servers[0], rows)
	f.srv = s3(t)
	f.st = store(t, f.srv, s3server.SecretAccessKey)
	require.NoError(t, f.st.CreateBucket(ctx))
	return f
}

// source is a server with the operator's accounts (AccountsSQL, as an instance's init
// container runs it) and a schema of known rows.
func source(t *testing.T, ctx context.Context, s *mysqld.Instance, rows int) *sql.DB {
	require.NoError(t, s.CreateOperatorAccounts(ctx, backupPassword))
	db, err := s.DB()
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, item VARCHAR(64), note BLOB)",
		"CREATE TABLE shop.empty (id INT PRIMARY KEY)"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for i := 1; i <= rows; i++ {
		_, err := db.ExecContext(ctx, "INSERT INTO shop.orders VALUES (?, ?, ?)", i, fmt.Sprintf("item-%d", i), []byte{0, byte(i), 0xff})
		require.NoError(t, err)
	}
	return db
}

func logical(s *mysqld.Instance, st backup.Store, in *mysqld.Install, tmp string) backup.Logical {
	return backup.Logical{Mysqldump: in.ClientPath("mysqldump"), Tmp: tmp, Store: st, Cluster: "db", Name: "b1",
		Key: "ns/db/base/b1/dump.sql.zst", Source: backup.Source{Instance: "db-0", Host: "127.0.0.1", Port: s.Port(),
			User: resources.BackupUser, Password: backupPassword}}
}

func gtidExecuted(t *testing.T, ctx context.Context, db *sql.DB) string {
	var g string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@gtid_executed").Scan(&g))
	return strings.ReplaceAll(g, "\n", "")
}

// tables is every shop table's row count and CHECKSUM TABLE.
func tables(t *testing.T, ctx context.Context, db *sql.DB) map[string]string {
	out := map[string]string{}
	for _, tbl := range []string{"orders", "empty"} {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM shop."+tbl).Scan(&n))
		var name string
		var sum sql.NullInt64
		require.NoError(t, db.QueryRowContext(ctx, "CHECKSUM TABLE shop."+tbl).Scan(&name, &sum))
		out[tbl] = fmt.Sprintf("%d rows, checksum %d", n, sum.Int64)
	}
	return out
}

func reason(err error) string {
	var f *backup.Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return ""
}

func TestALogicalBackupToS3RestoresTheSameRows(t *testing.T) {
	f := newFixture(t, 2, 500)
	ctx, in, servers, db, st := f.ctx, f.in, f.servers, f.db, f.st

	m, err := logical(servers[0], st, in, t.TempDir()).Run(ctx)
	require.NoError(t, err)
	require.Equal(t, gtidExecuted(t, ctx, db), m.GTIDSet, "the backup's GTID set is the source's")
	require.True(t, strings.HasPrefix(m.MySQLVersion, in.ServerVersion()), "%s vs %s", m.MySQLVersion, in.ServerVersion())
	require.NotEmpty(t, m.BinlogFile)
	require.Equal(t, "s3://backups/ns/db/base/b1/dump.sql.zst", m.Location)

	// What is stored is what the manifest says.
	r, err := st.Get(ctx, m.Key)
	require.NoError(t, err)
	raw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), m.SHA256)
	require.EqualValues(t, len(raw), m.Size)
	listed, err := st.List(ctx, "ns/db/base/b1/")
	require.NoError(t, err)
	require.Len(t, listed, 2, "the dump and its manifest: %v", listed)

	// Restoring it: restore_test.go.
}

func TestLogicalBackupFailuresSayWhyAndStoreNothing(t *testing.T) {
	f := newFixture(t, 1, 10)
	ctx, in, servers, srv, good := f.ctx, f.in, f.servers, f.srv, f.st
	empty := func(what string) {
		listed, err := good.List(ctx, "ns/")
		require.NoError(t, err)
		require.Empty(t, listed, "%s: nothing stored", what)
	}

	_, err := logical(servers[0], store(t, srv, "wrong"), in, t.TempDir()).Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonStorageAccessDenied, reason(err), "wrong credentials: %v", err)
	empty("wrong credentials")

	nobucket, err := srv.Store("missing", s3server.SecretAccessKey)
	require.NoError(t, err)
	_, err = logical(servers[0], nobucket, in, t.TempDir()).Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonStorageBucketNotFound, reason(err), "no bucket: %v", err)

	l := logical(servers[0], good, in, t.TempDir())
	l.Source.Password = "wrong"
	_, err = l.Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonSourceAccessDenied, reason(err), "wrong MySQL password: %v", err)
	empty("wrong MySQL password")

	l = logical(servers[0], good, in, t.TempDir())
	l.Source.Port = 1
	_, err = l.Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonSourceUnreachable, reason(err), "no MySQL: %v", err)
	empty("no MySQL")

	srv.Stop()
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	_, err = logical(servers[0], good, in, t.TempDir()).Run(sctx)
	require.Equal(t, mysqlv1beta1.ReasonStorageUnreachable, reason(err), "S3 down: %v", err)
}

// cutter calls cut once the upload has read more than after bytes: the S3 server or the
// source killed in the middle of a backup.
type cutter struct {
	backup.Store
	after int64
	cut   func()
}

func (c cutter) Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error) {
	return c.Store.Put(ctx, key, &cutReader{r: r, left: c.after, cut: c.cut})
}

type cutReader struct {
	r    io.Reader
	left int64
	cut  func()
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 && c.cut != nil {
		c.cut()
		c.cut = nil
	}
	return n, err
}

// noisy adds 40 MiB that zstd cannot shrink much to the source: a backup of it takes
// three parts and long enough to be cut.
func noisy(t *testing.T, ctx context.Context, db *sql.DB) {
	_, err := db.ExecContext(ctx, "CREATE TABLE shop.noise (id INT PRIMARY KEY, b LONGBLOB)")
	require.NoError(t, err)
	noise := make([]byte, 1<<20)
	for i := range 40 {
		_, _ = rand.Read(noise)
		_, err = db.ExecContext(ctx, "INSERT INTO shop.noise VALUES (?, ?)", i, noise)
		require.NoError(t, err)
	}
}

// The source killed in the middle of the dump: SourceUnreachable, nothing stored.
func TestABackupWhoseSourceIsKilledFails(t *testing.T) {
	f := newFixture(t, 1, 0)
	ctx, in, servers, st := f.ctx, f.in, f.servers, f.st
	noisy(t, ctx, f.db)
	servers[0].SetRestartPolicy(mysqld.RestartNever)
	l := logical(servers[0], cutter{Store: st, after: 4 << 20, cut: func() { _ = servers[0].Kill() }}, in, t.TempDir())
	_, err := l.Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonSourceUnreachable, reason(err), "mysqld killed mid-dump: %v", err)
	listed, err := st.List(ctx, "ns/")
	require.NoError(t, err)
	require.Empty(t, listed)
}

// A volume target that fills up: StorageFull, and no partial file left.
func TestABackupOntoAFullVolumeFails(t *testing.T) {
	f := newFixture(t, 1, 0)
	ctx, in, servers := f.ctx, f.in, f.servers
	noisy(t, ctx, f.db)
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput()
	require.NoError(t, err, "a small volume (root mounts it): %s", out)
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	_, err = logical(servers[0], &objectstore.Dir{Root: dir, Claim: "small"}, in, t.TempDir()).Run(ctx)
	require.Equal(t, mysqlv1beta1.ReasonStorageFull, reason(err), "volume full: %v", err)
	left, err := filepath.Glob(filepath.Join(dir, "ns/db/base/b1/*"))
	require.NoError(t, err)
	require.Empty(t, left, "no partial file")
}

// An upload cut short (the S3 server killed between two parts of a multipart upload)
// fails the backup, and once the server is back no object is there.
func TestABackupWhoseUploadIsCutShortFails(t *testing.T) {
	f := newFixture(t, 1, 0)
	ctx, in, servers, srv, st := f.ctx, f.in, f.servers, f.srv, f.st
	noisy(t, ctx, f.db)
	l := logical(servers[0], cutter{Store: st, after: objectstore.PartSize + objectstore.PartSize/2, cut: srv.Stop}, in, t.TempDir())
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	_, err := l.Run(sctx)
	require.Equal(t, mysqlv1beta1.ReasonStorageUnreachable, reason(err), "S3 gone mid-upload: %v", err)
	require.Contains(t, err.Error(), "part 2", "the first part was stored, the second not")
	require.NoError(t, srv.Restart())
	listed, err := st.List(ctx, "ns/")
	require.NoError(t, err)
	require.Empty(t, listed, "no object from the cut upload")
}
