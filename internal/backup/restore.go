package backup

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/gtid"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// Reader is where a restore reads a backup from (objectstore.Store, objectstore.Dir).
type Reader interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	URL(key string) string
}

// Files a restore leaves in the data folder.
const (
	// restoreStage is the folder on the data volume the data is prepared in; it is moved
	// into place only once the data is checked. Not a hidden name: InnoDB fails to start
	// on a data folder whose name starts with a dot (its undo tablespaces "already exist").
	restoreStage = "dolphin-restore-stage"
	// RestoredMarker holds the restore's report: a data folder with it was restored.
	RestoredMarker = ".dolphin-restored"
	// AccountsMarker says the data folder has the operator's accounts (the instances'
	// init container then leaves it alone).
	AccountsMarker = ".dolphin-accounts"
)

// Restore puts a stored backup into an empty data folder, the way an instance then
// starts on it. The data is prepared in a stage folder on the same volume: a physical
// backup is unpacked there; a logical one is replayed into a temporary server
// initialised there. Its SHA-256 and size must be the backup's, and the GTID set of the
// restored data the backup's. Root's and the operator's accounts are then given this
// cluster's passwords (Accounts, run on a temporary server, outside any binary log), and
// only then is the stage moved into place, the mysql folder last. Anything that fails
// leaves the folder as it was.
type Restore struct {
	// Mysqld and Mysql are the server and the client (a logical backup's replay).
	Mysqld, Mysql string
	Store         Reader
	// Key is where the data is; Method, SHA256, Size and GTIDSet are what the backup's
	// status says of it.
	Key, SHA256, GTIDSet string
	Method               mysqlv1beta1.BackupMethod
	Size                 int64
	// Data is the instance's data folder; Work a private folder (sockets, logs).
	Data, Work string
	// Accounts are the statements that give root and the operator's accounts this
	// cluster's passwords.
	Accounts []string
	// StartTimeout bounds each temporary server's start (default a minute).
	StartTimeout time.Duration
	// Recovery, when set, replays the binary log archive onto the base up to a point in
	// time, as root with RootPassword (this cluster's, which Accounts gives root).
	Recovery     *Recovery
	RootPassword string
}

// Restored is a restore's report.
type Restored struct {
	Method       string    `json:"method"`
	Location     string    `json:"location"`
	Size         int64     `json:"size"`
	SHA256       string    `json:"sha256"`
	GTIDSet      string    `json:"gtidSet"`
	MySQLVersion string    `json:"mysqlVersion"`
	CompletedAt  time.Time `json:"completedAt"`
	// TargetTime (or TargetGTID) and BinlogFiles are a point-in-time recovery's: what
	// it recovered to and how many archived files were replayed.
	TargetTime  *time.Time `json:"targetTime,omitempty"`
	TargetGTID  string     `json:"targetGTID,omitempty"`
	BinlogFiles int        `json:"binlogFiles,omitempty"`
	// Tables is how many tables were checked against the backup's manifest.
	Tables int `json:"tables,omitempty"`
}

// Run restores the backup. A data folder this restore already filled (its pod was run
// again) gives the report it recorded then.
func (r Restore) Run(ctx context.Context) (Restored, error) {
	if done, ok, err := r.already(); ok || err != nil {
		return done, err
	}
	stage := filepath.Join(r.Data, restoreStage)
	if err := os.RemoveAll(stage); err != nil {
		return Restored{}, Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	for _, d := range []string{stage, filepath.Join(r.Work, "tmp")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return Restored{}, Fail(r.diskReason(err.Error()), err)
		}
	}
	var out Restored
	var err error
	switch r.Method {
	case mysqlv1beta1.BackupMethodPhysical:
		out, err = r.physical(ctx, stage)
	case mysqlv1beta1.BackupMethodLogical:
		out, err = r.logical(ctx, stage)
	default:
		err = Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("method %q: not Logical or Physical", r.Method))
	}
	if err != nil {
		_ = os.RemoveAll(stage)
		return Restored{}, err
	}
	out.CompletedAt = time.Now().UTC()
	if err := r.moveIntoPlace(stage, out); err != nil {
		return Restored{}, Fail(r.diskReason(err.Error()), err)
	}
	return out, nil
}

