package resources

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Prometheus Operator kinds; the reconciler creates them only when their CRDs exist.
var (
	ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	PrometheusRuleGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}
)

// RunbookBase is where every alert's runbook lives (docs/runbooks/<alert>.md).
const RunbookBase = "https://github.com/dolphin-operator/dolphin/blob/main/docs/runbooks/"

func monitoringObject(c *mysqlv1beta1.MySQLCluster, gvk schema.GroupVersionKind, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(MonitoringName(c))
	u.SetNamespace(c.Namespace)
	u.SetLabels(merge(Labels(c, ComponentDatabase), labels))
	return u
}

// Relabeling copies a target's meta label into a label of its series.
type Relabeling struct {
	SourceLabel, TargetLabel string
}

// ExporterRelabelings give an exporter's series the labels the operator's own series of
// the instance have: cluster (the metrics Service's instance label) and instance (the pod's
// name), next to the namespace the Prometheus Operator adds. Dashboards and alerts then
// join both sources on namespace, cluster and instance.
var ExporterRelabelings = []Relabeling{
	{SourceLabel: ServiceLabelMeta(LabelInstance), TargetLabel: "cluster"},
	{SourceLabel: "__meta_kubernetes_pod_name", TargetLabel: "instance"},
}

// ServiceLabelMeta is the meta label under which Prometheus's Kubernetes discovery shows
// a target's Service label (every character outside [a-zA-Z0-9] becomes _).
func ServiceLabelMeta(label string) string {
	return "__meta_kubernetes_service_label_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, label)
}

// ServiceMonitor scrapes the exporters; nil unless both the exporter and the
// ServiceMonitor are enabled.
func ServiceMonitor(c *mysqlv1beta1.MySQLCluster) *unstructured.Unstructured {
	m := c.Spec.Monitoring
	if !m.Exporter.Enabled || !m.ServiceMonitor.Enabled {
		return nil
	}
	relabelings := make([]any, 0, len(ExporterRelabelings))
	for _, r := range ExporterRelabelings {
		relabelings = append(relabelings, map[string]any{"sourceLabels": []any{r.SourceLabel}, "targetLabel": r.TargetLabel, "action": "replace"})
	}
	endpoint := map[string]any{"port": "metrics", "relabelings": relabelings}
	if m.ServiceMonitor.Interval != nil {
		endpoint["interval"] = m.ServiceMonitor.Interval.Duration.String()
	}
	sel := map[string]any{}
	for k, v := range Labels(c, ComponentDatabase) {
		sel[k] = v
	}
	return monitoringObject(c, ServiceMonitorGVK, m.ServiceMonitor.Labels, map[string]any{
		"selector":  map[string]any{"matchLabels": sel},
		"endpoints": []any{endpoint},
	})
}

// PrometheusRule holds Dolphin's alerts about the cluster (ClusterAlerts, on the
// operator's metrics); nil unless enabled.
func PrometheusRule(c *mysqlv1beta1.MySQLCluster) *unstructured.Unstructured {
	m := c.Spec.Monitoring
	if !m.PrometheusRule.Enabled {
		return nil
	}
	rules := make([]any, 0, len(ClusterAlerts))
	for _, a := range ClusterAlerts {
		rules = append(rules, AlertRule(a, c.Namespace, c.Name))
	}
	return monitoringObject(c, PrometheusRuleGVK, m.PrometheusRule.Labels, map[string]any{
		"groups": []any{map[string]any{"name": "dolphin-" + c.Name, "rules": rules}},
	})
}
