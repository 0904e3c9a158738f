package promfixture

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const root = "../.."

const scrape = `# HELP dolphin_instance_up 1 when read.
# TYPE dolphin_instance_up gauge
dolphin_instance_up{namespace="a",cluster="db",instance="db-0"} 1 1700000000000
dolphin_instance_up{namespace="b",cluster="db",instance="db-0"} 0
# HELP dolphin_pass_seconds A pass.
# TYPE dolphin_pass_seconds histogram
dolphin_pass_seconds_bucket{le="1"} 2
dolphin_pass_seconds_bucket{le="+Inf"} 3
dolphin_pass_seconds_sum 2.5
dolphin_pass_seconds_count 3
`

func TestWriteKeepsWhatItIsToldSortedAndWithoutTimestamps(t *testing.T) {
	families, err := Parse([]byte(scrape))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "x.prom")
	require.NoError(t, Write(path, "one\ntwo", families, func(_ string, l map[string]string) bool { return l["namespace"] != "b" }))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(raw)
	require.True(t, strings.HasPrefix(text, "# one\n# two\n"), text)
	require.NotContains(t, text, `namespace="b"`)
	require.NotContains(t, text, "1700000000000", "timestamps are dropped")
	require.Less(t, strings.Index(text, "dolphin_instance_up"), strings.Index(text, "dolphin_pass_seconds"))

	ix, err := Load(filepath.Dir(path))
	require.NoError(t, err)
	require.NoError(t, ix.Check("dolphin_instance_up", []string{"namespace", "cluster", "instance"}))
	require.NoError(t, ix.Check("dolphin_pass_seconds_bucket", []string{"le"}))
	require.NoError(t, ix.Check("dolphin_pass_seconds_count", nil))
	require.EqualError(t, ix.Check("dolphin_pass_seconds", nil), "no scraped series is named dolphin_pass_seconds")
	require.EqualError(t, ix.Check("dolphin_instance_up", []string{"pod", "cluster", "role"}),
		"no scraped series dolphin_instance_up has the label(s) pod, role (its labels: cluster, instance, namespace)")

	require.Error(t, Write(path, "", families, func(string, map[string]string) bool { return false }), "nothing to write")
	_, err = Load(t.TempDir())
	require.ErrorContains(t, err, "make alert-fixtures")
}

func TestParseSeries(t *testing.T) {
	name, labels, err := ParseSeries(`dolphin_instance_up{namespace="shop", cluster="a\"b",instance="orders-0"}`)
	require.NoError(t, err)
	require.Equal(t, "dolphin_instance_up", name)
	require.Equal(t, map[string]string{"namespace": "shop", "cluster": `a\"b`, "instance": "orders-0"}, labels)
	name, labels, err = ParseSeries("up{}")
	require.NoError(t, err)
	require.Equal(t, "up", name)
	require.Empty(t, labels)
	for _, bad := range []string{`{a="b"}`, `up{a=b}`, `up{a="b"`, `up{a="1",a="2"}`} {
		_, _, err := ParseSeries(bad)
		require.Error(t, err, bad)
	}
}

func TestMetricsIn(t *testing.T) {
	require.Equal(t, []string{"controller_runtime_x_total", "dolphin_a", "mysql_up"},
		MetricsIn(`max by (cluster) (dolphin_a{x="y"}) and mysql_up or dolphin_a + rate(controller_runtime_x_total[5m])`))
}

func fixtures(t *testing.T) Index {
	t.Helper()
	ix, err := Load(filepath.Join(root, Dir))
	require.NoError(t, err)
	return ix
}

// The promtool tests' input series are series a scrape has: their names and label names.
func TestTheRulesTestsReadOnlyScrapedSeries(t *testing.T) {
	ix := fixtures(t)
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "dolphin-alerts_test.yaml"))
	require.NoError(t, err)
	var file struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	n := 0
	for _, tc := range file.Tests {
		for _, in := range tc.InputSeries {
			name, labels, err := ParseSeries(in.Series)
			require.NoError(t, err)
			names := make([]string, 0, len(labels))
			for l := range labels {
				names = append(names, l)
			}
			require.NoError(t, ix.Check(name, names), "input series %s", in.Series)
			n++
		}
	}
	require.Positive(t, n)
}

// Every series the shipped rules read is one a scrape has.
func TestTheShippedRulesReadOnlyScrapedSeries(t *testing.T) {
	ix := fixtures(t)
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "dolphin-alerts.yaml"))
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, m := range MetricsIn(r.Expr) {
				require.NoError(t, ix.Check(m, nil), "alert %s", r.Alert)
				n++
			}
		}
	}
	require.Positive(t, n)
}

// Every metric docs/metrics.md lists was captured: a metric added without recapturing the
// fixtures fails here.
func TestEveryDocumentedOperatorMetricWasCaptured(t *testing.T) {
	ix := fixtures(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `((?:dolphin|controller_runtime)_[a-z_]+)` \\|").FindAllStringSubmatch(string(raw), -1)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		if ix.Check(r[1], nil) != nil && ix.Check(r[1]+"_count", nil) != nil {
			t.Errorf("%s is documented but no fixture has it (run `make alert-fixtures`)", r[1])
		}
	}
}
