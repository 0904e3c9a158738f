package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// timeline stands in for instances whose roles change while a sample reads them: every
// read is one tick later than the one before, and an instance is writable in the ticks
// its window holds ([from, to), to < 0: to the end).
type timeline struct {
	tick int
}

func (tl *timeline) instance(from, to int) probe {
	return func() bool {
		t := tl.tick
		tl.tick++
		return t >= from && (to < 0 || t < to)
	}
}

// Reads in the order a, b, c then c, b, a: ticks 0..2 forwards, 3..5 backwards.
func TestTheSamplerCountsOnlyInstancesWritableAtOnce(t *testing.T) {
	cases := []struct {
		name          string
		a, b, c       [2]int // writable windows
		both, oneRead int
	}{
		{name: "one primary throughout", a: [2]int{0, -1}, b: [2]int{9, 9}, c: [2]int{9, 9}},
		// a is the old primary, fenced after its first read; c is promoted before its
		// first read: reading each once, a and c look writable together.
		{name: "a switchover between two reads", a: [2]int{0, 2}, b: [2]int{9, 9}, c: [2]int{2, -1}, oneRead: 1},
		// The same the other way round: c, read later, is fenced at tick 3 and a, read
		// first, promoted at tick 4.
		{name: "a switchover the other way", a: [2]int{4, -1}, b: [2]int{9, 9}, c: [2]int{0, 3}},
		{name: "two writable throughout", a: [2]int{0, -1}, b: [2]int{9, 9}, c: [2]int{0, -1}, both: 1, oneRead: 1},
		// b is writable from tick 1 and a until tick 5: both during ticks 1..4.
		{name: "an overlap inside the sample", a: [2]int{0, 6}, b: [2]int{1, -1}, c: [2]int{9, 9}, both: 1, oneRead: 1},
		// a and c are both writable during ticks 1 and 2 only, shorter than the sample:
		// the reads cannot tell it from a switchover, and it is not counted.
		{name: "an overlap shorter than the sample", a: [2]int{0, 3}, b: [2]int{9, 9}, c: [2]int{1, -1}, oneRead: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl := &timeline{}
			s := newSampler(map[string]probe{
				"a": tl.instance(tc.a[0], tc.a[1]),
				"b": tl.instance(tc.b[0], tc.b[1]),
				"c": tl.instance(tc.c[0], tc.c[1]),
			}, 0)
			s.sample()
			close(s.done)
			r := s.Stop()
			require.Equal(t, 6, tl.tick, "every instance read twice")
			require.Equal(t, 1, r.Samples)
			require.Equal(t, tc.both, r.TwoWritable, "samples with two instances writable at once")
			require.Equal(t, tc.oneRead, r.OneReadTwoWritable, "samples a single pass would have counted")
			if tc.both > 0 {
				require.NotEmpty(t, r.FirstOffence)
			}
		})
	}
}

// An instance that does not answer is not writable.
func TestTheSamplerTakesNoAnswerAsReadOnly(t *testing.T) {
	tl := &timeline{}
	s := newSampler(map[string]probe{
		"a": tl.instance(0, -1),
		"b": func() bool { tl.tick++; return false }, // what writable returns on a deadline
	}, 0)
	s.sample()
	close(s.done)
	r := s.Stop()
	require.Equal(t, 0, r.TwoWritable)
	require.Equal(t, 1, r.MaxWritable)
}
