package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// restoreFlags are the restore command's settings; passwords come from the environment.
type restoreFlags struct {
	storeFlags
	key, method, sha256, gtidSet string
	size                         int64
	mysqld, mysql, data, work    string
	report                       string
	timeout                      time.Duration
	// binlogPrefix, targetTime and mysqlbinlog are a point-in-time recovery's.
	binlogPrefix, targetTime, targetGTID, mysqlbinlog string
}

func parseRestoreFlags(args []string) (restoreFlags, error) {
	var f restoreFlags
	fs := flag.NewFlagSet("manager restore", flag.ContinueOnError)
	fs.StringVar(&f.key, "key", "", "the backup's data object")
	fs.StringVar(&f.method, "method", "", "Logical or Physical")
	fs.StringVar(&f.sha256, "sha256", "", "the data's SHA-256, as the backup's status says")
	fs.Int64Var(&f.size, "size", 0, "the data's size in bytes (0: not checked)")
	fs.StringVar(&f.gtidSet, "gtid-set", "", "the backup's GTID set")
	fs.StringVar(&f.mysqld, "mysqld", "mysqld", "the server")
	fs.StringVar(&f.mysql, "mysql", "mysql", "the client (a logical backup's replay)")
	fs.StringVar(&f.data, "data", "", "the instance's data folder (empty)")
	fs.StringVar(&f.work, "work", os.TempDir(), "a private folder")
	fs.StringVar(&f.report, "report", "/dev/termination-log", "where the result goes")
	fs.StringVar(&f.targetTime, "target-time", "", "recover to this time (RFC 3339) with the binary log archive")
	fs.StringVar(&f.targetGTID, "target-gtid", "", "recover up to and with this transaction (uuid:N) with the binary log archive")
	fs.StringVar(&f.binlogPrefix, "binlog-prefix", "", "where the binary log archive is in the store (with --target-time or --target-gtid)")
	fs.StringVar(&f.mysqlbinlog, "mysqlbinlog", "mysqlbinlog", "the binary log reader (with --target-time)")
	f.register(fs)
	fs.DurationVar(&f.timeout, "timeout", 2*time.Hour, "the whole run's deadline")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	for name, v := range map[string]string{"key": f.key, "sha256": f.sha256, "gtid-set": f.gtidSet, "data": f.data} {
		if v == "" {
			return f, fmt.Errorf("--%s is required", name)
		}
	}
	switch mysqlv1beta1.BackupMethod(f.method) {
	case mysqlv1beta1.BackupMethodLogical, mysqlv1beta1.BackupMethodPhysical:
	default:
		return f, fmt.Errorf("--method %q: not Logical or Physical", f.method)
	}
	if f.targetTime != "" {
		if _, err := time.Parse(time.RFC3339, f.targetTime); err != nil {
			return f, fmt.Errorf("--target-time %q: not an RFC 3339 time: %w", f.targetTime, err)
		}
	}
	if f.targetTime != "" && f.targetGTID != "" {
		return f, errors.New("--target-time and --target-gtid: at most one")
	}
	if (f.targetTime != "" || f.targetGTID != "") && f.binlogPrefix == "" {
		return f, errors.New("--binlog-prefix is required with --target-time or --target-gtid")
	}
	return f, f.check()
}

// recovery is the point-in-time recovery the flags ask for, or nil.
func (f restoreFlags) recovery(st backup.Reader) *backup.Recovery {
	if f.targetTime == "" && f.targetGTID == "" {
		return nil
	}
	rc := &backup.Recovery{Store: st, Prefix: f.binlogPrefix, TargetGTID: f.targetGTID, Mysqlbinlog: f.mysqlbinlog}
	if f.targetTime != "" {
		rc.Target, _ = time.Parse(time.RFC3339, f.targetTime) // checked by parseRestoreFlags
	}
	return rc
}

// runRestore restores the backup into the data folder and writes its result to the
// report file, whatever happened: the operator reads it from the pod's status.
func runRestore(args []string) int {
	f, err := parseRestoreFlags(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "manager restore:", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	done, err := func() (backup.Restored, error) {
		st, err := f.store()
		if err != nil {
			return backup.Restored{}, backup.Fail(mysqlv1beta1.ReasonNoBackupTarget, err)
		}
		sql := resources.RekeySQL
		if os.Getenv(resources.ApplicationDatabaseVar) != "" {
			sql += resources.ApplicationGrantSQL
		}
		accounts, err := backup.Statements(sql, os.Getenv)
		if err != nil {
			return backup.Restored{}, backup.Fail(mysqlv1beta1.ReasonRestorePodFailed, err)
		}
		return backup.Restore{Mysqld: f.mysqld, Mysql: f.mysql, Store: st, Key: f.key, SHA256: f.sha256,
			GTIDSet: f.gtidSet, Method: mysqlv1beta1.BackupMethod(f.method), Size: f.size,
			Data: f.data, Work: f.work, Accounts: accounts,
			Recovery: f.recovery(st), RootPassword: os.Getenv("MYSQL_ROOT_PASSWORD")}.Run(ctx)
	}()
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = backup.Fail(mysqlv1beta1.ReasonDeadlineExceeded, fmt.Errorf("not done within %s: %w", f.timeout, err))
	}
	return report("manager restore", f.report, backup.EncodeRestored(done, err, mysqlv1beta1.ReasonRestorePodFailed), err)
}
