package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dolphin-operator/dolphin/test/promfixture"
)

// procSample is what /proc says of the operator's process at one moment.
type procSample struct {
	cpu   float64 // user + system CPU seconds since it started
	hwmMB float64 // peak resident set since it started, or since resetPeak
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go builds for.
const clockTicks = 100

func sampleProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("while reading the operator's CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after its closing
	// parenthesis start at field 3 (state). utime and stime are fields 14 and 15.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	s.cpu = (ut + st) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("while reading the operator's memory: %w", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			s.hwmMB = kb / 1024
		}
	}
	return s, nil
}

// resetPeak starts VmHWM over from the current resident set (clear_refs 5), so that the
// steady window's peak is its own.
func resetPeak(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200); err != nil {
		return fmt.Errorf("while resetting the operator's peak RSS: %w", err)
	}
	return nil
}

// activeOpens is the namespace's count of TCP connections opened so far (every dial the
// operator makes to a database; the control plane's connections are long-lived).
func activeOpens() (int64, error) {
	f, err := os.Open("/proc/net/snmp")
	if err != nil {
		return 0, fmt.Errorf("while reading TCP counters: %w", err)
	}
	defer f.Close()
	var header []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Tcp:" {
			continue
		}
		if header == nil {
			header = fields
			continue
		}
		for i, h := range header {
			if h == "ActiveOpens" && i < len(fields) {
				return strconv.ParseInt(fields[i], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("/proc/net/snmp has no Tcp ActiveOpens")
}

// families are a scrape's metric families by name.
type families map[string]*dto.MetricFamily

// scrape reads the operator's metrics endpoint.
func scrape(ctx context.Context) (families, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("while scraping the operator: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("while scraping the operator: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping the operator: %s", resp.Status)
	}
	return promfixture.Parse(body)
}

// sum adds the values of a counter or gauge's series whose labels hold every pair of
// match (name, value, name, value, ...).
func sum(m families, metric string, match ...string) float64 {
	var t float64
	for _, s := range series(m, metric, match...) {
		t += s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
	}
	return t
}

// series are a metric's series whose labels hold every pair of match.
func series(m families, metric string, match ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, s := range m[metric].GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k := 0; k+1 < len(match); k += 2 {
			ok = ok && labels[match[k]] == match[k+1]
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// auditCounts are the requests one user made in a window, from the API server's audit log.
type auditCounts struct {
	byVerb    map[string]int
	discovery int
	// byRequest counts "verb resource[/subresource]": what the requests were for.
	byRequest map[string]int // GETs of /api, /apis and group versions: what a REST mapper reads
}

func (a auditCounts) reads() int { return a.byVerb["get"] + a.byVerb["list"] }
func (a auditCounts) writes() int {
	return a.byVerb["create"] + a.byVerb["update"] + a.byVerb["patch"] + a.byVerb["delete"] + a.byVerb["deletecollection"]
}

// countAudit reads the audit log for the requests user made (as the impersonated user)
// that completed within [from, to).
func countAudit(path, user string, from, to time.Time) (auditCounts, error) {
	c := auditCounts{byVerb: map[string]int{}, byRequest: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("while reading the audit log: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	for {
		var e struct {
			Stage            string    `json:"stage"`
			Verb             string    `json:"verb"`
			RequestURI       string    `json:"requestURI"`
			StageTimestamp   time.Time `json:"stageTimestamp"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
		}
		if err := dec.Decode(&e); err == io.EOF {
			return c, nil
		} else if err != nil {
			return c, fmt.Errorf("while reading the audit log: %w", err)
		}
		if e.Stage != "ResponseComplete" || e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != user ||
			e.StageTimestamp.Before(from) || !e.StageTimestamp.Before(to) {
			continue
		}
		c.byVerb[e.Verb]++
		what := e.Verb + " " + e.RequestURI
		if e.ObjectRef != nil {
			what = e.Verb + " " + strings.TrimSuffix(e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource, "/")
		}
		c.byRequest[what]++
		if e.ObjectRef == nil && (e.RequestURI == "/api" || strings.HasPrefix(e.RequestURI, "/api?") ||
			strings.HasPrefix(e.RequestURI, "/apis")) {
			c.discovery++
		}
	}
}

// top is the n most frequent requests, "count what" each.
func (a auditCounts) top(n int) string {
	keys := make([]string, 0, len(a.byRequest))
	for k := range a.byRequest {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return a.byRequest[keys[i]] > a.byRequest[keys[j]] })
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%d %s", a.byRequest[k], k))
	}
	return strings.Join(parts, ", ")
}

// auditPolicy logs every request's metadata once, when it ends: the benchmark counts the
// operator's by verb. With detail (for looking into what an operator writes) the bodies of
// its patches and updates of clusters are logged too.
func auditPolicy(detail bool) string {
	p := `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
`
	if detail {
		p += `- level: Request
  verbs: ["patch", "update"]
  resources: [{group: mysql.dolphin-operator.io}, {group: moco.cybozu.com}]
`
	}
	return p + `- level: Metadata
`
}
