package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/binlog"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// Recovery is a point-in-time recovery's second half: after the base backup is in the
// stage, the archive's transactions that follow it are replayed with mysqlbinlog up to
// the target, a time or a transaction, and the restored GTID set must be the base's with
// exactly the transactions the archived files hold up to it.
type Recovery struct {
	// Store and Prefix are where the binary log archive is (its index and its files).
	Store  Reader
	Prefix string
	// Target: the transactions whose events are from before this second are replayed,
	// none from it on (event times are whole seconds, as mysqlbinlog's --stop-datetime).
	Target time.Time
	// TargetGTID, when set instead ("uuid:N"), replays the transactions up to and
	// including that one, in the archive's order.
	TargetGTID string
	// Mysqlbinlog is the program that turns the files into statements.
	Mysqlbinlog string
}

// stop is the recovery's first second not replayed.
func (rc Recovery) stop() time.Time { return rc.Target.UTC().Truncate(time.Second) }

// target is the recovery's target, as said in messages.
func (rc Recovery) target() string {
	if rc.TargetGTID != "" {
		return "transaction " + rc.TargetGTID
	}
	return fmtTime(rc.stop())
}

// plan reads the index and chooses the files to replay onto base: every archived file
// with a transaction base lacks and an event before the target, in the order of their
// first events. The archive must reach the target.
func (rc Recovery) plan(ctx context.Context, base gtid.Set) ([]binlog.File, error) {
	ix, err := ReadIndex(ctx, rc.Store, rc.Prefix)
	if err != nil {
		if errors.Is(err, binlog.ErrIndexInvalid) {
			return nil, Fail(mysqlv1beta1.ReasonRestoreFailed, err)
		}
		return nil, Fail(objectstore.Reason(err), fmt.Errorf("reading the archive's index: %w", err))
	}
	where := rc.Store.URL(binlog.IndexKey(rc.Prefix))
	if last := ix.Last(); rc.TargetGTID == "" && last.Before(rc.stop()) {
		return nil, Fail(mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Errorf(
			"the archive (%s) reaches %s; the target %s is after it", where, fmtTime(last), fmtTime(rc.stop())))
	}
	var files []binlog.File
	for _, f := range ix.Files {
		s, err := gtid.Parse(f.GTIDSet)
		if err != nil {
			return nil, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("the index's file %s of %s: %w", f.Name, f.ServerUUID, err))
		}
		if (rc.TargetGTID == "" && !f.FirstEvent.Before(rc.stop())) || base.Contains(s) {
			continue
		}
		files = append(files, f)
	}
	return files, nil
}

// fetch stores the archived file f, decompressed, at path, and checks that what was
// read is what the index says: its size and SHA-256.
func (rc Recovery) fetch(ctx context.Context, f binlog.File, path string, diskReason func(string) string) error {
	where := rc.Store.URL(f.Key)
	body, err := rc.Store.Get(ctx, f.Key)
	if err != nil {
		return Fail(objectstore.Reason(err), fmt.Errorf("reading archived file %s: %w", where, err))
	}
	defer body.Close()
	return readChecked(body, "archived file "+where, "the index says", f.SHA256, f.Size, func(data io.Reader) error {
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return Fail(diskReason(err.Error()), err)
		}
		_, err = io.Copy(out, data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Fail(diskReason(err.Error()), fmt.Errorf("writing %s: %w", filepath.Base(path), err))
		}
		return nil
	})
}

// replayed is what the recovery replays of the files, in order, onto base, and whether
// it reached its target. To a time: up to the first event from the stop second on,
// whatever the event (an excluded transaction's too), as mysqlbinlog --stop-datetime
// stops; a transaction that event is inside is not replayed. To a GTID: up to and
// including that transaction, which must be found.
func (rc Recovery) replayed(paths []string, base gtid.Set) (gtid.Set, bool, error) {
	got := gtid.Set{}
	stopped, reached := false, rc.TargetGTID == ""
	for _, p := range paths {
		if stopped {
			break
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, false, err
		}
		// open is the transaction being read, until an event between transactions.
		var open *binlog.Event
		commit := func() {
			if open != nil {
				got = got.Add(open.Source, open.GNO)
				if rc.TargetGTID != "" && fmt.Sprintf("%s:%d", open.Source, open.GNO) == rc.TargetGTID {
					stopped, reached = true, true
				}
				open = nil
			}
		}
		_, err = binlog.Read(f, func(ev binlog.Event) {
			if stopped {
				return
			}
			if ev.Between() {
				commit()
			}
			switch {
			case stopped:
			case rc.TargetGTID == "" && !ev.Time.Before(rc.stop()):
				stopped, open = true, nil
			case ev.Source != "":
				e := ev
				open = &e
			}
		})
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
		commit()
	}
	return got.Subtract(base), reached, nil
}

