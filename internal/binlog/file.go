// Package binlog reads MySQL binary log files as mysqlbinlog --raw copies them from a
// server: which transactions (GTIDs) a file holds, the times of its first and last
// events, and whether it is whole (ends with the event a server writes when it closes a
// file). It also defines the archive's index, the record of which files are stored
// where. It runs no program and opens no connection.
package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/dolphin-operator/dolphin/internal/gtid"
)

// Magic opens every binary log file.
var Magic = []byte{0xfe, 'b', 'i', 'n'}

// Event types this package reads (MySQL's Log_event_type).
const (
	eventStop          = 3
	eventRotate        = 4
	eventFormat        = 15
	eventGTID          = 33
	eventAnonymousGTID = 34
	eventGTIDTagged    = 42
	eventPreviousGTIDs = 35
)

// headerLen is a v4 event header: timestamp, type, server id, length, next position,
// flags.
const headerLen = 19

// Info is what a file holds.
type Info struct {
	// GTIDSet is every transaction the file holds.
	GTIDSet string
	// Transactions is how many it holds (anonymous ones included).
	Transactions int
	// FirstEvent and LastEvent are the times (seconds) of its first and last events: the
	// file was opened at the first; the last is the rotation that closed it.
	FirstEvent, LastEvent time.Time
	// Closed says the file ends with the event a server writes when it closes a file
	// (a rotation to the next, or a stop), so it is whole.
	Closed bool
	// Anonymous says it holds transactions without a GTID.
	Anonymous bool
}

// Event is one event's header, for a reader of events in order.
type Event struct {
	Time time.Time
	Type byte
	// Source and GNO are the transaction's GTID when Type is a GTID event.
	Source string
	GNO    int64
}

// Between says the event is not inside a transaction: it begins one (a GTID event) or
// is one of a file's own (its format description, previous GTIDs, rotation or stop).
func (e Event) Between() bool {
	switch e.Type {
	case eventGTID, eventAnonymousGTID, eventGTIDTagged, eventFormat, eventPreviousGTIDs, eventRotate, eventStop:
		return true
	}
	return false
}

// Read reads a whole file from r, calling each (when not nil) for every event.
func Read(r io.Reader, each func(Event)) (Info, error) {
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != string(Magic) {
		return Info{}, errors.New("not a binary log file (no magic number)")
	}
	var info Info
	set := gtid.Set{}
	header := make([]byte, headerLen)
	var body []byte
	for n := 0; ; n++ {
		if _, err := io.ReadFull(r, header); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Info{}, fmt.Errorf("event %d: truncated header: %w", n, err)
		}
		size := binary.LittleEndian.Uint32(header[9:13])
		if size < headerLen || size > 1<<30 {
			return Info{}, fmt.Errorf("event %d: impossible length %d", n, size)
		}
		body = grow(body, int(size-headerLen))
		if _, err := io.ReadFull(r, body); err != nil {
			return Info{}, fmt.Errorf("event %d: truncated (%d bytes announced): %w", n, size, err)
		}
		ev := Event{Time: time.Unix(int64(binary.LittleEndian.Uint32(header[0:4])), 0).UTC(), Type: header[4]}
		if n == 0 {
			if ev.Type != eventFormat {
				return Info{}, fmt.Errorf("the first event is of type %d, not a format description", ev.Type)
			}
			info.FirstEvent = ev.Time
		}
		info.LastEvent, info.Closed = ev.Time, ev.Type == eventRotate || ev.Type == eventStop
		switch ev.Type {
		case eventGTID:
			if len(body) < 25 {
				return Info{}, fmt.Errorf("event %d: a GTID event of %d bytes", n, len(body))
			}
			u, err := uuid.FromBytes(body[1:17])
			if err != nil {
				return Info{}, fmt.Errorf("event %d: %w", n, err)
			}
			ev.Source, ev.GNO = u.String(), int64(binary.LittleEndian.Uint64(body[17:25]))
			set = set.Add(ev.Source, ev.GNO)
			info.Transactions++
		case eventAnonymousGTID:
			info.Transactions++
			info.Anonymous = true
		case eventGTIDTagged:
			return Info{}, fmt.Errorf("event %d: a tagged GTID; archiving tagged transactions is not supported", n)
		}
		if each != nil {
			each(ev)
		}
	}
	if info.FirstEvent.IsZero() {
		return Info{}, errors.New("the file holds no event")
	}
	info.GTIDSet = set.String()
	return info, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
