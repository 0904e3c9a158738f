package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// tempServer is a mysqld the pod runs for itself on a folder of its own: socket only,
// no binary log. A physical backup clones into one; a restore re-keys the accounts of
// the restored data with one, or replays a dump into one.
type tempServer struct {
	mysqld, work string
	// startTimeout bounds its start (default a minute).
	startTimeout time.Duration
	// failReason is a failure's reason, diskFullReason that of a full disk.
	failReason, diskFullReason string
}

// socket is the server's socket; it listens on nothing else.
func (t tempServer) socket() string { return filepath.Join(t.work, "mysqld.sock") }

func (t tempServer) diskReason(text, otherwise string) string {
	return diskFull(text, t.diskFullReason, otherwise)
}

// serverArgs are the temporary server's options: no network (CLONE connects out), no
// binary log, little memory, the clone plugin (a physical backup's CLONE, and its copy's
// clone_status), and extra.
func (t tempServer) serverArgs(data string, extra ...string) []string {
	a := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + filepath.Join(t.work, "tmp"),
		"--socket=" + t.socket(), "--pid-file=" + filepath.Join(t.work, "mysqld.pid"),
		"--log-error=" + filepath.Join(t.work, "error.log"), "--skip-networking", "--mysqlx=OFF", "--skip-log-bin",
		"--server-id=1", "--plugin-load-add=mysql_clone.so", "--innodb-buffer-pool-size=64M",
		"--secure-file-priv=" + filepath.Join(t.work, "tmp")}
	if os.Geteuid() == 0 {
		a = append(a, "--user=root") // only in tests: backup and restore pods run as mysql
	}
	return append(a, extra...)
}

func (t tempServer) initialise(ctx context.Context, data string) error {
	args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + data,
		"--tmpdir=" + filepath.Join(t.work, "tmp"), "--log-error=" + filepath.Join(t.work, "initialise.log")}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.CommandContext(ctx, t.mysqld, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(t.work, "initialise.log"))
		return Fail(t.diskReason(string(out)+string(log), t.failReason),
			fmt.Errorf("initialising the temporary server: %w: %s%s", err, out, errorLines(string(log), 5)))
	}
	return nil
}

// server is the temporary mysqld.
type server struct {
	cmd  *exec.Cmd
	done chan struct{}
	// exit is how it exited, once done is closed.
	exit error
}

// shutdownTimeout bounds a clean shutdown (InnoDB flushes its dirty pages).
const shutdownTimeout = 10 * time.Minute

// shutdown stops the server and waits for a clean exit: the data it leaves must start
// without crash recovery being the only thing that makes it whole.
func (s *server) shutdown() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return errors.New("the temporary server is not running")
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(shutdownTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
		return fmt.Errorf("the temporary server did not shut down within %s", shutdownTimeout)
	}
	s.cmd = nil
	if s.exit != nil {
		return fmt.Errorf("the temporary server's shutdown: %w", s.exit)
	}
	return nil
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
func (t tempServer) start(ctx context.Context, data string, extra ...string) (*server, *sql.DB, error) {
	cmd := exec.Command(t.mysqld, t.serverArgs(data, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, Fail(t.failReason, fmt.Errorf("starting the temporary server: %w", err))
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { s.exit = cmd.Wait(); close(s.done) }()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", t.socket()
	cfg.Timeout, cfg.ReadTimeout = 5*time.Second, 0
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		s.stop()
		return nil, nil, Fail(t.failReason, err)
	}
	wait := t.startTimeout
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
			log, _ := os.ReadFile(filepath.Join(t.work, "error.log"))
			db.Close()
			return nil, nil, Fail(t.diskReason(string(log), t.failReason),
				fmt.Errorf("the temporary server exited: %s", errorLines(string(log), 5)))
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			db.Close()
			s.stop()
			return nil, nil, Fail(t.failReason, fmt.Errorf("the temporary server did not answer within %s: %w", wait, err))
		}
	}
}

// errorLines are the first n of a server log's [ERROR] lines (the first says why; what
// follows is its consequences), or its last n lines when it has none.
func errorLines(log string, n int) string {
	var errs []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "[ERROR]") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		return lastLines(log, n)
	}
	return strings.Join(errs[:min(n, len(errs))], "\n")
}