// already reads the report of an earlier run into the same folder, and refuses a
// folder that holds anything else.
func (r Restore) already() (Restored, bool, error) {
	raw, err := os.ReadFile(filepath.Join(r.Data, RestoredMarker))
	if err == nil {
		var done Restored
		if err := json.Unmarshal(raw, &done); err != nil {
			return Restored{}, false, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("%s: %w", RestoredMarker, err))
		}
		return done, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Restored{}, false, Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	entries, err := os.ReadDir(r.Data)
	if err != nil {
		return Restored{}, false, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("reading the data folder: %w", err))
	}
	for _, e := range entries {
		if e.Name() != "lost+found" && e.Name() != restoreStage {
			return Restored{}, false, Fail(mysqlv1beta1.ReasonRestoreFailed,
				fmt.Errorf("the data volume already holds %s: a restore goes into an empty volume only", e.Name()))
		}
	}
	return Restored{}, false, nil
}

func (r Restore) temp() tempServer {
	return tempServer{mysqld: r.Mysqld, work: r.Work, startTimeout: r.StartTimeout,
		failReason: mysqlv1beta1.ReasonRestoreFailed, diskFullReason: mysqlv1beta1.ReasonDataVolumeFull}
}

func (r Restore) diskReason(text string) string {
	return diskFull(text, mysqlv1beta1.ReasonDataVolumeFull, mysqlv1beta1.ReasonRestoreFailed)
}

// physical unpacks the archive into stage and re-keys its accounts on a server started
// without grant tables (the copy's root password is the source cluster's).
func (r Restore) physical(ctx context.Context, stage string) (Restored, error) {
	rc, err := r.open(ctx)
	if err != nil {
		return Restored{}, err
	}
	defer rc.Close()
	err = r.read(rc, func(data io.Reader) error {
		if err := Unpack(data, stage); err != nil {
			return Fail(r.diskReason(err.Error()), err)
		}
		return nil
	})
	if err != nil {
		return Restored{}, err
	}
	args := []string{"--skip-grant-tables"}
	if r.Recovery != nil {
		args = append(args, replayArgs...)
	}
	srv, db, err := r.temp().start(ctx, stage, args...)
	if err != nil {
		return Restored{}, err
	}
	defer srv.stop()
	defer db.Close()
	return r.finish(ctx, srv, db)
}

// replayArgs are a temporary server's settings for replaying a dump or binary logs:
// they set GTID_PURGED or GTID_NEXT, which need GTIDs on, with statements as large as
// the server they came from allowed.
var replayArgs = []string{"--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--max-allowed-packet=1073741824"}

// logical replays the dump into a server initialised in stage.
func (r Restore) logical(ctx context.Context, stage string) (Restored, error) {
	rc, err := r.open(ctx) // before the server: a store that fails, fails at once
	if err != nil {
		return Restored{}, err
	}
	defer rc.Close()
	t := r.temp()
	if err := t.initialise(ctx, stage); err != nil {
		return Restored{}, err
	}
	srv, db, err := t.start(ctx, stage, replayArgs...)
	if err != nil {
		return Restored{}, err
	}
	defer srv.stop()
	defer db.Close()
	err = r.read(rc, func(data io.Reader) error { return r.replay(ctx, data, t) })
	if err != nil {
		return Restored{}, err
	}
	return r.finish(ctx, srv, db)
}

