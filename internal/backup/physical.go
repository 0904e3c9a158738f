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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	if err := p.initialise(ctx, data); err != nil {
		return Manifest{}, err
	}
	srv, db, err := p.start(ctx, data)
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
		StartedAt: started, CompletedAt: time.Now().UTC()}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if _, err := p.Store.Put(ctx, ManifestKey(p.Key), bytes.NewReader(raw)); err != nil {
		return Manifest{}, Fail(objectstore.Reason(err), err)
	}
	return m, nil
}

// serverArgs are the temporary server's options: no network (CLONE connects out), no
// binary log, little memory, the clone plugin, and extra.
func (p Physical) serverArgs(data string, extra ...string) []string {
	a := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + filepath.Join(p.Work, "tmp"),
		"--socket=" + filepath.Join(p.Work, "mysqld.sock"), "--pid-file=" + filepath.Join(p.Work, "mysqld.pid"),
		"--log-error=" + filepath.Join(p.Work, "error.log"), "--skip-networking", "--mysqlx=OFF", "--skip-log-bin",
		"--server-id=1", "--plugin-load-add=mysql_clone.so", "--innodb-buffer-pool-size=64M",
		"--secure-file-priv=" + filepath.Join(p.Work, "tmp")}
	if os.Geteuid() == 0 {
		a = append(a, "--user=root") // only in tests: backup pods run as mysql
	}
	return append(a, extra...)
}

func (p Physical) initialise(ctx context.Context, data string) error {
	args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + data,
		"--log-error=" + filepath.Join(p.Work, "initialise.log")}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.CommandContext(ctx, p.Mysqld, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.Work, "initialise.log"))
		return Fail(diskReason(string(out)+string(log), mysqlv1beta1.ReasonBackupPodFailed),
			fmt.Errorf("initialising the temporary server: %w: %s%s", err, out, lastLines(string(log), 5)))
	}
	return nil
}

// server is the temporary mysqld.
type server struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// start runs a temporary server on data and connects to it as root over its socket.
func (p Physical) start(ctx context.Context, data string, extra ...string) (*server, *sql.DB, error) {
	cmd := exec.Command(p.Mysqld, p.serverArgs(data, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("starting the temporary server: %w", err))
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", filepath.Join(p.Work, "mysqld.sock")
	cfg.Timeout, cfg.ReadTimeout = 5*time.Second, 0
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		s.stop()
		return nil, nil, Fail(mysqlv1beta1.ReasonBackupPodFailed, err)
	}
	wait := p.StartTimeout
	if wait == 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err == nil {
			return s, db, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(p.Work, "error.log"))
			db.Close()
			return nil, nil, Fail(diskReason(string(log), mysqlv1beta1.ReasonBackupPodFailed),
				fmt.Errorf("the temporary server exited: %s", lastLines(string(log), 5)))
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			db.Close()
			s.stop()
			return nil, nil, Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("the temporary server did not answer within %s: %w", wait, err))
		}
	}
}

// cloneInfo is what the copy holds.
type cloneInfo struct {
	gtid, file, version string
	pos                 int64
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
// position the clone recorded, the version. Grants are skipped: the copy has the
// source's accounts, and the server has no network. auto.cnf goes afterwards, so that
// a server restored from the copy gets a server_uuid of its own.
func (p Physical) readCopy(ctx context.Context, dir string) (cloneInfo, error) {
	srv, db, err := p.start(ctx, dir, "--skip-grant-tables")
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

// diskReason is BackupDiskFull when text speaks of a full disk, else otherwise.
func diskReason(text, otherwise string) string {
	if strings.Contains(text, "No space left") || strings.Contains(text, "errno: 28") || strings.Contains(text, "Errcode: 28") ||
		strings.Contains(text, "disk is full") {
		return mysqlv1beta1.ReasonBackupDiskFull
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
