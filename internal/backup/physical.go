package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/klauspost/compress/zstd"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// Physical is a physical backup's settings. A temporary mysqld on an empty data folder in
// Work clones the source with CLONE INSTANCE … DATA DIRECTORY (the source's InnoDB data,
// consistent, with its GTID set), and the copy is stored as a zstd-compressed tar. Work
// needs room for the whole data set.
type Physical struct {
	// Mysqld is the server's path (the backup pod's image is the cluster's).
	Mysqld, Work  string
	Source        Source
	Store         Store
	Cluster, Name string
	Key           string
	// StartTimeout bounds the temporary server's start (default a minute).
	StartTimeout time.Duration
}

// Run clones the source and stores the copy and its manifest.
func (p Physical) Run(ctx context.Context) (Manifest, error) {
	started := time.Now().UTC()
	data, clone := filepath.Join(p.Work, "data"), filepath.Join(p.Work, "clone")
	for _, d := range []string{p.Work, filepath.Join(p.Work, "tmp")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return Manifest{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, err)
		}
	}
	if err := p.temp().initialise(ctx, data); err != nil {
		return Manifest{}, err
	}
	srv, db, err := p.temp().start(ctx, data)
	if err != nil {
		return Manifest{}, err
	}
	defer srv.stop()
	err = p.clone(ctx, db, clone)
	db.Close()
	srv.stop()
	if err != nil {
		return Manifest{}, err
	}
	info, err := p.readCopy(ctx, clone)
	if err != nil {
		return Manifest{}, err
	}
	obj, err := p.store(ctx, clone)
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{Version: ManifestVersion, Cluster: p.Cluster, Name: p.Name, Method: string(mysqlv1beta1.BackupMethodPhysical),
		Source: p.Source.Instance, Key: obj.Key, Location: p.Store.URL(obj.Key), Compression: "zstd", Size: obj.Size,
		SHA256: obj.SHA256, GTIDSet: info.gtid, BinlogFile: info.file, BinlogPosition: info.pos, MySQLVersion: info.version,
		StartedAt: started, CompletedAt: time.Now().UTC(), Tables: info.tables}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if _, err := p.Store.Put(ctx, ManifestKey(p.Key), bytes.NewReader(raw)); err != nil {
		return Manifest{}, Fail(objectstore.Reason(err), err)
	}
	return m, nil
}

// cloneInfo is what the copy holds.
type cloneInfo struct {
	gtid, file, version string
	pos                 int64
	tables              map[string]TableSum
}

// clone copies the source into dir.
func (p Physical) clone(ctx context.Context, db *sql.DB, dir string) error {
	donor := net.JoinHostPort(p.Source.Host, strconv.Itoa(p.Source.Port))
	if _, err := db.ExecContext(ctx, "SET GLOBAL clone_valid_donor_list = ?", donor); err != nil {
		return Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("allowing the donor: %w", err))
	}
	q := fmt.Sprintf("CLONE INSTANCE FROM '%s'@'%s':%d IDENTIFIED BY '%s' DATA DIRECTORY = '%s'",
		sqlString(p.Source.User), sqlString(p.Source.Host), p.Source.Port, sqlString(p.Source.Password), sqlString(dir))
	if _, err := db.ExecContext(ctx, q); err != nil {
		return cloneFailure(err)
	}
	return nil
}

// readCopy starts a server on the copy (which proves it starts) and reads what it holds:
// its GTID set (mysql.gtid_executed, kept at every commit), the source's binary log
// position the clone recorded, the version, every user table's row count and checksum. Grants are skipped: the copy has the
// source's accounts, and the server has no network. auto.cnf goes afterwards, so that
// a server restored from the copy gets a server_uuid of its own.
func (p Physical) readCopy(ctx context.Context, dir string) (cloneInfo, error) {
	srv, db, err := p.temp().start(ctx, dir, "--skip-grant-tables")
	if err != nil {
		return cloneInfo{}, err
	}
	defer srv.stop()
	defer db.Close()
	var info cloneInfo
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed, VERSION()").Scan(&info.gtid, &info.version); err != nil {
		return cloneInfo{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("reading the copy's GTID set: %w", err))
	}
	info.gtid = strings.ReplaceAll(info.gtid, "\n", "")
	var file sql.NullString
	var pos sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT BINLOG_FILE, BINLOG_POSITION FROM performance_schema.clone_status").Scan(&file, &pos); err == nil {
		info.file, info.pos = file.String, pos.Int64
	}
	if info.tables, err = tableSums(ctx, db); err != nil {
		return cloneInfo{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("reading the copy's tables: %w", err))
	}
	db.Close()
	srv.stop()
	if err := os.Remove(filepath.Join(dir, "auto.cnf")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cloneInfo{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, err)
	}
	if info.gtid == "" {
		return cloneInfo{}, Fail(mysqlv1beta1.ReasonDumpIncomplete, errors.New("the copy holds no GTID set"))
	}
	return info, nil
}

// cloneFailure names what went wrong with CLONE from its error.
func cloneFailure(err error) error {
	msg := err.Error()
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		msg = fmt.Sprintf("%d: %s", me.Number, me.Message)
	}
	reason := mysqlv1beta1.ReasonDumpFailed
	switch {
	case strings.Contains(msg, "1045") || strings.Contains(msg, "Access denied"):
		reason = mysqlv1beta1.ReasonSourceAccessDenied
	case strings.Contains(msg, "2003") || strings.Contains(msg, "2013") || strings.Contains(msg, "2005") ||
		strings.Contains(msg, "Can't connect") || strings.Contains(msg, "Lost connection"):
		reason = mysqlv1beta1.ReasonSourceUnreachable
	default:
		reason = diskReason(msg, reason)
	}
	return Fail(reason, fmt.Errorf("CLONE INSTANCE: %s", msg))
}

// temp is the temporary server a physical backup clones into and then reads the copy with.
func (p Physical) temp() tempServer {
	return tempServer{mysqld: p.Mysqld, work: p.Work, startTimeout: p.StartTimeout,
		failReason: mysqlv1beta1.ReasonBackupPodFailed, diskFullReason: mysqlv1beta1.ReasonBackupDiskFull}
}

// diskReason is BackupDiskFull when text speaks of a full disk, else otherwise.
func diskReason(text, otherwise string) string {
	return diskFull(text, mysqlv1beta1.ReasonBackupDiskFull, otherwise)
}

// diskFull is full when text speaks of a full disk, else otherwise.
func diskFull(text, full, otherwise string) string {
	if strings.Contains(text, "No space left") || strings.Contains(text, "errno: 28") || strings.Contains(text, "Errcode: 28") ||
		strings.Contains(text, "disk is full") {
		return full
	}
	return otherwise
}

// store archives dir as a zstd-compressed tar on its way to the store.
func (p Physical) store(ctx context.Context, dir string) (objectstore.Object, error) {
	pr, pw := io.Pipe()
	go func() {
		enc, err := zstd.NewWriter(pw)
		if err == nil {
			err = writeTar(enc, dir)
			if cerr := enc.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	obj, err := p.Store.Put(ctx, p.Key, pr)
	pr.CloseWithError(errors.New("upload ended"))
	if err != nil {
		return objectstore.Object{}, Fail(objectstore.Reason(err), err)
	}
	return obj, nil
}

// writeTar writes dir's folders and regular files, by their paths under dir.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, links: not data
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving the copy: %w", err)
	}
	return tw.Close()
}

func sqlString(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
