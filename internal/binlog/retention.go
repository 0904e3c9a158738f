package binlog

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dolphin-operator/dolphin/internal/gtid"
)

// RetentionVersion is the format of the retention record this package writes.
const RetentionVersion = 1

// Retention is what the operator keeps of an archive, stored beside its index
// (RetentionKey) for the archiver, the index's one writer, to act on: the oldest
// completed backup that backup retention keeps. A file holding only transactions that
// backup already has, all from before it completed, is replayed by no recovery from a
// kept backup.
type Retention struct {
	Version int `json:"version"`
	// Backup, GTIDSet and CompletedAt are the oldest kept backup's name, GTID set and
	// completion.
	Backup      string    `json:"backup"`
	GTIDSet     string    `json:"gtidSet"`
	CompletedAt time.Time `json:"completedAt"`
}

// RetentionKey is where the retention record of an archive under prefix is.
func RetentionKey(prefix string) string { return path.Join(prefix, "retention.json") }

// DecodeRetention reads a retention record; empty input is none (nothing is pruned).
func DecodeRetention(raw []byte) (Retention, bool, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return Retention{}, false, nil
	}
	var r Retention
	if err := json.Unmarshal(raw, &r); err != nil {
		return Retention{}, false, fmt.Errorf("the archive's retention record: %w", err)
	}
	if r.Version != RetentionVersion {
		return Retention{}, false, fmt.Errorf("the archive's retention record is of version %d; this operator reads version %d", r.Version, RetentionVersion)
	}
	if _, err := gtid.Parse(r.GTIDSet); err != nil {
		return Retention{}, false, fmt.Errorf("the archive's retention record: %w", err)
	}
	return r, true, nil
}

// Encode is the record as stored.
func (r Retention) Encode() []byte {
	r.Version = RetentionVersion
	raw, _ := json.MarshalIndent(r, "", " ")
	return raw
}

// Prunable are the files no recovery from a backup the record keeps replays: every
// transaction in the backup's GTID set and every event from before it completed. The
// newest file always stays: it is how far the archive reaches.
func (ix Index) Prunable(r Retention) ([]File, error) {
	kept, err := gtid.Parse(r.GTIDSet)
	if err != nil {
		return nil, fmt.Errorf("the retention record's GTID set: %w", err)
	}
	newest, ok := ix.Newest()
	var out []File
	for _, f := range ix.Files {
		s, err := gtid.Parse(f.GTIDSet)
		if err != nil {
			return nil, fmt.Errorf("the index's file %s of %s: %w", f.Name, f.ServerUUID, err)
		}
		if ok && f.ServerUUID == newest.ServerUUID && f.Name == newest.Name {
			continue
		}
		if kept.Contains(s) && f.LastEvent.Before(r.CompletedAt) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Without is the index without files.
func (ix Index) Without(files []File) Index {
	ix.Files = slices.DeleteFunc(slices.Clone(ix.Files), func(f File) bool {
		return slices.ContainsFunc(files, func(o File) bool { return o.ServerUUID == f.ServerUUID && o.Name == f.Name })
	})
	return ix
}

// Newest is the file with the newest last event; false when there is none.
func (ix Index) Newest() (File, bool) {
	var newest File
	found := false
	for _, f := range ix.Files {
		if !found || f.LastEvent.After(newest.LastEvent) {
			newest, found = f, true
		}
	}
	return newest, found
}
