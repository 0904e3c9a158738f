package ground

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// PrometheusPort is where the ground's Prometheus listens, on localcluster.HostIP.
const PrometheusPort = 9090

// Prometheus is a real Prometheus server (Debian sid's, `make promtool`) the test process
// runs inside the cluster's namespace. It finds its targets through the API server
// (Kubernetes service discovery), as a Prometheus in the cluster does, scrapes the
// operator and every cluster's exporters, and evaluates Dolphin's shipped rules file.
type Prometheus struct {
	// URL is its HTTP API's base.
	URL string
	// API is a client of that API.
	API  promv1.API
	proc *localcluster.Process
}

// PrometheusOptions say what the ground's Prometheus reads.
type PrometheusOptions struct {
	// OperatorToken is a bearer token the operator's metrics endpoint lets through (a
	// ServiceAccount's, bound to dolphin-metrics-reader).
	OperatorToken string
	// RuleFiles are rules files to evaluate (config/prometheus/dolphin-alerts.yaml).
	RuleFiles []string
	// Interval is the scrape and evaluation interval (2 s when zero).
	Interval time.Duration
}

// StartPrometheus writes the configuration and starts Prometheus; Stop (or the cluster's
// end) ends it.
func (g *Ground) StartPrometheus(ctx context.Context, o PrometheusOptions) (*Prometheus, error) {
	bin := os.Getenv("DOLPHIN_PROMETHEUS")
	if bin == "" {
		return nil, fmt.Errorf("DOLPHIN_PROMETHEUS is not set (run the test through make, which runs `make promtool`)")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus: %w (run `make promtool`)", err)
	}
	dir := filepath.Join(g.Dir(), "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "operator-token")
	if err := os.WriteFile(tokenFile, []byte(o.OperatorToken), 0o600); err != nil {
		return nil, err
	}
	cfg, err := prometheusConfig(g.Kubeconfig, tokenFile, o)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", localcluster.HostIP, PrometheusPort)
	proc, err := g.Run("prometheus", bin, nil, "--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1d", "--log.level=warn")
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	p := &Prometheus{URL: "http://" + addr, proc: proc}
	c, err := promapi.NewClient(promapi.Config{Address: p.URL, Client: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		proc.Stop(time.Second)
		return nil, err
	}
	p.API = promv1.NewAPI(c)
	err = Poll(ctx, time.Minute, func() error {
		if err := proc.Exited(); err != nil {
			return fmt.Errorf("prometheus exited: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, p.URL+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		proc.Stop(time.Second)
		return nil, fmt.Errorf("%w\n%s", err, proc.LogTail())
	}
	return p, nil
}

// Stop ends the server.
func (p *Prometheus) Stop() {
	if p != nil && p.proc != nil {
		p.proc.Stop(5 * time.Second)
		p.proc = nil
	}
}

// Query runs an instant query now, bounded by 10 s.
func (p *Prometheus) Query(ctx context.Context, q string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, _, _, err := p.API.Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: a %s, not a vector", q, v.Type())
	}
	return vec, nil
}

// prometheusConfig scrapes two jobs, both found through the API server's Endpoints:
//   - dolphin-operator: the operator's metrics Service over HTTPS with the token, labels
//     kept as the operator sets them (honor_labels, as docs/metrics.md asks of a scrape);
//   - dolphin-mysql: every cluster's metrics Service, with the labels the cluster's
//     ServiceMonitor gives (resources.ExporterRelabelings) and the namespace, as the
//     Prometheus Operator adds it. This stands for the Prometheus Operator, which the
//     ground does not run (docs/design/test-ground.md).
func prometheusConfig(kubeconfig, tokenFile string, o PrometheusOptions) ([]byte, error) {
	interval := o.Interval
	if interval == 0 {
		interval = 2 * time.Second
	}
	sd := func(namespaces ...string) []any {
		c := map[string]any{"role": "endpoints", "kubeconfig_file": kubeconfig}
		if len(namespaces) > 0 {
			c["namespaces"] = map[string]any{"names": namespaces}
		}
		return []any{c}
	}
	keep := func(label, regex string) map[string]any {
		return map[string]any{"source_labels": []string{label}, "regex": regex, "action": "keep"}
	}
	replace := func(from, to string) map[string]any {
		return map[string]any{"source_labels": []string{from}, "target_label": to, "action": "replace"}
	}
	exporter := []any{
		keep(resources.ServiceLabelMeta(resources.LabelManagedBy), resources.ManagedBy),
		keep("__meta_kubernetes_endpoint_port_name", "metrics"),
		replace("__meta_kubernetes_namespace", "namespace"),
	}
	for _, r := range resources.ExporterRelabelings {
		exporter = append(exporter, replace(r.SourceLabel, r.TargetLabel))
	}
	cfg := map[string]any{
		"global": map[string]any{"scrape_interval": interval.String(), "evaluation_interval": interval.String(),
			"scrape_timeout": interval.String()},
		"rule_files": o.RuleFiles,
		"scrape_configs": []any{
			map[string]any{
				"job_name": "dolphin-operator", "scheme": "https", "honor_labels": true,
				"kubernetes_sd_configs": sd(OperatorNamespace),
				"tls_config":            map[string]any{"insecure_skip_verify": true}, // the operator's self-issued certificate
				"authorization":         map[string]any{"credentials_file": tokenFile},
				"relabel_configs": []any{
					keep("__meta_kubernetes_service_name", ".*-controller-manager-metrics-service"),
					keep("__meta_kubernetes_endpoint_port_name", "https"),
				},
			},
			map[string]any{
				"job_name": "dolphin-mysql", "kubernetes_sd_configs": sd(), "relabel_configs": exporter,
			},
		},
	}
	return yaml.Marshal(cfg)
}

// Federate returns the series matching the selectors as Prometheus stores them (target
// labels included) in the text exposition format, bounded by 10 s.
func (p *Prometheus) Federate(ctx context.Context, selectors ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q := url.Values{}
	for _, s := range selectors {
		q.Add("match[]", s)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/federate?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("federate: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("federate: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("federate: %s: %.512s", resp.Status, body)
	}
	return body, nil
}