// recover replays the archive onto the server holding the base (as root, with this
// cluster's password) and returns the GTID set the data must then hold, and how many
// files it replayed.
func (r Restore) recover(ctx context.Context, t tempServer) (string, int, error) {
	rc := r.Recovery
	base, err := gtid.Parse(r.GTIDSet)
	if err != nil {
		return "", 0, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("the backup's GTID set: %w", err))
	}
	if rc.TargetGTID != "" {
		target, err := gtid.Parse(rc.TargetGTID)
		if err != nil || target.Count() != 1 {
			return "", 0, Fail(mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Errorf("the target %q is not one transaction (uuid:N)", rc.TargetGTID))
		}
		rc.TargetGTID = target.String() // as the files' GTIDs are written: lower case
		if base.Contains(target) {
			return "", 0, Fail(mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Errorf(
				"the backup already holds transaction %s (and may hold later ones): choose a backup taken before it", rc.TargetGTID))
		}
	}
	files, err := rc.plan(ctx, base)
	if err != nil {
		return "", 0, err
	}
	dir := filepath.Join(r.Work, "binlog")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", 0, Fail(r.diskReason(err.Error()), err)
	}
	defer os.RemoveAll(dir)
	paths := make([]string, 0, len(files))
	for i, f := range files {
		p := filepath.Join(dir, fmt.Sprintf("%04d-%s-%s", i, f.ServerUUID, f.Name))
		if err := rc.fetch(ctx, f, p, r.diskReason); err != nil {
			return "", 0, err
		}
		paths = append(paths, p)
	}
	more, reached, err := rc.replayed(paths, base)
	if err != nil {
		return "", 0, Fail(mysqlv1beta1.ReasonBackupCorrupted, fmt.Errorf("an archived file: %w", err))
	}
	if !reached {
		return "", 0, Fail(mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Errorf(
			"%s is in no archived file (%s) after the backup", rc.target(), rc.Store.URL(binlog.IndexKey(rc.Prefix))))
	}
	want := base.Union(more)
	for source, runs := range want.Runs() {
		if runs > 1 {
			return "", 0, Fail(mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Errorf(
				"the archive lacks transactions of %s between the backup and the target (restored set would be %s): a file was purged before it was archived",
				source, want))
		}
	}
	if !more.IsEmpty() {
		if err := r.replayBinlogs(ctx, t, paths, more); err != nil {
			return "", 0, err
		}
	}
	return want.String(), len(paths), nil
}

// replayBinlogs pipes mysqlbinlog's statements for the transactions more of the files
// into the mysql client: --include-gtids replays exactly the set replayed computed.
func (r Restore) replayBinlogs(ctx context.Context, t tempServer, paths []string, more gtid.Set) error {
	opts, err := clientOptions(r.Work, "replay-*.cnf", "socket="+t.socket(), "root", r.RootPassword)
	if err != nil {
		return Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	defer os.Remove(opts)
	args := []string{"--no-defaults", "--include-gtids=" + more.String()}
	dump := exec.CommandContext(ctx, r.Recovery.Mysqlbinlog, append(args, paths...)...)
	apply := exec.CommandContext(ctx, r.Mysql, "--defaults-file="+opts, "--protocol=socket",
		"--max-allowed-packet=1073741824", "--binary-mode")
	var dumpErr, applyErr tail
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	dump.Stderr, apply.Stdin, apply.Stdout, apply.Stderr = &dumpErr, pipe, io.Discard, &applyErr
	dump.WaitDelay, apply.WaitDelay = 10*time.Second, 10*time.Second
	if err := dump.Start(); err != nil {
		return Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("starting mysqlbinlog: %w", err))
	}
	runErr := apply.Start()
	// The client has the pipe's read end now; ours goes, so that mysqlbinlog stops on a
	// broken pipe when the client dies instead of filling it until the deadline.
	pipe.Close()
	if runErr == nil {
		runErr = apply.Wait()
	}
	waitErr := dump.Wait()
	switch {
	case ctx.Err() != nil:
		return Fail(mysqlv1beta1.ReasonDeadlineExceeded, fmt.Errorf("replaying the binary logs: %w", ctx.Err()))
	case runErr != nil:
		return Fail(r.diskReason(applyErr.String()), fmt.Errorf("replaying the binary logs: %w: %s", runErr, lastLines(applyErr.String(), 5)))
	case waitErr != nil:
		return Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("mysqlbinlog: %w: %s", waitErr, lastLines(dumpErr.String(), 5)))
	}
	return nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
