package mysqld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Install is one unpacked MySQL server tree with its wrapper scripts.
type Install struct {
	// Dir is the provisioning folder: root/ (the tree), bin/ (wrappers), VERSION.
	Dir string
	// Version is what `mysqld --version` printed when the tree was provisioned.
	Version string
}

// ErrNotProvisioned means no MySQL install was found; `make mysql` provisions one.
var ErrNotProvisioned = errors.New("MySQL is not provisioned (run `make mysql`)")

// DefaultDir is where hack/mysql/provision.sh puts the install: the tool cache shared by
// every checkout on the machine.
func DefaultDir() string {
	cache := os.Getenv("DOLPHIN_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "dolphin")
	}
	return filepath.Join(cache, "mysql", "sid")
}

// Locate finds the install named by DOLPHIN_MYSQL_DIR, or else the default one.
func Locate() (*Install, error) {
	dir := os.Getenv("DOLPHIN_MYSQL_DIR")
	if dir == "" {
		dir = DefaultDir()
	}
	v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("%w: no %s: %w", ErrNotProvisioned, filepath.Join(dir, "VERSION"), err)
	}
	in := &Install{Dir: dir, Version: strings.TrimSpace(string(v))}
	if _, err := os.Stat(in.MysqldPath()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotProvisioned, err)
	}
	return in, nil
}

// MysqldPath is the mysqld wrapper; it keeps the PID of mysqld itself (it execs).
func (in *Install) MysqldPath() string { return filepath.Join(in.Dir, "bin", "mysqld") }

// ClientPath is the wrapper of a client program such as mysql or mysqladmin.
func (in *Install) ClientPath(name string) string { return filepath.Join(in.Dir, "bin", name) }

// ServerVersion is the bare version number, e.g. "9.7.4-2".
func (in *Install) ServerVersion() string {
	f := strings.Fields(in.Version)
	for i, w := range f {
		if w == "Ver" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return in.Version
}

// templateDir is the pristine, never-started data folder for this version and password.
func (in *Install) templateDir() string {
	key := strings.NewReplacer(" ", "_", "/", "_", "(", "", ")", "").Replace(in.ServerVersion())
	return filepath.Join(in.Dir, "templates", key)
}

// template returns a data folder initialised with the test accounts, creating it once per
// install. A file lock makes parallel test binaries wait for one initialisation.
func (in *Install) template(ctx context.Context) (string, error) {
	dir := in.templateDir()
	data := filepath.Join(dir, "data")
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return data, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("while creating %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("while opening the template lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("while locking the template: %w", err)
	}
	if _, err := os.Stat(done); err == nil {
		return data, nil
	}
	if err := in.initialise(ctx, dir, data); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(in.Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("while marking the template complete: %w", err)
	}
	return data, nil
}

// initialise runs mysqld --initialize-insecure with an init file that creates the root
// account for TCP clients. Accounts made here are in the template, so no instance writes
// a transaction of its own before a test does: every gtid_executed starts empty.
func (in *Install) initialise(ctx context.Context, dir, data string) error {
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("while clearing %s: %w", data, err)
	}
	initSQL := filepath.Join(dir, "init.sql")
	sql := fmt.Sprintf(`ALTER USER 'root'@'localhost' IDENTIFIED BY '%[1]s';
CREATE USER 'root'@'%%' IDENTIFIED BY '%[1]s';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%%' WITH GRANT OPTION;
`, RootPassword)
	if err := os.WriteFile(initSQL, []byte(sql), 0o600); err != nil {
		return fmt.Errorf("while writing %s: %w", initSQL, err)
	}
	logFile := filepath.Join(dir, "initialise.log")
	args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + data,
		"--init-file=" + initSQL, "--log-error=" + logFile}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	out, err := exec.CommandContext(ctx, in.MysqldPath(), args...).CombinedOutput()
	if err != nil {
		logText, _ := os.ReadFile(logFile)
		return fmt.Errorf("while initialising a MySQL data folder: %w\n%s%s", err, out, logText)
	}
	return nil
}

// RootPassword is the password of root@'%' and root@localhost in every test instance.
// Test instances are reachable only from their own network namespace or loopback.
const RootPassword = "dolphin-test-root"
