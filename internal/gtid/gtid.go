// Package gtid does arithmetic on MySQL GTID sets ("uuid[:tag]:1-5:7,uuid2:1-3") in Go, so
// that the topology decision can compare what instances have executed and received without
// asking a server. Tagged GTIDs (MySQL 8.3+, "uuid:tag:1-5") are kept apart from untagged
// ones of the same server, as MySQL does.
package gtid

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// interval is a closed range of transaction numbers.
type interval struct{ lo, hi int64 }

// Set is a parsed GTID set: per source key ("uuid" or "uuid:tag"), sorted, disjoint,
// non-adjacent intervals. The zero value is the empty set.
type Set map[string][]interval

// Parse reads a GTID set as MySQL prints it (whitespace and line breaks allowed).
func Parse(s string) (Set, error) {
	set := Set{}
	s = strings.Join(strings.Fields(s), "")
	if s == "" {
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		fields := strings.Split(part, ":")
		if len(fields) < 2 || len(fields[0]) != 36 {
			return nil, fmt.Errorf("GTID set %q: %q is not uuid:interval", s, part)
		}
		key := strings.ToLower(fields[0])
		for _, f := range fields[1:] {
			if f == "" {
				return nil, fmt.Errorf("GTID set %q: empty element in %q", s, part)
			}
			if f[0] < '0' || f[0] > '9' { // a tag: applies to the intervals after it
				key = strings.ToLower(fields[0]) + ":" + strings.ToLower(f)
				continue
			}
			iv, err := parseInterval(f)
			if err != nil {
				return nil, fmt.Errorf("GTID set %q: %w", s, err)
			}
			set[key] = append(set[key], iv)
		}
	}
	for k := range set {
		set[k] = normalize(set[k])
	}
	return set, nil
}

// MustParse is Parse for constants in tests; it panics on a malformed set.
func MustParse(s string) Set {
	set, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return set
}

func parseInterval(f string) (interval, error) {
	lo, hi, isRange := strings.Cut(f, "-")
	a, err := strconv.ParseInt(lo, 10, 64)
	if err != nil || a < 1 {
		return interval{}, fmt.Errorf("bad transaction number %q", f)
	}
	b := a
	if isRange {
		if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
			return interval{}, fmt.Errorf("bad interval %q", f)
		}
	}
	return interval{a, b}, nil
}

func normalize(ivs []interval) []interval {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].lo < ivs[j].lo })
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, iv.hi)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// IsEmpty reports whether the set holds no transaction.
func (s Set) IsEmpty() bool {
	for _, ivs := range s {
		if len(ivs) > 0 {
			return false
		}
	}
	return true
}

// Count is the number of transactions in the set.
func (s Set) Count() int64 {
	var n int64
	for _, ivs := range s {
		for _, iv := range ivs {
			n += iv.hi - iv.lo + 1
		}
	}
	return n
}

// Union returns s ∪ o.
func (s Set) Union(o Set) Set {
	out := Set{}
	for k, ivs := range s {
		out[k] = slices.Clone(ivs)
	}
	for k, ivs := range o {
		out[k] = normalize(append(out[k], ivs...))
	}
	return out
}

// Add returns s with transaction gno of source (a server's uuid, or "uuid:tag").
func (s Set) Add(source string, gno int64) Set {
	return s.Union(Set{source: {{gno, gno}}})
}

// Runs is, per source, how many unbroken runs of transactions the set holds.
func (s Set) Runs() map[string]int {
	out := map[string]int{}
	for k, ivs := range s {
		if len(ivs) > 0 {
			out[k] = len(ivs)
		}
	}
	return out
}

// Subtract returns s − o: the transactions of s that o lacks.
func (s Set) Subtract(o Set) Set {
	out := Set{}
	for k, ivs := range s {
		rest := slices.Clone(ivs)
		for _, cut := range o[k] {
			rest = cutInterval(rest, cut)
		}
		if len(rest) > 0 {
			out[k] = rest
		}
	}
	return out
}

func cutInterval(ivs []interval, cut interval) []interval {
	var out []interval
	for _, iv := range ivs {
		if cut.hi < iv.lo || cut.lo > iv.hi {
			out = append(out, iv)
			continue
		}
		if iv.lo < cut.lo {
			out = append(out, interval{iv.lo, cut.lo - 1})
		}
		if iv.hi > cut.hi {
			out = append(out, interval{cut.hi + 1, iv.hi})
		}
	}
	return out
}

// Intersect returns s ∩ o.
func (s Set) Intersect(o Set) Set { return s.Subtract(s.Subtract(o)) }

// WithoutSource is s less the transactions the server uuid originated (tagged or not).
func (s Set) WithoutSource(uuid string) Set {
	uuid = strings.ToLower(uuid)
	out := Set{}
	for k, ivs := range s {
		if uuid != "" && (k == uuid || strings.HasPrefix(k, uuid+":")) {
			continue
		}
		out[k] = ivs
	}
	return out
}

// Contains reports whether every transaction of o is in s.
func (s Set) Contains(o Set) bool { return o.Subtract(s).IsEmpty() }

// Equal reports whether s and o hold the same transactions.
func (s Set) Equal(o Set) bool { return s.Contains(o) && o.Contains(s) }

// String prints the set as MySQL does: sources sorted, intervals "a-b" or "a".
func (s Set) String() string {
	keys := make([]string, 0, len(s))
	for k, ivs := range s {
		if len(ivs) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var b strings.Builder
		b.WriteString(k)
		for _, iv := range s[k] {
			if iv.lo == iv.hi {
				fmt.Fprintf(&b, ":%d", iv.lo)
			} else {
				fmt.Fprintf(&b, ":%d-%d", iv.lo, iv.hi)
			}
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ",")
}
