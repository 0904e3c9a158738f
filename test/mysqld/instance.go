package mysqld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// RestartPolicy says when the supervisor starts mysqld again after it exits.
type RestartPolicy int

const (
	// RestartOnRequest restarts only on exit code 16, mysqld's "restart me" (RESTART and
	// CLONE INSTANCE ask for it).
	RestartOnRequest RestartPolicy = iota
	// RestartAlways restarts after any exit, as a kubelet does for restartPolicy Always.
	RestartAlways
	// RestartNever leaves mysqld stopped: a lost node.
	RestartNever
)

// exitRestartRequested is the exit code with which mysqld asks its supervisor to start it again.
const exitRestartRequested = 16

// Options describe one instance.
type Options struct {
	// Dir holds the instance: data/, tmp/, files/ (secure_file_priv), error.log, mysqld.out.
	// A Dir that already has data/ is started as it is (a restarted pod keeps its volume).
	Dir string
	// Address is the IP mysqld binds to; default 127.0.0.1.
	Address string
	// Port; 0 picks a free one.
	Port int
	// ServerID must differ between instances that replicate; default: the port.
	ServerID uint32
	// ReportHost is what replicas report to their source; default: Address.
	ReportHost string
	// Restart is the supervisor's policy.
	Restart RestartPolicy
	// ExtraArgs go after the built-in options, so they override them.
	ExtraArgs []string
	// Hostname, when set, runs mysqld in its own UTS namespace with this host name, so
	// @@hostname says which pod it serves, as it does in Kubernetes.
	Hostname string
	// Log receives supervisor messages (start, exit, restart); default: discarded.
	Log io.Writer
}

// Instance is one supervised mysqld.
type Instance struct {
	install *Install
	opts    Options

	mu      sync.Mutex
	cmd     *exec.Cmd
	policy  RestartPolicy
	stopped bool
	starts  int
	exited  chan struct{} // closed when the supervisor loop ends
}

// Start prepares the data folder (a copy of the template when it is new) and starts
// mysqld under a supervisor; it returns once the server accepts connections.
func (in *Install) Start(ctx context.Context, o Options) (*Instance, error) {
	if o.Dir == "" {
		return nil, errors.New("mysqld: Options.Dir is required")
	}
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if o.Port == 0 {
		p, err := freePort(o.Address)
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	if o.ServerID == 0 {
		o.ServerID = uint32(o.Port)
	}
	if o.ReportHost == "" {
		o.ReportHost = o.Address
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := in.prepare(ctx, o.Dir); err != nil {
		return nil, err
	}
	inst := &Instance{install: in, opts: o, policy: o.Restart}
	if err := inst.startSupervised(); err != nil {
		return nil, err
	}
	if err := inst.WaitReady(ctx); err != nil {
		inst.Stop()
		return nil, err
	}
	return inst, nil
}

// prepare makes the instance folder, copying the template into data/ when it is new.
func (in *Install) prepare(ctx context.Context, dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "tmp"), filepath.Join(dir, "files")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("while creating %s: %w", d, err)
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "mysql.ibd")); err == nil {
		return nil
	}
	tpl, err := in.template(ctx)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("while clearing %s: %w", data, err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", tpl, data).CombinedOutput(); err != nil {
		return fmt.Errorf("while copying the template data folder: %w: %s", err, out)
	}
	// auto.cnf holds server_uuid: without it each copy makes its own on first start.
	if err := os.Remove(filepath.Join(data, "auto.cnf")); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("while removing auto.cnf: %w", err)
	}
	return nil
}

// Socket is the path of mysqld's local socket.
func (i *Instance) Socket() string { return filepath.Join(i.opts.Dir, "mysqld.sock") }

