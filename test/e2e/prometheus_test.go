package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/dashboard"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// startPrometheus runs the ground's Prometheus with the shipped rules file, scraping the
// operator with the scraper's token and every cluster's exporters.
func startPrometheus(t *testing.T, s *scraper) *ground.Prometheus {
	t.Helper()
	p, err := g.StartPrometheus(context.Background(), ground.PrometheusOptions{OperatorToken: s.token,
		RuleFiles: []string{filepath.Join(ground.RepoRoot(), "config", "prometheus", "dolphin-alerts.yaml")}})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return p
}

// series is one query's result as instance → value, for comparing whole results.
func series(v model.Vector) map[string]float64 {
	out := map[string]float64{}
	for _, s := range v {
		out[string(s.Metric["instance"])] = float64(s.Value)
	}
	return out
}

// requirePrometheusSees waits until Prometheus's queries say what a Ready cluster of three
// instances with name-0 primary is, from both sources: the operator's series and the
// exporters' (which reach mysqld over TLS only: require_secure_transport is on).
func requirePrometheusSees(t *testing.T, p *ground.Prometheus, ns, name string) {
	t.Helper()
	sel := fmt.Sprintf(`{namespace=%q,cluster=%q}`, ns, name)
	replicas := map[string]float64{name + "-1": 1, name + "-2": 1}
	want := []struct {
		query string
		want  map[string]float64
	}{
		// A cluster's own series carry the operator's target as their instance: sum()
		// drops it.
		{"sum(dolphin_cluster_ready_instances" + sel + ")", map[string]float64{"": 3}},
		{`sum(dolphin_cluster_phase{namespace="` + ns + `",cluster="` + name + `",phase="Ready"})`, map[string]float64{"": 1}},
		{"mysql_up" + sel, map[string]float64{name + "-0": 1, name + "-1": 1, name + "-2": 1}},
		{"mysql_slave_status_replica_io_running" + sel, replicas},
		{"mysql_slave_status_replica_sql_running" + sel, replicas},
		{"mysql_global_status_rpl_semi_sync_source_status" + sel + " == 1", map[string]float64{name + "-0": 1}},
		// The instance label joins the sources: the exporter's view of who is read-only
		// against the operator's of who is primary.
		{"mysql_global_variables_super_read_only" + sel + " == 0 and on (namespace, cluster, instance) dolphin_instance_primary == 1",
			map[string]float64{name + "-0": 0}},
	}
	took := waitFor(t, 2*time.Minute, "Prometheus to see "+ns+"/"+name+" Ready", func() error {
		for _, w := range want {
			v, err := p.Query(context.Background(), w.query)
			if err != nil {
				return err
			}
			if got := series(v); !maps(got, w.want) {
				return fmt.Errorf("%s = %v, want %v", w.query, got, w.want)
			}
		}
		return nil
	})
	t.Logf("Prometheus sees %s/%s Ready %s after it was", ns, name, took.Round(10*time.Millisecond))
}

func maps(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// requireAlerts waits until every named alert of the shipped rules is pending or firing for
// the instance, and returns how long that took.
func requireAlerts(t *testing.T, p *ground.Prometheus, ns, name, instance string, alerts ...string) time.Duration {
	t.Helper()
	return waitFor(t, 2*time.Minute, "alerts "+strings.Join(alerts, ", ")+" for "+instance, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := p.API.Alerts(ctx)
		if err != nil {
			return err
		}
		var active []string
		for _, a := range res.Alerts {
			l := a.Labels
			if string(l["namespace"]) == ns && string(l["cluster"]) == name && string(l["instance"]) == instance &&
				(a.State == promv1.AlertStatePending || a.State == promv1.AlertStateFiring) {
				active = append(active, string(l["alertname"]))
			}
		}
		sort.Strings(active)
		for _, want := range alerts {
			if !slices.Contains(active, want) {
				return fmt.Errorf("%s is not pending or firing (active for %s: %v)", want, instance, active)
			}
		}
		return nil
	})
}

// requirePrometheusForgets waits until no instant query finds a series of the deleted
// cluster: the operator's are gone from its scrape and the exporters' targets with the pods.
func requirePrometheusForgets(t *testing.T, p *ground.Prometheus, ns, name string) {
	t.Helper()
	q := fmt.Sprintf(`count by (job, __name__) ({namespace=%q,cluster=%q})`, ns, name)
	waitFor(t, time.Minute, "Prometheus to have no series of "+ns+"/"+name, func() error {
		v, err := p.Query(context.Background(), q)
		if err != nil {
			return err
		}
		if len(v) > 0 {
			return fmt.Errorf("series left: %v", v)
		}
		return nil
	})
}

// requireDashboardQueries runs every query of the shipped dashboard, its variables set to
// the cluster, against the live Prometheus: each must parse and run, and every panel
// outside the Backups row (this cluster has taken none) must return data. The variables'
// own queries must offer the cluster.
func requireDashboardQueries(t *testing.T, p *ground.Prometheus, ns, name string) {
	t.Helper()
	d, err := dashboard.Load(filepath.Join(ground.RepoRoot(), "config", "grafana", "dolphin-overview.json"))
	require.NoError(t, err)
	vars, err := d.VariableQueries(ns, name)
	require.NoError(t, err)
	for v, want := range map[string]string{"namespace": ns, "cluster": name} {
		res, err := p.Query(context.Background(), vars[v])
		require.NoError(t, err)
		var offered []string
		for _, s := range res {
			offered = append(offered, string(s.Metric[model.LabelName(v)]))
		}
		require.Contains(t, offered, want, "the %s variable (%s) offers %s", v, vars[v], want)
	}
	// rate() over 5 minutes needs two samples: the first scrapes are seconds old.
	took := waitFor(t, time.Minute, "every dashboard panel outside Backups to show data", func() error {
		var empty []string
		for _, q := range d.Queries(ns, name) {
			res, err := p.Query(context.Background(), q.Expr)
			if err != nil {
				return fmt.Errorf("panel %q (%s): %w", q.Panel, q.RefID, err)
			}
			if len(res) == 0 && q.Row != "Backups" {
				empty = append(empty, q.Panel+"/"+q.RefID)
			}
		}
		if len(empty) > 0 {
			return fmt.Errorf("no data: %s", strings.Join(empty, ", "))
		}
		return nil
	})
	t.Logf("%d dashboard queries run, every core panel has data (%s)", len(d.Queries(ns, name)), took.Round(10*time.Millisecond))
}