// replay feeds the dump to the mysql client, connected to the temporary server as root.
func (r Restore) replay(ctx context.Context, dump io.Reader, t tempServer) error {
	cmd := exec.CommandContext(ctx, r.Mysql, "--no-defaults", "--protocol=socket", "--socket="+t.socket(),
		"-uroot", "--max-allowed-packet=1073741824", "--binary-mode")
	cmd.WaitDelay = 10 * time.Second
	var stderr tail
	cmd.Stdin, cmd.Stdout, cmd.Stderr = dump, io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Fail(mysqlv1beta1.ReasonDeadlineExceeded, fmt.Errorf("replaying the dump: %w", ctx.Err()))
		}
		return Fail(r.diskReason(stderr.String()), fmt.Errorf("replaying the dump: %w: %s", err, lastLines(stderr.String(), 5)))
	}
	return nil
}

// open starts reading the stored data.
func (r Restore) open(ctx context.Context) (io.ReadCloser, error) {
	rc, err := r.Store.Get(ctx, r.Key)
	if err != nil {
		return nil, Fail(objectstore.Reason(err), err)
	}
	return rc, nil
}

// read streams the stored data, decompressed, to use, and checks that what was read is
// the backup: its size and SHA-256, all of it read. Data that is not the backup's is
// BackupCorrupted whatever use made of it (a dump cut short may fail to replay first).
func (r Restore) read(rc io.Reader, use func(io.Reader) error) error {
	return readChecked(rc, r.Store.URL(r.Key), "the backup is", r.SHA256, r.Size, use)
}

// readChecked streams rc, decompressed, to use, and checks that all of it was read and
// has the SHA-256 want and size (when not 0), as whose says; where names it.
func readChecked(rc io.Reader, where, whose, want string, size int64, use func(io.Reader) error) error {
	raw := &checkedReader{r: rc, h: sha256.New()}
	dec, err := zstd.NewReader(raw)
	if err != nil {
		return Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	decoded := &checkedReader{r: dec}
	useErr := use(decoded)
	dec.Close()
	if raw.err == nil {
		_, _ = io.Copy(io.Discard, raw) // the rest counts too, read or not
	}
	sum := hex.EncodeToString(raw.h.Sum(nil))
	switch {
	case raw.err != nil && !errors.Is(raw.err, io.EOF):
		return Fail(objectstore.Reason(raw.err), fmt.Errorf("reading %s: %w", where, raw.err))
	case sum != want || (size > 0 && raw.n != size):
		return Fail(mysqlv1beta1.ReasonBackupCorrupted, fmt.Errorf("%s holds %d bytes with SHA-256 %s; %s %d bytes with SHA-256 %s",
			where, raw.n, sum, whose, size, want))
	case decoded.err != nil && !errors.Is(decoded.err, io.EOF):
		return Fail(mysqlv1beta1.ReasonBackupCorrupted, fmt.Errorf("%s does not decompress: %w", where, decoded.err))
	}
	return useErr
}

// checkedReader counts (and, with h, hashes) what passes, and keeps the first error.
type checkedReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// finish re-keys the accounts, checks the GTID set, and stops the server cleanly.
func (r Restore) finish(ctx context.Context, srv *server, db *sql.DB) (Restored, error) {
	// The grant tables now are the source cluster's (a copy, or a replayed mysql schema):
	// load them, then set this cluster's passwords.
	if err := r.rekey(ctx, db, "FLUSH PRIVILEGES"); err != nil {
		return Restored{}, err
	}
	out := Restored{Method: string(r.Method), Location: r.Store.URL(r.Key), SHA256: r.SHA256, Size: r.Size}
	want := r.GTIDSet
	if r.Recovery != nil {
		var err error
		if want, out.BinlogFiles, err = r.recover(ctx, r.temp()); err != nil {
			return Restored{}, err
		}
		// The replayed transactions may have changed the accounts (the source's own
		// password changes): this cluster's passwords again.
		if err := r.rekey(ctx, db); err != nil {
			return Restored{}, err
		}
		if r.Recovery.TargetGTID != "" {
			out.TargetGTID = r.Recovery.TargetGTID
		} else {
			target := r.Recovery.stop()
			out.TargetTime = &target
		}
	}
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed, VERSION()").Scan(&out.GTIDSet, &out.MySQLVersion); err != nil {
		return Restored{}, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("reading the restored GTID set: %w", err))
	}
	out.GTIDSet = strings.ReplaceAll(out.GTIDSet, "\n", "")
	if err := sameGTIDs(out.GTIDSet, want); err != nil {
		return Restored{}, Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	if r.Recovery == nil {
		n, err := r.checkTables(ctx, db)
		if err != nil {
			return Restored{}, err
		}
		out.Tables = n
	}
	db.Close()
	if err := srv.shutdown(); err != nil {
		return Restored{}, Fail(mysqlv1beta1.ReasonRestoreFailed, err)
	}
	return out, nil
}

