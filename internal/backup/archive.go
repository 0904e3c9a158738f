package backup

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/klauspost/compress/zstd"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// ArchiveStore is where an archive goes: files are put (and pruned), the index read and
// rewritten.
type ArchiveStore interface {
	Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Delete(ctx context.Context, keys ...string) error
}

// Archiver copies the closed binary log files of a cluster's primary to a store, with
// mysqlbinlog --read-from-remote-server --raw: only closed files, which a server never
// writes again, so a copy is whole or is not taken (a copy that does not end with the
// closing rotation is refused). It rotates the primary's log every Flush, so a
// transaction waits at most that long before its file can be archived.
type Archiver struct {
	// Mysqlbinlog is the client's path; Tmp a private folder for option files and copies.
	Mysqlbinlog, Tmp string
	// Primary is the address that leads to the primary (its Service); an archiver that
	// finds an instance's host name there reads from <host name>.<InstanceDomain>, so
	// that every connection of a round reaches the same server through a failover.
	// Empty InstanceDomain: read from Primary itself.
	Primary        string
	Port           int
	InstanceDomain string
	// Admin lists and rotates the logs (RELOAD, REPLICATION CLIENT); Reader copies them
	// (REPLICATION SLAVE).
	Admin, Reader Credentials
	Store         ArchiveStore
	// Prefix is the archive's place in the store.
	Prefix string
	// Flush is how often the primary's log is rotated.
	Flush time.Duration
	// FileTimeout bounds the copy and upload of one file.
	FileTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	lastFlush time.Time
}

// Credentials are an account's name and password.
type Credentials struct{ User, Password string }

// Round is what one round did.
type Round struct {
	// Primary is the server_uuid read from; Host its address.
	Primary, Host string
	// Archived are the files stored this round; Pruned those it deleted (the
	// retention record's backup has all they hold).
	Archived, Pruned []binlog.File
	// Flushed says the round rotated the primary's log.
	Flushed bool
}

