package mysqld

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Addr is host:port of the instance.
func (i *Instance) Addr() string {
	return net.JoinHostPort(i.opts.Address, strconv.Itoa(i.opts.Port))
}

// Port is the TCP port mysqld listens on.
func (i *Instance) Port() int { return i.opts.Port }

// Dir is the instance folder.
func (i *Instance) Dir() string { return i.opts.Dir }

// ServerID is the instance's server_id.
func (i *Instance) ServerID() uint32 { return i.opts.ServerID }

// Starts counts how often mysqld was started (1 + restarts).
func (i *Instance) Starts() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.starts
}

// PID is the running mysqld's process ID, or 0 when it is not running.
func (i *Instance) PID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cmd == nil || i.cmd.Process == nil || i.cmd.ProcessState != nil {
		return 0
	}
	return i.cmd.Process.Pid
}

// DSN is a go-sql-driver/mysql data source name for root over TCP.
func (i *Instance) DSN() string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Passwd = RootPassword
	c.Net = "tcp"
	c.Addr = i.Addr()
	c.Timeout = 2 * time.Second
	c.ReadTimeout = 30 * time.Second
	c.WriteTimeout = 30 * time.Second
	c.AllowNativePasswords = true
	return c.FormatDSN()
}

// DB opens a connection pool to the instance as root; the caller closes it.
func (i *Instance) DB() (*sql.DB, error) {
	db, err := sql.Open("mysql", i.DSN())
	if err != nil {
		return nil, fmt.Errorf("while opening %s: %w", i.Addr(), err)
	}
	return db, nil
}

// WaitReady waits until the server answers a query as root.
func (i *Instance) WaitReady(ctx context.Context) error {
	db, err := i.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(3 * time.Minute)
	var lastErr error
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		lastErr = db.QueryRowContext(qctx, "SELECT 1").Scan(new(int))
		cancel()
		if lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("while waiting for mysqld on %s: %w", i.Addr(), ctx.Err())
		}
		if !i.supervising() {
			return fmt.Errorf("mysqld on %s exited during start-up (see %s/error.log): %w",
				i.Addr(), i.opts.Dir, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("mysqld on %s not ready after 3m (see %s/error.log): %w", i.Addr(), i.opts.Dir, lastErr)
}

func (i *Instance) supervising() bool {
	i.mu.Lock()
	ch := i.exited
	i.mu.Unlock()
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// SetRestartPolicy changes what the supervisor does at mysqld's next exit.
func (i *Instance) SetRestartPolicy(p RestartPolicy) {
	i.mu.Lock()
	i.policy = p
	i.mu.Unlock()
}

// Kill sends SIGKILL to mysqld: a crash. The supervisor restarts it as its policy says.
func (i *Instance) Kill() error {
	pid := i.PID()
	if pid == 0 {
		return errors.New("mysqld is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("while killing mysqld %d: %w", pid, err)
	}
	return nil
}

// Resume starts mysqld again after the supervisor gave up on it (RestartNever, or Stop),
// keeping its data: a lost node that comes back. It waits until the server is ready.
func (i *Instance) Resume(ctx context.Context) error {
	if i.supervising() {
		return nil
	}
	i.mu.Lock()
	i.stopped = false
	i.mu.Unlock()
	if err := i.startSupervised(); err != nil {
		return err
	}
	return i.WaitReady(ctx)
}

// Stop shuts mysqld down cleanly (SIGTERM), killing it if it has not exited within a
// minute, and stops supervising it. It is safe to call more than once.
func (i *Instance) Stop() {
	i.mu.Lock()
	i.stopped = true
	ch := i.exited
	i.mu.Unlock()
	if pid := i.PID(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	select {
	case <-ch:
	case <-time.After(time.Minute):
		if pid := i.PID(); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-ch
	}
}

// ErrorLogTail returns up to n bytes from the end of the instance's error log.
func (i *Instance) ErrorLogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(i.opts.Dir, "error.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePort asks the kernel for a port that is free on addr right now.
func freePort(addr string) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			return 0, fmt.Errorf("while looking for a free port on %s: %w", addr, err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		// The port is free again once closed, and a server started at the same moment
		// may be given it too (two of a test's servers got one port, and the test talked
		// to one server twice): a port handed out once is not handed out again.
		handedOut.Lock()
		fresh := !handedOut.ports[p]
		handedOut.ports[p] = true
		handedOut.Unlock()
		if fresh {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no port on %s that was not handed out already", addr)
}

// handedOut are the ports freePort gave out in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}
