package workload

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// Sampler reads @@read_only and @@super_read_only of every instance several times a
// second and counts the samples in which more than one instance would accept a write.
type Sampler struct {
	dbs          map[string]*sql.DB
	samples      atomic.Int32
	maxWritable  atomic.Int32
	twoWritable  atomic.Int32
	stop         atomic.Bool
	done         chan struct{}
	mu           sync.Mutex
	firstOffence string
}

// StartSampler samples the instances of dbs (by name) every 50 ms until Stop; each read
// has a 300 ms deadline, and an instance that does not answer counts as not writable.
func StartSampler(dbs map[string]*sql.DB) *Sampler {
	s := &Sampler{dbs: dbs, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *Sampler) run() {
	defer close(s.done)
	for !s.stop.Load() {
		var writable []string
		for name, d := range s.dbs {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			var ro, sro bool
			if err := d.QueryRowContext(ctx, "SELECT @@read_only, @@super_read_only").Scan(&ro, &sro); err == nil && !ro && !sro {
				writable = append(writable, name)
			}
			cancel()
		}
		n := int32(len(writable))
		if n > s.maxWritable.Load() {
			s.maxWritable.Store(n)
		}
		if n > 1 {
			s.twoWritable.Add(1)
			s.mu.Lock()
			if s.firstOffence == "" {
				s.firstOffence = time.Now().Format(time.RFC3339Nano) + " " + joinNames(writable)
			}
			s.mu.Unlock()
		}
		s.samples.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
}

// SamplerResult is what a sampler saw.
type SamplerResult struct {
	Samples, MaxWritable, TwoWritable int
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
		TwoWritable: int(s.twoWritable.Load()), FirstOffence: s.firstOffence}
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}