func (a *Archiver) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// Run runs a round every Flush until ctx ends, and again after retry when one fails;
// done hears of each.
func (a *Archiver) Run(ctx context.Context, retry time.Duration, done func(Round, error)) {
	for {
		r, err := a.Round(ctx)
		done(r, err)
		wait := a.Flush
		if err != nil {
			wait = min(retry, a.Flush)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Round stores every closed file of the primary the index lacks, rotating the log first
// when Flush has passed; the index is rewritten after each file.
func (a *Archiver) Round(ctx context.Context) (Round, error) {
	db, host, uuid, err := a.primary(ctx)
	if err != nil {
		return Round{}, err
	}
	defer db.Close()
	r := Round{Primary: uuid, Host: host}
	if a.lastFlush.IsZero() || a.now().Sub(a.lastFlush) >= a.Flush {
		if _, err := db.ExecContext(ctx, "FLUSH BINARY LOGS"); err != nil {
			return r, fmt.Errorf("rotating the binary log of %s: %w", host, err)
		}
		a.lastFlush, r.Flushed = a.now(), true
	}
	closed, err := closedFiles(ctx, db)
	if err != nil {
		return r, fmt.Errorf("listing the binary logs of %s: %w", host, err)
	}
	ix, err := a.readIndex(ctx)
	if err != nil {
		return r, err
	}
	for _, name := range closed {
		if ix.Has(uuid, name) {
			continue
		}
		f, err := a.archive(ctx, host, uuid, name)
		if err != nil {
			return r, err
		}
		ix = ix.With(f)
		if err := a.writeIndex(ctx, ix); err != nil {
			return r, err
		}
		r.Archived = append(r.Archived, f)
	}
	ix.CheckedAt, ix.Primary = a.now(), uuid
	if err := a.writeIndex(ctx, ix); err != nil {
		return r, err
	}
	r.Pruned, err = a.prune(ctx, ix)
	return r, err
}

// prune deletes the files the retention record lets go: out of the index first, so
// that a file the index names is always stored; a file whose delete fails is left in
// the store, named by nothing. It is bounded as one file's copy is (FileTimeout).
func (a *Archiver) prune(ctx context.Context, ix binlog.Index) ([]binlog.File, error) {
	ctx, cancel := context.WithTimeout(ctx, a.FileTimeout)
	defer cancel()
	rc, err := a.Store.Get(ctx, binlog.RetentionKey(a.Prefix))
	if objectstore.Reason(err) == mysqlv1beta1.ReasonBackupDataMissing {
		return nil, nil // no record yet: everything stays
	} else if err != nil {
		return nil, fmt.Errorf("reading the archive's retention record: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the archive's retention record: %w", err)
	}
	keep, ok, err := binlog.DecodeRetention(raw)
	if err != nil || !ok {
		return nil, err
	}
	gone, err := ix.Prunable(keep)
	if err != nil || len(gone) == 0 {
		return nil, err
	}
	if err := a.writeIndex(ctx, ix.Without(gone)); err != nil {
		return nil, err
	}
	keys := make([]string, len(gone))
	for i, f := range gone {
		keys[i] = f.Key
	}
	if err := a.Store.Delete(ctx, keys...); err != nil {
		return gone, fmt.Errorf("deleting %d archived files that backup %s has: %w", len(keys), keep.Backup, err)
	}
	return gone, nil
}

// primary connects to the primary and says which server it is; it refuses a writable
// server it cannot tell from a replica.
func (a *Archiver) primary(ctx context.Context) (*sql.DB, string, string, error) {
	db, err := a.open(a.Primary)
	if err != nil {
		return nil, "", "", err
	}
	var hostname, uuid string
	var readOnly bool
	err = db.QueryRowContext(ctx, "SELECT @@hostname, @@server_uuid, @@read_only").Scan(&hostname, &uuid, &readOnly)
	if err == nil && readOnly {
		err = fmt.Errorf("%s leads to %s, which is read-only (not the primary)", a.Primary, hostname)
	}
	if err != nil || a.InstanceDomain == "" {
		if err != nil {
			db.Close()
			return nil, "", "", fmt.Errorf("asking %s for the primary: %w", a.Primary, err)
		}
		return db, a.Primary, uuid, nil
	}
	db.Close()
	host := hostname + "." + a.InstanceDomain
	if db, err = a.open(host); err != nil {
		return nil, "", "", err
	}
	var again string
	if err := db.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&again); err != nil {
		db.Close()
		return nil, "", "", fmt.Errorf("asking %s, the primary %s found, for its uuid: %w", host, a.Primary, err)
	}
	if again != uuid {
		db.Close()
		return nil, "", "", fmt.Errorf("%s is %s, not the primary %s found (%s)", host, again, a.Primary, uuid)
	}
	return db, host, uuid, nil
}

func (a *Archiver) open(host string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = a.Admin.User, a.Admin.Password, "tcp", fmt.Sprintf("%s:%d", host, a.Port)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	cfg.TLSConfig = "preferred"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", host, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// closedFiles are the server's binary log files but the one it writes.
func closedFiles(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		vals := make([]any, len(cols))
		name := new(string)
		vals[0] = name
		for i := 1; i < len(cols); i++ {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		names = append(names, *name)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("the server has no binary log")
	}
	return names[:len(names)-1], nil
}

func (a *Archiver) readIndex(ctx context.Context) (binlog.Index, error) {
	return ReadIndex(ctx, a.Store, a.Prefix)
}

// IndexReader is what reading an archive's index needs of a store.
type IndexReader interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// ReadIndex reads the index of the archive under prefix; an archive not yet begun has
// the empty index.
func ReadIndex(ctx context.Context, st IndexReader, prefix string) (binlog.Index, error) {
	rc, err := st.Get(ctx, binlog.IndexKey(prefix))
	if err != nil {
		if objectstore.Reason(err) == mysqlv1beta1.ReasonBackupDataMissing {
			return binlog.DecodeIndex(nil)
		}
		return binlog.Index{}, err
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return binlog.Index{}, fmt.Errorf("reading the binary log index: %w", err)
	}
	return binlog.DecodeIndex(raw)
}

func (a *Archiver) writeIndex(ctx context.Context, ix binlog.Index) error {
	if _, err := a.Store.Put(ctx, binlog.IndexKey(a.Prefix), bytes.NewReader(ix.Encode())); err != nil {
		return fmt.Errorf("storing the binary log index: %w", err)
	}
	return nil
}

// archive copies one closed file from host, checks that it is whole, and stores it.
func (a *Archiver) archive(ctx context.Context, host, uuid, name string) (binlog.File, error) {
	ctx, cancel := context.WithTimeout(ctx, a.FileTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(a.Tmp, "copy-")
	if err != nil {
		return binlog.File{}, err
	}
	defer os.RemoveAll(dir)
	if err := a.copyFile(ctx, host, name, dir); err != nil {
		return binlog.File{}, err
	}
	path := filepath.Join(dir, name)
	in, err := os.Open(path)
	if err != nil {
		return binlog.File{}, fmt.Errorf("the copy of %s: %w", name, err)
	}
	defer in.Close()
	info, err := binlog.Read(in, nil)
	if err == nil && !info.Closed {
		err = errors.New("it does not end with the rotation that closed it")
	}
	if err != nil {
		return binlog.File{}, fmt.Errorf("the copy of %s from %s: %w", name, host, err)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return binlog.File{}, err
	}
	key := binlog.FileKey(a.Prefix, uuid, name)
	zr := compressed(in)
	obj, err := a.Store.Put(ctx, key, zr)
	zr.Close() // a failed upload leaves the compressor waiting for a reader
	if err != nil {
		return binlog.File{}, fmt.Errorf("storing %s: %w", name, err)
	}
	return binlog.File{ServerUUID: uuid, Name: name, Key: obj.Key, Size: obj.Size, SHA256: obj.SHA256,
		GTIDSet: info.GTIDSet, Transactions: info.Transactions, FirstEvent: info.FirstEvent,
		LastEvent: info.LastEvent, ArchivedAt: a.now()}, nil
}

// copyFile runs mysqlbinlog for one file into dir.
func (a *Archiver) copyFile(ctx context.Context, host, name, dir string) error {
	opts, err := clientOptions(dir, "client-*.cnf", tcpAt(host, a.Port), a.Reader.User, a.Reader.Password)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, a.Mysqlbinlog, "--defaults-file="+opts, "--read-from-remote-server",
		"--raw", "--result-file="+dir+"/", name)
	cmd.WaitDelay = 10 * time.Second
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("copying %s from %s: %w: %s", name, host, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// compressed is r, zstd-compressed as it is read.
func compressed(r io.Reader) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		enc, err := zstd.NewWriter(pw)
		if err == nil {
			_, err = io.Copy(enc, r)
			if cerr := enc.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	return pr
}
