// Package dashboard reads Dolphin's Grafana dashboard (config/grafana) as the tests need it:
// its structure, checked without Grafana (which cannot run here), and every panel's
// queries with the dashboard's variables substituted, for a live Prometheus to run.
package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Dashboard is the part of Grafana's dashboard model the checks read.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one panel, or a row (Type "row") that the panels after it belong to.
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *Datasource `json:"datasource"`
	Targets    []Target    `json:"targets"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *Datasource `json:"datasource"`
}

// Datasource names the data source a panel or query reads.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a template variable.
type Variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Datasource *Datasource `json:"datasource"`
}

// DatasourceRef is how every panel and query names the data source: the datasource
// variable, so that the dashboard works with whatever a user's Prometheus is called.
const DatasourceRef = "${datasource}"

// Load reads a dashboard file.
func Load(path string) (*Dashboard, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Check returns every structural problem: a missing uid or title, a panel id used twice,
// a missing datasource, namespace or cluster variable, a panel or query not reading the
// datasource variable, a panel without a query.
func (d *Dashboard) Check() error {
	var errs []error
	if d.UID == "" || d.Title == "" {
		errs = append(errs, errors.New("the dashboard needs a uid and a title"))
	}
	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.Query != "prometheus" {
		errs = append(errs, errors.New(`templating needs a "datasource" variable of type datasource for prometheus`))
	}
	for _, name := range []string{"namespace", "cluster"} {
		if v, ok := vars[name]; !ok || v.Type != "query" || v.Datasource == nil || v.Datasource.UID != DatasourceRef {
			errs = append(errs, fmt.Errorf("templating needs a %q query variable on %s", name, DatasourceRef))
		}
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if other, ok := ids[p.ID]; ok || p.ID <= 0 {
			errs = append(errs, fmt.Errorf("panel %q: id %d is not positive or is %q's too", p.Title, p.ID, other))
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != DatasourceRef || p.Datasource.Type != "prometheus" {
			errs = append(errs, fmt.Errorf("panel %q does not read %s", p.Title, DatasourceRef))
		}
		if len(p.Targets) == 0 {
			errs = append(errs, fmt.Errorf("panel %q has no query", p.Title))
		}
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" || t.Datasource == nil || t.Datasource.UID != DatasourceRef {
				errs = append(errs, fmt.Errorf("panel %q, query %s: empty or not on %s", p.Title, t.RefID, DatasourceRef))
			}
		}
	}
	return errors.Join(errs...)
}

// Query is one panel query with the variables substituted.
type Query struct {
	// Row is the title of the row the panel is in.
	Row, Panel, RefID, Expr string
}

// Queries returns every panel's queries for one cluster.
func (d *Dashboard) Queries(namespace, cluster string) []Query {
	r := strings.NewReplacer("$namespace", namespace, "$cluster", cluster)
	var out []Query
	row := ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = p.Title
			continue
		}
		for _, t := range p.Targets {
			out = append(out, Query{Row: row, Panel: p.Title, RefID: t.RefID, Expr: r.Replace(t.Expr)})
		}
	}
	return out
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// VariableQueries returns, for each query variable, the PromQL Grafana's label_values(m, l)
// stands for (group by (l) (m)), with the variables before it substituted.
func (d *Dashboard) VariableQueries(namespace, cluster string) (map[string]string, error) {
	r := strings.NewReplacer("$namespace", namespace, "$cluster", cluster)
	out := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, s)
		}
		out[v.Name] = fmt.Sprintf("group by (%s) (%s)", m[2], r.Replace(m[1]))
	}
	return out, nil
}
