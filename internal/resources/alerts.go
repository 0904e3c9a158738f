package resources

import (
	"fmt"
	"strings"
)

// Dolphin's alerts read the operator's own metrics (internal/metrics, docs/metrics.md),
// not an exporter's: they need the operator scraped with honor_labels (its series carry
// the cluster's namespace), and nothing next to mysqld. Each has docs/runbooks/<Name>.md.
// Cluster alerts go into each cluster's PrometheusRule (for that cluster) and, for every
// cluster, into config/prometheus/dolphin-alerts.yaml (`make manifests`), which
// `make test-rules` checks and unit-tests with promtool; operator alerts only there.

// Alert is one alerting rule.
type Alert struct {
	Name     string
	For      string
	Severity string
	Summary  string
	// Expr is the rule's PromQL, given sel: sel(matchers...) is the label selector of the
	// series it reads, the matchers plus those of the cluster the rule is for.
	Expr func(sel func(matchers ...string) string) string
}

// ClusterAlerts are about one cluster each: its namespace and cluster labels say which.
var ClusterAlerts = []Alert{
	{Name: "DolphinClusterFailed", For: "1m", Severity: "critical",
		Summary: "MySQLCluster {{ $labels.namespace }}/{{ $labels.cluster }} is Failed: it cannot go on without a change.",
		Expr: func(sel func(...string) string) string {
			return "dolphin_cluster_phase" + sel(`phase="Failed"`) + " == 1"
		}},
	{Name: "DolphinNoPrimary", For: "1m", Severity: "critical",
		Summary: "MySQLCluster {{ $labels.namespace }}/{{ $labels.cluster }} has no primary: writes fail.",
		Expr: func(sel func(...string) string) string {
			return "max by (namespace, cluster) (dolphin_instance_primary" + sel() + ") == 0"
		}},
	{Name: "DolphinFailoverBlocked", For: "1m", Severity: "critical",
		Summary: "The primary of {{ $labels.namespace }}/{{ $labels.cluster }} is lost and a failover is refused: too few replicas answer to prove no acknowledged write would be lost.",
		Expr:    func(sel func(...string) string) string { return "dolphin_cluster_failover_blocked" + sel() + " == 1" }},
	{Name: "DolphinMySQLInstanceDown", For: "1m", Severity: "critical",
		Summary: "Instance {{ $labels.instance }} of {{ $labels.namespace }}/{{ $labels.cluster }} does not answer the operator.",
		Expr:    func(sel func(...string) string) string { return "dolphin_instance_up" + sel() + " == 0" }},
	{Name: "DolphinMySQLReplicationStopped", For: "2m", Severity: "critical",
		Summary: "Replica {{ $labels.instance }} of {{ $labels.namespace }}/{{ $labels.cluster }} has a replication thread stopped.",
		Expr: func(sel func(...string) string) string {
			return "(dolphin_instance_replication_io_running" + sel() + " == 0 or dolphin_instance_replication_sql_running" + sel() +
				" == 0) unless on (namespace, cluster, instance) dolphin_instance_fenced" + sel() + " == 1"
		}},
	{Name: "DolphinMySQLReplicationLag", For: "5m", Severity: "warning",
		Summary: "Replica {{ $labels.instance }} of {{ $labels.namespace }}/{{ $labels.cluster }} lacks more than 1000 of the primary's transactions.",
		Expr: func(sel func(...string) string) string {
			return "dolphin_instance_replication_lag_transactions" + sel() + " > 1000" +
				" unless on (namespace, cluster, instance) dolphin_instance_fenced" + sel() + " == 1"
		}},
	{Name: "DolphinInstanceFenced", For: "1h", Severity: "warning",
		Summary: "Instance {{ $labels.instance }} of {{ $labels.namespace }}/{{ $labels.cluster }} has been fenced for an hour: it serves nothing and is no failover candidate.",
		Expr:    func(sel func(...string) string) string { return "dolphin_instance_fenced" + sel() + " == 1" }},
	{Name: "DolphinErrantTransactions", For: "1m", Severity: "warning",
		Summary: "Replica {{ $labels.instance }} of {{ $labels.namespace }}/{{ $labels.cluster }} holds transactions the primary never had.",
		Expr: func(sel func(...string) string) string {
			return "dolphin_instance_errant_transactions" + sel() + " > 0"
		}},
	{Name: "DolphinBackupFailed", For: "1m", Severity: "warning",
		Summary: "The newest backup of {{ $labels.namespace }}/{{ $labels.cluster }} failed, after its newest completed one (if any).",
		Expr: func(sel func(...string) string) string {
			failed, done := "dolphin_backup_last_failure_timestamp_seconds"+sel(), "dolphin_backup_last_success_timestamp_seconds"+sel()
			return fmt.Sprintf("%s > on (namespace, cluster) %s or (%s unless on (namespace, cluster) %s)", failed, done, failed, done)
		}},
	{Name: "DolphinSemiSyncDegraded", For: "1m", Severity: "critical",
		Summary: "The primary of {{ $labels.namespace }}/{{ $labels.cluster }} has fewer semi-sync replicas than each commit waits for: commits wait, or (with a short timeout) are acknowledged by too few.",
		Expr: func(sel func(...string) string) string {
			return "dolphin_cluster_semisync_replicas" + sel() + " < on (namespace, cluster) dolphin_cluster_semisync_wait_for_replicas" + sel()
		}},
	{Name: "DolphinBackupTooOld", For: "10m", Severity: "warning",
		Summary: "The newest completed backup of {{ $labels.namespace }}/{{ $labels.cluster }} is older than two intervals of its schedule.",
		Expr: func(sel func(...string) string) string {
			return "time() - dolphin_backup_last_success_timestamp_seconds" + sel() +
				" > on (namespace, cluster) 2 * dolphin_backup_schedule_interval_seconds" + sel()
		}},
	{Name: "DolphinBackupVerificationFailed", For: "1m", Severity: "warning",
		Summary: "The newest restore verification of {{ $labels.namespace }}/{{ $labels.cluster }} failed: its newest backup may not restore.",
		Expr: func(sel func(...string) string) string {
			return "dolphin_backup_last_verification_failure_timestamp_seconds" + sel()
		}},
	{Name: "DolphinBinlogArchiveStalled", For: "5m", Severity: "warning",
		Summary: "The binary log archive of {{ $labels.namespace }}/{{ $labels.cluster }} has not been complete for 15 minutes: a recovery cannot reach past then.",
		Expr: func(sel func(...string) string) string {
			return "time() - dolphin_binlog_archive_last_success_timestamp_seconds" + sel() + " > 900"
		}},
}

