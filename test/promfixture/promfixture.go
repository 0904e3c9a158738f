// Package promfixture writes and reads the scrapes committed under config/prometheus/fixtures:
// what the operator and mysqld_exporter really serve, captured from the e2e tier's live
// cluster (`make alert-fixtures`). The alert rules' promtool tests and the dashboard's
// queries are checked against them offline, so neither can read a series no scrape has
// (the old rules read `mysql_slave_status_slave_io_running`, which no exporter of MySQL 8.4
// or 9.7 reports).
package promfixture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Dir is the fixtures' directory, relative to the repository's root.
const Dir = "config/prometheus/fixtures"

// CaptureEnv names the directory the e2e tier writes fixtures to when it is set.
const CaptureEnv = "DOLPHIN_CAPTURE_FIXTURES"

// Keep says whether a series of a family goes into a fixture.
type Keep func(family string, labels map[string]string) bool

// Write writes the series of families that keep accepts to path in the text exposition
// format, families and series sorted and timestamps dropped, so that a recapture's diff
// shows what changed in the series rather than when they were read.
func Write(path, header string, families map[string]*dto.MetricFamily, keep Keep) error {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		buf.WriteString("# " + line + "\n")
	}
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	kept := 0
	for _, n := range names {
		f := families[n]
		out := &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
		for _, m := range f.GetMetric() {
			if !keep(n, labelMap(m)) {
				continue
			}
			out.Metric = append(out.Metric, &dto.Metric{Label: m.Label, Gauge: m.Gauge, Counter: m.Counter,
				Summary: m.Summary, Untyped: m.Untyped, Histogram: m.Histogram})
		}
		if len(out.Metric) == 0 {
			continue
		}
		sort.Slice(out.Metric, func(i, j int) bool { return labelKey(out.Metric[i]) < labelKey(out.Metric[j]) })
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("encoding %s: %w", n, err)
		}
		kept += len(out.Metric)
	}
	if kept == 0 {
		return fmt.Errorf("%s: no series to write among %d families", path, len(families))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644) //nolint:gosec // a committed fixture, world-readable
}

// Parse reads a scrape in the text exposition format.
func Parse(raw []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(raw))
}

// Index is, for each series name the fixtures hold (a histogram's `_bucket`, `_sum` and
// `_count` each), the label names any of its series carries.
type Index map[string]map[string]bool

// Load indexes every `*.prom` file in dir.
func Load(dir string) (Index, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.prom"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.prom fixture in %s (run `make alert-fixtures`)", dir)
	}
	ix := Index{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		families, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, fam := range families {
			ix.add(fam)
		}
	}
	return ix, nil
}

func (ix Index) add(f *dto.MetricFamily) {
	for _, m := range f.GetMetric() {
		labels := labelMap(m)
		for _, name := range seriesNames(f) {
			extra := []string(nil)
			switch {
			case strings.HasSuffix(name, "_bucket"):
				extra = []string{"le"}
			case f.GetType() == dto.MetricType_SUMMARY && name == f.GetName():
				extra = []string{"quantile"}
			}
			set := ix[name]
			if set == nil {
				set = map[string]bool{}
				ix[name] = set
			}
			for l := range labels {
				set[l] = true
			}
			for _, l := range extra {
				set[l] = true
			}
		}
	}
}

// seriesNames are the names the family's series have in a query: a histogram or summary
// is several.
func seriesNames(f *dto.MetricFamily) []string {
	n := f.GetName()
	switch f.GetType() {
	case dto.MetricType_HISTOGRAM:
		return []string{n + "_bucket", n + "_sum", n + "_count"}
	case dto.MetricType_SUMMARY:
		return []string{n, n + "_sum", n + "_count"}
	}
	return []string{n}
}

// Check says whether a series of that name with those label names was scraped: the name
// must be there and each label name must be on some series of it.
func (ix Index) Check(name string, labels []string) error {
	set, ok := ix[name]
	if !ok {
		return fmt.Errorf("no scraped series is named %s", name)
	}
	var missing []string
	for _, l := range labels {
		if !set[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(set))
		for l := range set {
			have = append(have, l)
		}
		sort.Strings(have)
		return fmt.Errorf("no scraped series %s has the label(s) %s (its labels: %s)",
			name, strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	return nil
}

var (
	seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?$`)
	labelRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)`)
)

// ParseSeries reads a promtool input series, `name{label="value", ...}`.
func ParseSeries(s string) (string, map[string]string, error) {
	m := seriesRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", nil, fmt.Errorf("%q is not a series (name{label=\"value\",...})", s)
	}
	labels := map[string]string{}
	rest := m[2]
	for strings.TrimSpace(rest) != "" {
		l := labelRE.FindStringSubmatch(rest)
		if l == nil {
			return "", nil, fmt.Errorf("%q: cannot read the labels at %q", s, rest)
		}
		if _, dup := labels[l[1]]; dup {
			return "", nil, fmt.Errorf("%q: label %s twice", s, l[1])
		}
		labels[l[1]] = l[2]
		rest = rest[len(l[0]):]
	}
	return m[1], labels, nil
}

// metricRE finds names of Dolphin's, the exporter's and controller-runtime's series in a
// PromQL expression.
var metricRE = regexp.MustCompile(`\b(?:dolphin|mysql|controller_runtime)_[a-zA-Z0-9_:]*`)

// MetricsIn are the metric names an expression reads, sorted, each once.
func MetricsIn(expr string) []string {
	found := metricRE.FindAllString(expr, -1)
	slices.Sort(found)
	return slices.Compact(found)
}

// ErrNoFixtures says the capture directory is not set.
var ErrNoFixtures = errors.New(CaptureEnv + " is not set")

// CaptureDir is where the e2e tier writes fixtures, or ErrNoFixtures.
func CaptureDir() (string, error) {
	d := os.Getenv(CaptureEnv)
	if d == "" {
		return "", ErrNoFixtures
	}
	return d, nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func labelKey(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
