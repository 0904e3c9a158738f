package workload

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sampler reads @@read_only and @@super_read_only of every instance several times a
// second and counts the samples in which more than one instance accepted writes at the
// same moment.
//
// One read at a time cannot show that: reads of three instances one after another span
// from a few milliseconds to several hundred (each may wait 300 ms, a killed session
// costs a new connection), and a switchover that lands between the read of the old
// primary and that of the new one looks like two writable instances although they never
// were at once. So a sample reads every instance twice, in one order and then in the
// reverse one, and an instance counts as writable only when both its reads say so. For
// two such instances the reads nest: the outer one's two reads enclose both of the inner
// one's, so (an instance does not turn read-only and writable again within one sample)
// both were writable at the moment of the inner one's first read. A switchover between
// the reads leaves its old primary read-only in the second pass, or its new one in the
// first. What this gives up: an overlap shorter than a sample may go uncounted, as one
// between two samples always could; one longer than a sample and the pause after it
// always holds a whole sample and is counted.
type Sampler struct {
	probes   map[string]probe
	names    []string
	interval time.Duration

	samples, maxWritable, twoWritable, oneReadTwoWritable atomic.Int32
	stop                                                  atomic.Bool
	done                                                  chan struct{}
	mu                                                    sync.Mutex
	firstOffence                                          string
}

// probe says whether an instance accepts writes now; one that does not answer does not.
type probe func() bool

// StartSampler samples the instances of dbs (by name) every 50 ms until Stop; each read
// has a 300 ms deadline, and an instance that does not answer counts as not writable.
func StartSampler(dbs map[string]*sql.DB) *Sampler {
	probes := map[string]probe{}
	for name, d := range dbs {
		probes[name] = func() bool { return writable(d) }
	}
	s := newSampler(probes, 50*time.Millisecond)
	go s.run()
	return s
}

func newSampler(probes map[string]probe, interval time.Duration) *Sampler {
	names := make([]string, 0, len(probes))
	for n := range probes {
		names = append(names, n)
	}
	slices.Sort(names)
	return &Sampler{probes: probes, names: names, interval: interval, done: make(chan struct{})}
}

func writable(d *sql.DB) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var ro, sro bool
	return d.QueryRowContext(ctx, "SELECT @@read_only, @@super_read_only").Scan(&ro, &sro) == nil && !ro && !sro
}

func (s *Sampler) run() {
	defer close(s.done)
	for !s.stop.Load() {
		s.sample()
		time.Sleep(s.interval)
	}
}

// sample reads every instance forwards and then backwards, and records the instances
// both reads found writable.
func (s *Sampler) sample() {
	first := map[string]bool{}
	oneRead := 0
	for _, n := range s.names {
		first[n] = s.probes[n]()
		if first[n] {
			oneRead++
		}
	}
	var both []string
	for _, n := range slices.Backward(s.names) {
		if s.probes[n]() && first[n] {
			both = append(both, n)
		}
	}
	n := int32(len(both))
	if n > s.maxWritable.Load() {
		s.maxWritable.Store(n)
	}
	if oneRead > 1 {
		s.oneReadTwoWritable.Add(1)
	}
	if n > 1 {
		s.twoWritable.Add(1)
		s.mu.Lock()
		if s.firstOffence == "" {
			slices.Sort(both)
			s.firstOffence = time.Now().Format(time.RFC3339Nano) + " " + strings.Join(both, ",")
		}
		s.mu.Unlock()
	}
	s.samples.Add(1)
}

// SamplerResult is what a sampler saw.
type SamplerResult struct {
	Samples, MaxWritable, TwoWritable int
	// OneReadTwoWritable counts the samples whose first pass alone found more than one
	// instance writable: what reading each instance once would have reported. It is not a
	// finding (see Sampler), only a measure of how often reads straddled a role change.
	OneReadTwoWritable int
	// FirstOffence is when more than one instance was first seen writable, and which.
	FirstOffence string
}

// Stop ends the sampling and returns what it saw.
func (s *Sampler) Stop() SamplerResult {
	s.stop.Store(true)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return SamplerResult{Samples: int(s.samples.Load()), MaxWritable: int(s.maxWritable.Load()),
		TwoWritable: int(s.twoWritable.Load()), OneReadTwoWritable: int(s.oneReadTwoWritable.Load()),
		FirstOffence: s.firstOffence}
}
