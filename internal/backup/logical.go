// Package backup takes one backup of one MySQL instance and stores it, then writes the
// manifest that says what the backup holds; it runs in a backup Job's pod (the manager's
// "backup" command), never in the operator. A backup either ends with its data and its
// manifest stored, or fails with a reason and leaves no data object behind.
package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
)

// ManifestVersion is the format of the manifests this package writes.
const ManifestVersion = 1

// Manifest says what a stored backup holds; it is stored beside the data, last, and a
// backup without one is incomplete.
type Manifest struct {
	Version        int       `json:"version"`
	Cluster        string    `json:"cluster"`
	Name           string    `json:"name"`
	Method         string    `json:"method"`
	Source         string    `json:"source"`
	Key            string    `json:"key"`
	Location       string    `json:"location"`
	Compression    string    `json:"compression"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	GTIDSet        string    `json:"gtidSet"`
	BinlogFile     string    `json:"binlogFile,omitempty"`
	BinlogPosition int64     `json:"binlogPosition,omitempty"`
	MySQLVersion   string    `json:"mysqlVersion"`
	StartedAt      time.Time `json:"startedAt"`
	CompletedAt    time.Time `json:"completedAt"`
	// Tables are every user table's row count and checksum in the backup's data (a
	// physical backup's, read from its copy); a restore checks its result against them.
	// Stored in the manifest only, not in the pod's report.
	Tables map[string]TableSum `json:"tables,omitempty"`
}

// Store is where backups go (objectstore.Store).
type Store interface {
	Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error)
	Delete(ctx context.Context, keys ...string) error
	URL(key string) string
}

// Source is the instance to back up and how to reach it.
type Source struct {
	Instance, Host string
	Port           int
	User, Password string
}

// Logical is a logical backup's settings.
type Logical struct {
	// Mysqldump is the client's path; Tmp a private folder for its option file.
	Mysqldump, Tmp string
	Source         Source
	Store          Store
	// Cluster and Name say whose backup this is; Key is where its data goes, and the
	// manifest goes to Key + ".manifest.json".
	Cluster, Name, Key string
}

// ManifestKey is where the manifest of the backup whose data is at key goes.
func ManifestKey(key string) string { return key + ".manifest.json" }

// Run dumps every database of the source in one consistent snapshot, with its GTID set
// and binary log coordinates, compresses the dump with zstd on the way to the store and
// stores the manifest once the data is stored. A dump that ends without mysqldump's
// completion trailer is a failure, and its upload is abandoned before it completes.
func (l Logical) Run(ctx context.Context) (Manifest, error) {
	started := time.Now().UTC()
	opts, err := l.optionFile()
	if err != nil {
		return Manifest{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, err)
	}
	defer os.Remove(opts)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(dctx, l.Mysqldump, "--defaults-file="+opts,
		"--single-transaction", "--source-data=2", "--set-gtid-purged=ON", "--all-databases",
		"--routines", "--events", "--triggers", "--hex-blob")
	cmd.WaitDelay = 10 * time.Second
	var stderr tail
	cmd.Stderr = &stderr
	pr, pw := io.Pipe()
	enc, err := zstd.NewWriter(pw)
	if err != nil {
		return Manifest{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, err)
	}
	scan := &dumpScanner{}
	cmd.Stdout = io.MultiWriter(scan, enc)
	if err := cmd.Start(); err != nil {
		return Manifest{}, Fail(mysqlv1beta1.ReasonBackupPodFailed, fmt.Errorf("starting mysqldump: %w", err))
	}
	dumped := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = enc.Close()
		}
		if err == nil && !scan.complete() {
			err = Fail(mysqlv1beta1.ReasonDumpIncomplete, errors.New("mysqldump exited 0 without its completion trailer"))
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		dumped <- err
	}()
	obj, putErr := l.Store.Put(ctx, l.Key, pr)
	if putErr != nil {
		cancel() // mysqldump would block on a pipe nobody reads
		pr.CloseWithError(putErr)
	}
	dumpErr := <-dumped
	// A dump that fails ends the upload with its error; an upload that fails kills the
	// dump. Whichever came first is the reason.
	switch {
	case dumpErr != nil && (putErr == nil || errors.Is(putErr, dumpErr)):
		return Manifest{}, dumpFailure(dumpErr, stderr.String())
	case putErr != nil:
		return Manifest{}, Fail(objectstore.Reason(putErr), putErr)
	}
	m := Manifest{Version: ManifestVersion, Cluster: l.Cluster, Name: l.Name, Method: string(mysqlv1beta1.BackupMethodLogical),
		Source: l.Source.Instance, Key: obj.Key, Location: l.Store.URL(obj.Key), Compression: "zstd", Size: obj.Size,
		SHA256: obj.SHA256, StartedAt: started}
	if err := scan.fill(&m); err != nil {
		_ = l.Store.Delete(context.WithoutCancel(ctx), l.Key)
		return Manifest{}, Fail(mysqlv1beta1.ReasonDumpIncomplete, err)
	}
	m.CompletedAt = time.Now().UTC()
	raw, _ := json.MarshalIndent(m, "", "  ")
	if _, err := l.Store.Put(ctx, ManifestKey(l.Key), bytes.NewReader(raw)); err != nil {
		return Manifest{}, Fail(objectstore.Reason(err), err)
	}
	return m, nil
}

// optionFile writes the client options (password included) to a file only we can read:
// on the command line they would show in the process list.
func (l Logical) optionFile() (string, error) {
	return clientOptions(l.Tmp, "dump-*.cnf", tcpAt(l.Source.Host, l.Source.Port), l.Source.User, l.Source.Password)
}

// tcpAt is a client option file's address lines for a server reached over TCP.
func tcpAt(host string, port int) string { return fmt.Sprintf("host=%s\nport=%d", host, port) }

// clientOptions writes a [client] option file for a MySQL client program into dir,
// readable by us alone, and returns its path; where is its address lines (tcpAt, or a
// socket).
func clientOptions(dir, pattern, where, user, password string) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("writing a client option file: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "[client]\n%s\nuser=%s\npassword=%s\n", where, user, password)
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing a client option file: %w", err)
	}
	return filepath.Clean(f.Name()), nil
}

var (
	// mysqldump says "Got error: 2003: …" when it cannot connect, "Error 2013: …" when
	// a query fails, and the server's "ERROR 1045 (28000): …" passes through.
	errorCode = regexp.MustCompile(`(?:Got error: |Error |ERROR )(\d+)\b`)
)

// dumpFailure names what went wrong with the dump from mysqldump's own words.
func dumpFailure(err error, stderr string) error {
	var f *Failure
	if errors.As(err, &f) {
		return err
	}
	msg := strings.TrimSpace(stderr)
	code := ""
	if m := errorCode.FindStringSubmatch(msg); m != nil {
		code = m[1]
	}
	reason := mysqlv1beta1.ReasonDumpFailed
	switch code {
	case "2002", "2003", "2005", "2013":
		reason = mysqlv1beta1.ReasonSourceUnreachable
	case "1045":
		reason = mysqlv1beta1.ReasonSourceAccessDenied
	}
	if msg == "" {
		return Fail(reason, fmt.Errorf("mysqldump: %w", err))
	}
	return Fail(reason, fmt.Errorf("mysqldump: %w: %s", err, msg))
}

// dumpScanner keeps the head of a dump (its header has the server version, the GTID set
// and the binary log coordinates) and its last bytes (the completion trailer).
type dumpScanner struct {
	head []byte
	last tail
}

const headMax = 1 << 20

func (d *dumpScanner) Write(p []byte) (int, error) {
	if room := headMax - len(d.head); room > 0 {
		d.head = append(d.head, p[:min(room, len(p))]...)
	}
	return d.last.Write(p)
}

func (d *dumpScanner) complete() bool {
	return bytes.Contains(d.last.b, []byte("\n-- Dump completed"))
}

var (
	serverVersion = regexp.MustCompile(`(?m)^-- Server version\t(\S+)`)
	gtidPurged    = regexp.MustCompile(`SET @@GLOBAL\.GTID_PURGED=/\*!80000 '\+'\*/ '([^']*)';`)
	sourceCoords  = regexp.MustCompile(`CHANGE REPLICATION SOURCE TO SOURCE_LOG_FILE='([^']+)', SOURCE_LOG_POS=(\d+);`)
)

// fill reads the header's facts into m; a dump without a GTID set is refused (it could
// not be the base of a point-in-time recovery, nor seed a replica).
func (d *dumpScanner) fill(m *Manifest) error {
	if v := serverVersion.FindSubmatch(d.head); v != nil {
		m.MySQLVersion = string(v[1])
	}
	g := gtidPurged.FindSubmatch(d.head)
	if g == nil {
		return errors.New("the dump names no GTID set (SET @@GLOBAL.GTID_PURGED)")
	}
	m.GTIDSet = strings.Join(strings.Fields(strings.ReplaceAll(string(g[1]), "\n", "")), "")
	if c := sourceCoords.FindSubmatch(d.head); c != nil {
		m.BinlogFile = string(c[1])
		m.BinlogPosition, _ = strconv.ParseInt(string(c[2]), 10, 64)
	}
	return nil
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }
