package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dolphin-operator/dolphin/internal/backup"
)

// cmdArchive runs a cluster's binary log archiver (its Deployment's container).
const cmdArchive = "binlog-archive"

// archiveFlags are the archiver's settings; passwords come from the environment.
type archiveFlags struct {
	storeFlags
	primary, domain, prefix string
	adminUser, readerUser   string
	mysqlbinlog, tmp        string
	port                    int
	flush, fileTimeout      time.Duration
	retry                   time.Duration
	once                    bool
}

func parseArchiveFlags(args []string) (archiveFlags, error) {
	var f archiveFlags
	fs := flag.NewFlagSet("manager "+cmdArchive, flag.ContinueOnError)
	fs.StringVar(&f.primary, "primary-host", "", "the address that leads to the primary")
	fs.StringVar(&f.domain, "instance-domain", "", "where an instance's host name resolves (<host>.<domain>)")
	fs.IntVar(&f.port, "port", 3306, "the instances' port")
	fs.StringVar(&f.prefix, "prefix", "", "the archive's place in the store")
	fs.StringVar(&f.adminUser, "admin-user", "", "lists and rotates the logs (password: DOLPHIN_BACKUP_PASSWORD)")
	fs.StringVar(&f.readerUser, "reader-user", "", "copies them (password: DOLPHIN_REPLICATION_PASSWORD)")
	fs.StringVar(&f.mysqlbinlog, "mysqlbinlog", "mysqlbinlog", "mysqlbinlog")
	fs.StringVar(&f.tmp, "tmp", os.TempDir(), "a private folder with room for one file")
	fs.DurationVar(&f.flush, "flush", 5*time.Minute, "how often the primary's log is rotated and archived")
	fs.DurationVar(&f.fileTimeout, "file-timeout", 10*time.Minute, "the bound on copying and storing one file")
	fs.DurationVar(&f.retry, "retry", 15*time.Second, "the wait after a failed round")
	fs.BoolVar(&f.once, "once", false, "one round, then exit (its result is the exit code)")
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	for name, v := range map[string]string{"primary-host": f.primary, "prefix": f.prefix,
		"admin-user": f.adminUser, "reader-user": f.readerUser} {
		if v == "" {
			return f, fmt.Errorf("--%s is required", name)
		}
	}
	if f.flush < time.Second || f.fileTimeout < time.Second || f.retry < time.Second {
		return f, errors.New("--flush, --file-timeout and --retry must be a second or more")
	}
	if f.s3Bucket == "" {
		return f, errors.New("--s3-bucket is required: the archive is kept in object storage")
	}
	return f, nil
}

// runArchive archives until it is stopped, logging each round as a JSON line.
func runArchive(args []string) int {
	f, err := parseArchiveFlags(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "manager "+cmdArchive+":", err)
		}
		return 2
	}
	st, err := f.store()
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager "+cmdArchive+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	a := &backup.Archiver{Mysqlbinlog: f.mysqlbinlog, Tmp: f.tmp, Primary: f.primary, Port: f.port,
		InstanceDomain: f.domain, Store: st, Prefix: f.prefix, Flush: f.flush, FileTimeout: f.fileTimeout,
		Admin:  backup.Credentials{User: f.adminUser, Password: os.Getenv("DOLPHIN_BACKUP_PASSWORD")},
		Reader: backup.Credentials{User: f.readerUser, Password: os.Getenv("DOLPHIN_REPLICATION_PASSWORD")}}
	if f.once {
		r, err := a.Round(ctx)
		logRound(r, err)
		if err != nil {
			return 1
		}
		return 0
	}
	a.Run(ctx, f.retry, logRound)
	return 0
}

// logRound writes one round's outcome to stdout (the pod's log).
func logRound(r backup.Round, err error) {
	line := map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "primary": r.Primary, "host": r.Host,
		"flushed": r.Flushed, "archived": len(r.Archived), "pruned": len(r.Pruned)}
	if err != nil {
		line["error"] = err.Error()
	}
	for _, f := range r.Archived {
		line["last"] = f.Name
	}
	raw, _ := json.Marshal(line)
	fmt.Println(string(raw))
}