// OperatorAlerts are about the operator itself.
var OperatorAlerts = []Alert{
	{Name: "DolphinOperatorReconcileErrors", For: "15m", Severity: "warning",
		Summary: "The Dolphin operator's {{ $labels.controller }} controller has been failing reconciles for 15 minutes.",
		Expr: func(func(...string) string) string {
			return `sum by (controller) (rate(controller_runtime_reconcile_errors_total{controller=~"mysqlcluster|mysqlbackup"}[5m])) > 0`
		}},
	{Name: "DolphinOperatorAbsent", For: "5m", Severity: "critical",
		Summary: "No Dolphin operator has been scraped for 5 minutes: nothing fails over, backs up or reports.",
		Expr:    func(func(...string) string) string { return "absent(dolphin_topology_pass_duration_seconds_count)" }},
}

// selector returns sel for rules about every cluster (cluster "") or about one.
func selector(namespace, cluster string) func(matchers ...string) string {
	return func(matchers ...string) string {
		if cluster != "" {
			matchers = append(matchers, fmt.Sprintf("namespace=%q", namespace), fmt.Sprintf("cluster=%q", cluster))
		}
		if len(matchers) == 0 {
			return ""
		}
		return "{" + strings.Join(matchers, ",") + "}"
	}
}

// AlertRule is the rule of the alert, for every cluster (cluster "") or for one.
func AlertRule(a Alert, namespace, cluster string) map[string]any {
	return map[string]any{"alert": a.Name, "expr": a.Expr(selector(namespace, cluster)), "for": a.For,
		"labels":      map[string]any{"severity": a.Severity},
		"annotations": map[string]any{"summary": a.Summary, "runbook_url": RunbookBase + a.Name + ".md"}}
}

// AlertGroups are the rule groups of the plain rules file: every cluster's alerts and the
// operator's.
func AlertGroups() []any {
	group := func(name string, alerts []Alert) map[string]any {
		rules := make([]any, 0, len(alerts))
		for _, a := range alerts {
			rules = append(rules, AlertRule(a, "", ""))
		}
		return map[string]any{"name": name, "rules": rules}
	}
	return []any{group("dolphin-clusters", ClusterAlerts), group("dolphin-operator", OperatorAlerts)}
}
