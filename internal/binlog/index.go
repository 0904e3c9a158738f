package binlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dolphin-operator/dolphin/internal/gtid"
)

// IndexVersion is the format of the index this package writes.
const IndexVersion = 1

// Index is the archive's record of what it holds, stored beside the files (IndexKey).
// One archiver writes it, after each file it stores: a file is archived once the index
// names it.
type Index struct {
	Version int `json:"version"`
	// Files are the stored files, in the order of their first events.
	Files []File `json:"files"`
	// CheckedAt is when the archiver last found every closed file of the primary stored.
	CheckedAt time.Time `json:"checkedAt,omitzero"`
	// Primary is the server it read them from then.
	Primary string `json:"primary,omitempty"`
}

// File is one stored binary log file.
type File struct {
	// ServerUUID and Name say which server's file it is ("binlog.000007").
	ServerUUID string `json:"serverUUID"`
	Name       string `json:"name"`
	// Key is the stored object (the file, zstd-compressed); Size and SHA256 are the
	// object's.
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	SHA256       string    `json:"sha256"`
	GTIDSet      string    `json:"gtidSet"`
	Transactions int       `json:"transactions"`
	FirstEvent   time.Time `json:"firstEvent"`
	LastEvent    time.Time `json:"lastEvent"`
	ArchivedAt   time.Time `json:"archivedAt"`
}

// ErrIndexInvalid is the error of an index that cannot be read as one.
var ErrIndexInvalid = errors.New("the binary log index is not valid")

// IndexKey is where the index of an archive under prefix is.
func IndexKey(prefix string) string { return path.Join(prefix, "index.json") }

// FileKey is where a server's file goes under prefix.
func FileKey(prefix, serverUUID, name string) string {
	return path.Join(prefix, serverUUID, name+".zst")
}

// DecodeIndex reads an index; empty input is the empty index.
func DecodeIndex(raw []byte) (Index, error) {
	var ix Index
	if len(strings.TrimSpace(string(raw))) == 0 {
		return Index{Version: IndexVersion}, nil
	}
	if err := json.Unmarshal(raw, &ix); err != nil {
		return Index{}, fmt.Errorf("%w: %w", ErrIndexInvalid, err)
	}
	if ix.Version != IndexVersion {
		return Index{}, fmt.Errorf("%w: it is of version %d; this operator reads version %d", ErrIndexInvalid, ix.Version, IndexVersion)
	}
	return ix, nil
}

// Encode is the index as stored.
func (ix Index) Encode() []byte {
	ix.Version = IndexVersion
	raw, _ := json.MarshalIndent(ix, "", " ")
	return raw
}

// Has reports whether a server's file is stored.
func (ix Index) Has(serverUUID, name string) bool {
	return slices.ContainsFunc(ix.Files, func(f File) bool { return f.ServerUUID == serverUUID && f.Name == name })
}

// With is the index with f added (or replacing the same server's file of that name).
func (ix Index) With(f File) Index {
	files := slices.DeleteFunc(slices.Clone(ix.Files), func(o File) bool { return o.ServerUUID == f.ServerUUID && o.Name == f.Name })
	files = append(files, f)
	slices.SortStableFunc(files, func(a, b File) int {
		if c := a.FirstEvent.Compare(b.FirstEvent); c != 0 {
			return c
		}
		if c := strings.Compare(a.ServerUUID, b.ServerUUID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	ix.Files = files
	return ix
}

// Last is the time of the newest archived event (zero when nothing is archived).
func (ix Index) Last() time.Time {
	var last time.Time
	for _, f := range ix.Files {
		if f.LastEvent.After(last) {
			last = f.LastEvent
		}
	}
	return last
}

// Base is a base backup a point-in-time recovery starts from.
type Base struct {
	Name string
	// GTIDSet is what the backup holds; CompletedAt the earliest time it can be
	// recovered to (its snapshot was taken before it).
	GTIDSet     string
	CompletedAt time.Time
}

// Window is the span a recovery can reach: from the completion of the oldest base
// backup the archive continues without a gap, to the newest archived event.
type Window struct {
	First, Last time.Time
	// From is the base backup First is the completion of.
	From string
}

// Recoverable is the window bases and the index allow; ok is false when no base can be
// continued. A base is continued when its GTID set and the archived files together
// leave no gap in any server's transactions: a gap means a file the primary removed
// before it was archived.
func (ix Index) Recoverable(bases []Base) (Window, bool, error) {
	archived := gtid.Set{}
	for _, f := range ix.Files {
		s, err := gtid.Parse(f.GTIDSet)
		if err != nil {
			return Window{}, false, fmt.Errorf("the index's file %s of %s: %w", f.Name, f.ServerUUID, err)
		}
		archived = archived.Union(s)
	}
	last := ix.Last()
	var w Window
	found := false
	for _, b := range bases {
		s, err := gtid.Parse(b.GTIDSet)
		if err != nil {
			return Window{}, false, fmt.Errorf("backup %s: %w", b.Name, err)
		}
		if b.CompletedAt.After(last) || !gapless(s.Union(archived)) {
			continue
		}
		if !found || b.CompletedAt.Before(w.First) {
			w, found = Window{First: b.CompletedAt, Last: last, From: b.Name}, true
		}
	}
	return w, found, nil
}

// gapless reports whether every server's transactions in s are one unbroken run.
func gapless(s gtid.Set) bool {
	for _, n := range s.Runs() {
		if n > 1 {
			return false
		}
	}
	return true
}