// checkTables compares the restored tables with the row counts and checksums the
// backup's manifest records (a physical backup's; a logical one records none), and says
// how many it checked.
func (r Restore) checkTables(ctx context.Context, db *sql.DB) (int, error) {
	m, ok, err := ReadManifest(ctx, r.Store, r.Key)
	if err != nil || !ok || m.Tables == nil {
		return 0, err
	}
	got, err := tableSums(ctx, db)
	if err != nil {
		return 0, Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("reading the restored tables: %w", err))
	}
	if err := sameTables(got, m.Tables); err != nil {
		return 0, Fail(mysqlv1beta1.ReasonBackupCorrupted, err)
	}
	return len(m.Tables), nil
}

// rekey runs first, then the statements that give the accounts this cluster's passwords.
func (r Restore) rekey(ctx context.Context, db *sql.DB, first ...string) error {
	for _, q := range append(first, r.Accounts...) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return Fail(mysqlv1beta1.ReasonRestoreFailed, fmt.Errorf("setting the accounts: %w", err))
		}
	}
	return nil
}

// sameGTIDs checks that the restored set is the backup's (and the replayed ones').
func sameGTIDs(got, want string) error {
	g, err := gtid.Parse(got)
	if err != nil {
		return fmt.Errorf("the restored GTID set %q: %w", got, err)
	}
	w, err := gtid.Parse(want)
	if err != nil {
		return fmt.Errorf("the backup's GTID set %q: %w", want, err)
	}
	if !g.Equal(w) {
		return fmt.Errorf("the restored data holds GTID set %s, the backup %s", g, w)
	}
	return nil
}

// moveIntoPlace marks the stage as holding the operator's accounts, moves it into the
// data folder (mysql/ last: the sign of an initialised folder) and records the report.
func (r Restore) moveIntoPlace(stage string, out Restored) error {
	if err := os.WriteFile(filepath.Join(stage, AccountsMarker), nil, 0o640); err != nil {
		return err
	}
	entries, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "mysql" {
			continue
		}
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(r.Data, e.Name())); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(stage, "mysql"), filepath.Join(r.Data, "mysql")); err != nil {
		return fmt.Errorf("the restored data has no mysql folder: %w", err)
	}
	if err := os.Remove(stage); err != nil {
		return err
	}
	raw, _ := json.Marshal(out)
	return os.WriteFile(filepath.Join(r.Data, RestoredMarker), raw, 0o640)
}

// Statements are sql's statements (each ending in ";" and a newline) with its
// ${VARIABLES} from getenv; a variable getenv has no value for is an error.
func Statements(sql string, getenv func(string) string) ([]string, error) {
	var missing []string
	expanded := os.Expand(sql, func(v string) string {
		val := getenv(v)
		if val == "" && !slices.Contains(missing, v) {
			missing = append(missing, v)
		}
		return val
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("no value for %s", strings.Join(missing, ", "))
	}
	var out []string
	for _, q := range strings.Split(expanded, ";\n") {
		if q = strings.TrimSpace(q); q != "" {
			out = append(out, q)
		}
	}
	return out, nil
}