// args are mysqld's options: GTID replication ready, small memory, no X protocol.
func (i *Instance) args() []string {
	d := i.opts.Dir
	a := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(d, "data"),
		"--tmpdir=" + filepath.Join(d, "tmp"),
		// mysqld refuses to start unless secure_file_priv names a folder that exists.
		"--secure-file-priv=" + filepath.Join(d, "files"),
		"--socket=" + i.Socket(),
		"--pid-file=" + filepath.Join(d, "mysqld.pid"),
		"--log-error=" + filepath.Join(d, "error.log"),
		"--bind-address=" + i.opts.Address,
		"--port=" + strconv.Itoa(i.opts.Port),
		"--mysqlx=OFF",
		"--skip-name-resolve",
		"--server-id=" + strconv.FormatUint(uint64(i.opts.ServerID), 10),
		"--report-host=" + i.opts.ReportHost,
		"--report-port=" + strconv.Itoa(i.opts.Port),
		"--gtid-mode=ON",
		"--enforce-gtid-consistency=ON",
		"--log-bin=binlog",
		"--relay-log=relay-bin",
		"--log-replica-updates=ON",
		"--skip-replica-start",
		// Memory: a default 9.7 takes ~600 MiB; tests run several. performance_schema stays
		// on (replication and clone status live there), only its sizes shrink.
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-buffer-size=4M",
		"--innodb-redo-log-capacity=16M",
		"--key-buffer-size=1M",
		"--max-connections=100",
		"--table-open-cache=256",
		"--performance-schema-max-table-instances=500",
		"--performance-schema-max-table-handles=500",
		"--performance-schema-digests-size=1000",
		"--performance-schema-max-digest-length=1024",
		"--performance-schema-max-sql-text-length=1024",
	}
	if os.Geteuid() == 0 {
		a = append(a, "--user=root") // mysqld refuses to run as root without it
	}
	return append(a, i.opts.ExtraArgs...)
}

func (i *Instance) launch() error {
	out, err := os.OpenFile(filepath.Join(i.opts.Dir, "mysqld.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("while opening mysqld.out: %w", err)
	}
	cmd := exec.Command(i.install.MysqldPath(), i.args()...)
	if i.opts.Hostname != "" {
		// sh and unshare exec in turn, so the PID stays mysqld's own.
		cmd = exec.Command("unshare", append([]string{"--uts", "--", "sh", "-c",
			`hostname "$0" && exec "$@"`, i.opts.Hostname, i.install.MysqldPath()}, i.args()...)...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// MYSQLD_PARENT_PID tells mysqld a supervisor restarts it, which RESTART and CLONE need.
	cmd.Env = append(os.Environ(), "MYSQLD_PARENT_PID="+strconv.Itoa(os.Getpid()))
	// Own process group (a test's ^C does not reach it directly); killed if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("while starting mysqld: %w", err)
	}
	out.Close() // the child has its own descriptor
	i.mu.Lock()
	i.cmd = cmd
	i.starts++
	i.mu.Unlock()
	fmt.Fprintf(i.opts.Log, "mysqld %s:%d started (pid %d)\n", i.opts.Address, i.opts.Port, cmd.Process.Pid)
	return nil
}

// startSupervised launches mysqld and a supervisor goroutine that follows it.
func (i *Instance) startSupervised() error {
	if err := i.launch(); err != nil {
		return err
	}
	exited := make(chan struct{})
	i.mu.Lock()
	i.exited = exited
	i.mu.Unlock()
	go i.supervise(exited)
	return nil
}

// supervise waits for mysqld to exit and starts it again as the policy says.
func (i *Instance) supervise(exited chan struct{}) {
	defer close(exited)
	backoff := 100 * time.Millisecond
	for {
		i.mu.Lock()
		cmd := i.cmd
		i.mu.Unlock()
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		fmt.Fprintf(i.opts.Log, "mysqld %s:%d exited: %v\n", i.opts.Address, i.opts.Port, err)
		i.mu.Lock()
		restart := !i.stopped && (i.policy == RestartAlways ||
			(i.policy == RestartOnRequest && code == exitRestartRequested))
		i.mu.Unlock()
		if !restart {
			return
		}
		if code != exitRestartRequested {
			time.Sleep(backoff) // a crash loop must not spin
			backoff = min(2*backoff, 5*time.Second)
		}
		if err := i.launch(); err != nil {
			fmt.Fprintf(i.opts.Log, "mysqld %s:%d could not restart: %v\n", i.opts.Address, i.opts.Port, err)
			return
		}
	}
}
