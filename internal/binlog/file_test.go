package binlog

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// event is one event as a server writes it: header, body and a CRC32 slot.
func event(at time.Time, typ byte, body []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(body)+4)
	binary.LittleEndian.PutUint32(b[0:4], uint32(at.Unix()))
	b[4] = typ
	binary.LittleEndian.PutUint32(b[5:9], 1)
	binary.LittleEndian.PutUint32(b[9:13], uint32(headerLen+len(body)+4))
	b = append(b, body...)
	return append(b, 0, 0, 0, 0)
}

func gtidEvent(at time.Time, sid string, gno int64) []byte {
	body := make([]byte, 42)
	u := uuid.MustParse(sid)
	copy(body[1:17], u[:])
	binary.LittleEndian.PutUint64(body[17:25], uint64(gno))
	return event(at, eventGTID, body)
}

const sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

func file(events ...[]byte) []byte {
	return bytes.Join(append([][]byte{Magic}, events...), nil)
}

func TestReadFindsTheTransactionsAndTimesOfAFile(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f := file(event(t0, eventFormat, make([]byte, 80)), event(t0, 35, make([]byte, 8)),
		gtidEvent(t0.Add(time.Second), sid, 7), event(t0.Add(time.Second), 2, make([]byte, 30)),
		gtidEvent(t0.Add(2*time.Second), sid, 8), gtidEvent(t0.Add(3*time.Second), sid, 10),
		event(t0.Add(4*time.Second), eventRotate, []byte("\x04\x00\x00\x00\x00\x00\x00\x00binlog.000002")))
	var seen []int64
	info, err := Read(bytes.NewReader(f), func(e Event) {
		if e.Type == eventGTID {
			seen = append(seen, e.GNO)
		}
	})
	require.NoError(t, err)
	require.Equal(t, sid+":7-8:10", info.GTIDSet)
	require.Equal(t, 3, info.Transactions)
	require.Equal(t, []int64{7, 8, 10}, seen)
	require.Equal(t, t0, info.FirstEvent)
	require.Equal(t, t0.Add(4*time.Second), info.LastEvent)
	require.True(t, info.Closed)
	require.False(t, info.Anonymous)
}

func TestReadRefusesWhatIsNotAWholeBinaryLog(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	fde := event(t0, eventFormat, make([]byte, 80))
	open := file(fde, gtidEvent(t0, sid, 1))
	info, err := Read(bytes.NewReader(open), nil)
	require.NoError(t, err)
	require.False(t, info.Closed, "a file still written ends without a rotation")

	for name, tc := range map[string]struct {
		raw  []byte
		want string
	}{
		"no magic":        {[]byte("not a binlog"), "no magic number"},
		"empty":           {Magic, "holds no event"},
		"cut in a header": {open[:len(open)-len(gtidEvent(t0, sid, 1))+5], "truncated header"},
		"cut in a body":   {open[:len(open)-3], "truncated (65 bytes announced)"},
		"no format first": {file(gtidEvent(t0, sid, 1)), "not a format description"},
		"a short GTID":    {file(fde, event(t0, eventGTID, make([]byte, 10))), "a GTID event of 14 bytes"},
		"tagged":          {file(fde, event(t0, eventGTIDTagged, make([]byte, 60))), "tagged GTID"},
		"a bad length":    {file(fde, []byte{0, 0, 0, 0, 2, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}), "impossible length 5"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.raw), nil)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
