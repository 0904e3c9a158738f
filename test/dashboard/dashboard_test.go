package dashboard

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dolphin-operator/dolphin/test/promfixture"
)

const shipped = "../../config/grafana/dolphin-overview.json"

func TestTheShippedDashboardIsWellFormed(t *testing.T) {
	d, err := Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, q := range d.Queries("ns", "db") {
		rows[q.Row] = true
		if strings.Contains(q.Expr, "$") {
			t.Errorf("panel %q: a variable is left in %s", q.Panel, q.Expr)
		}
	}
	for _, want := range []string{"Cluster", "Replication", "MySQL", "Backups", "Operator"} {
		if !rows[want] {
			t.Errorf("no %q row", want)
		}
	}
	vars, err := d.VariableQueries("ns", "db")
	if err != nil {
		t.Fatal(err)
	}
	if vars["cluster"] != `group by (cluster) (dolphin_cluster_instances{namespace="ns"})` {
		t.Errorf("cluster variable: %q", vars["cluster"])
	}
}

// Every dolphin_ metric a panel reads is one the operator documents (docs/metrics.md,
// which a unit test keeps equal to what it exports).
func TestTheDashboardReadsOnlyDocumentedOperatorMetrics(t *testing.T) {
	d, err := Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`dolphin_[a-z_]+`)
	for _, q := range d.Queries("ns", "db") {
		for _, m := range name.FindAllString(q.Expr, -1) {
			m = strings.TrimSuffix(m, "_bucket")
			if !strings.Contains(string(doc), "`"+m+"`") {
				t.Errorf("panel %q reads %s, which docs/metrics.md does not list", q.Panel, m)
			}
		}
	}
}

func TestCheckNamesEveryProblem(t *testing.T) {
	d := &Dashboard{UID: "x", Title: "x", Panels: []Panel{
		{ID: 1, Type: "stat", Title: "a", Datasource: &Datasource{Type: "prometheus", UID: DatasourceRef},
			Targets: []Target{{RefID: "A", Expr: "up", Datasource: &Datasource{UID: DatasourceRef}}}},
		{ID: 1, Type: "stat", Title: "b", Datasource: &Datasource{Type: "prometheus", UID: "prom-1"}},
	}}
	err := d.Check()
	if err == nil {
		t.Fatal("no problem found")
	}
	for _, want := range []string{`"datasource" variable`, `"namespace" query variable`, `"cluster" query variable`,
		`id 1 is not positive or is "a"'s too`, `panel "b" does not read ${datasource}`, `panel "b" has no query`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// Every operator and exporter series a panel reads is one a real scrape has (the fixtures
// `make alert-fixtures` captures from the e2e tier).
func TestTheDashboardReadsOnlyScrapedSeries(t *testing.T) {
	d, err := Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := promfixture.Load("../../" + promfixture.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range d.Queries("ns", "db") {
		for _, m := range promfixture.MetricsIn(q.Expr) {
			if err := ix.Check(m, nil); err != nil {
				t.Errorf("panel %q: %v", q.Panel, err)
			}
		}
	}
}
