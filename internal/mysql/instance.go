package mysql

import (
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Status is what one instance reports about itself.
type Status struct {
	ServerUUID              string
	GTIDExecuted            string
	GTIDPurged              string
	ReadOnly, SuperReadOnly bool
	// Replica is nil when the instance replicates from nobody.
	Replica *ReplicaStatus
	// Clone is the instance's last clone as a recipient (nil when it never was one).
	Clone *CloneStatus
	// SemiSyncSource is whether the primary side of semi-sync is on (and clients how many
	// replicas are connected as semi-sync replicas); SemiSyncReplica the replica side.
	SemiSyncSource        bool
	SemiSyncSourceClients int
	SemiSyncReplica       bool
	// TLSNotAfter is the expiry of the certificate mysqld serves now (status variable
	// Ssl_server_not_after): it changes when ALTER INSTANCE RELOAD TLS loads a renewed one.
	// Zero when mysqld serves none.
	TLSNotAfter time.Time
}

// ReplicaStatus is the default replication channel's state.
type ReplicaStatus struct {
	SourceHost            string
	SourcePort            int
	IORunning, SQLRunning bool
	// IOConnecting: the receiver is (re)connecting to its source; it may resume receiving
	// (and acknowledging) any moment.
	IOConnecting bool
	// ReceivedGTIDSet is what the replica has received (it may not have applied it all).
	ReceivedGTIDSet string
	LastIOError     string
	LastSQLError    string
	// TLSCAFile and TLSVerifyName are the channel's SOURCE_SSL_CA and
	// SOURCE_SSL_VERIFY_SERVER_CERT.
	TLSCAFile     string
	TLSVerifyName bool
}

// TLSAs says whether the channel checks its source's certificate as o asks.
func (r *ReplicaStatus) TLSAs(o ReplicaOptions) bool {
	if !o.TLS {
		return r.TLSCAFile == "" && !r.TLSVerifyName
	}
	return r.TLSCAFile == o.TLSCAFile && r.TLSVerifyName == o.TLSVerifyName
}

// CloneStatus is performance_schema.clone_status: the last clone into this instance. It
// survives the restart that ends a clone.
type CloneStatus struct {
	// State is "Not Started", "In Progress", "Completed" or "Failed".
	State string
	// Error is the failed clone's error number and message ("" otherwise).
	Error string
}

// Clone states of performance_schema.clone_status.
const (
	CloneInProgress = "In Progress"
	CloneCompleted  = "Completed"
	CloneFailed     = "Failed"
)

// PrimaryOptions configure an instance as the writable primary.
type PrimaryOptions struct {
	SemiSync            bool
	WaitForReplicaCount int
	Timeout             time.Duration
}

// ReplicaOptions configure an instance as a replica of a source.
type ReplicaOptions struct {
	SourceHost     string
	SourcePort     int
	User, Password string
	SemiSync       bool
	// TLS encrypts the connection to the source. TLSCAFile (a path on the replica) makes
	// the replica verify the source's certificate against that CA; TLSVerifyName also
	// checks that the certificate names SourceHost. A source that fails either check is
	// refused: the receiver stops with a connection error.
	TLS           bool
	TLSCAFile     string
	TLSVerifyName bool
	// Renew points the channel at its source again even when it replicates from it as
	// asked already: a new password (which the channel's status does not show) takes effect.
	Renew bool
}

// CloneOptions seed an instance with a copy of a donor's data.
type CloneOptions struct {
	DonorHost      string
	DonorPort      int
	User, Password string
	// TLS encrypts the copy; TLSCAFile (a path on the recipient) makes the recipient verify
	// the donor's certificate against that CA (clone_ssl_ca), and a donor that fails is
	// refused before anything is copied.
	TLS       bool
	TLSCAFile string
}

// Instance is one mysqld, as the topology manager sees it.
type Instance interface {
	// Ping asks the server for an answer and nothing else (the cheapest round trip).
	Ping(ctx context.Context) error
	Status(ctx context.Context) (*Status, error)
	ConfigurePrimary(ctx context.Context, o PrimaryOptions) error
	ConfigureReplica(ctx context.Context, o ReplicaOptions) error
	// PrepareClone readies the instance to receive a clone from the donor; Clone then runs
	// the clone itself, which replaces the data and restarts mysqld (see Clone).
	PrepareClone(ctx context.Context, o CloneOptions) error
	Clone(ctx context.Context, o CloneOptions) error
	SetSuperReadOnly(ctx context.Context, on bool) error
	// ReloadTLS makes mysqld read its certificate, key and CA files again (ALTER INSTANCE
	// RELOAD TLS): new connections get the renewed certificate, open ones keep theirs. On
	// a failure mysqld keeps serving what it had.
	ReloadTLS(ctx context.Context) error
	// Variables reads global system variables; SetGlobal sets one on the running mysqld.
	Variables(ctx context.Context, names []string) (map[string]string, error)
	SetGlobal(ctx context.Context, name string, value any) error
	// Fence sets super_read_only and ends every client session but keep's (see Fence).
	Fence(ctx context.Context, keep ...string) error
	// StopReplication stops both threads (all=true) or only the receiver (all=false).
	StopReplication(ctx context.Context, all bool) error
	KillConnections(ctx context.Context, exceptUsers ...string) error
	WaitForGTID(ctx context.Context, set string, timeout time.Duration) error
	GTIDSubtract(ctx context.Context, a, b string) (string, error)
	// EnsureAccount creates an application's database and account (see EnsureAccount).
	EnsureAccount(ctx context.Context, o AccountOptions) error
	// Wide and NarrowAccount narrow the operator's account of an earlier release in place
	// (see NarrowAccount).
	Wide(ctx context.Context) (bool, error)
	NarrowAccount(ctx context.Context, o NarrowOptions) error
	// RetainPasswords and DiscardOldPasswords rotate the operator's accounts' passwords
	// (see rotation.go); ConfigureReplica with ReplicaOptions.Renew gives a channel the new one.
	RetainPasswords(ctx context.Context, changes []PasswordChange) error
	DiscardOldPasswords(ctx context.Context, users []string) error
	Exec(ctx context.Context, stmt string, args ...any) error
	ExecUnlogged(ctx context.Context, stmts ...string) error
	Close() error
}

// ErrWaitTimeout means WaitForGTID gave up before the set was applied.
var ErrWaitTimeout = errors.New("timed out waiting for the GTID set")

// Config says how to reach an instance.
type Config struct {
	Addr           string // host:port
	User, Password string
	TLS            *tls.Config // nil: no TLS (the driver then asks the server for its RSA key)
	// Timeout bounds connecting (TCP and the handshake); default 5s.
	Timeout time.Duration
	// IOTimeout bounds each read and write on a connection; default 30s. Every call also
	// carries its caller's context deadline, usually much shorter: this is the backstop for
	// a connection that stops answering, and must exceed the longest statement sent on it
	// (a WaitForGTID's wait, a whole CLONE on the connection that runs one).
	IOTimeout time.Duration
}

type instance struct {
	db  *sql.DB
	cfg Config
}

// Open returns a pooled connection to one instance; no connection is made until used.
func Open(cfg Config) (Instance, error) {
	// A connector, not a DSN string: a DSN cannot carry the *tls.Config.
	conn, err := mysql.NewConnector(driverConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("while opening %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	// A handful of connections is plenty: statements to one instance are sequential.
	db.SetMaxOpenConns(3)
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(5 * time.Minute)
	return &instance{db: db, cfg: cfg}, nil
}

func driverConfig(cfg Config) *mysql.Config {
	timeout, io := cfg.Timeout, cfg.IOTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if io <= 0 {
		io = 30 * time.Second
	}
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", cfg.Addr, cfg.User, cfg.Password
	c.Timeout, c.ReadTimeout, c.WriteTimeout = timeout, io, io
	c.AllowNativePasswords = true
	if cfg.TLS != nil {
		c.TLS = cfg.TLS
	}
	return c
}

func (i *instance) Close() error { return i.db.Close() }

func (i *instance) Ping(ctx context.Context) error {
	if err := i.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s: ping: %w", i.cfg.Addr, err)
	}
	return nil
}

func (i *instance) Exec(ctx context.Context, stmt string, args ...any) error {
	if _, err := i.db.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("%s: %s: %w", i.cfg.Addr, firstWords(stmt), err)
	}
	return nil
}

// ExecUnlogged runs statements in one session with the binary log off for it: they
// change only this instance and leave no GTID (accounts every instance creates for
// itself must not become transactions the others lack).
func (i *instance) ExecUnlogged(ctx context.Context, stmts ...string) error {
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: connecting: %w", i.cfg.Addr, err)
	}
	defer conn.Close()
	// The session goes back to the pool afterwards: it must log again, or every later
	// statement on it would silently skip the binary log. If that cannot be restored,
	// the connection is thrown away instead.
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_log_bin = 1"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	for _, s := range append([]string{"SET SESSION sql_log_bin = 0"}, stmts...) {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", i.cfg.Addr, firstWords(s), err)
		}
	}
	return nil
}

func (i *instance) execAll(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if err := i.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// firstWords names a statement in errors without its arguments (passwords).
func firstWords(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) > 4 {
		f = f[:4]
	}
	return strings.Join(f, " ")
}
