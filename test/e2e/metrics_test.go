package e2e_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// scraper reads the operator's metrics endpoint as Prometheus would: over HTTPS, with a
// ServiceAccount token that the metrics-reader ClusterRole lets through the endpoint's
// authentication and authorization (the endpoint's certificate is the one the operator
// issues itself at start, so it is not verified).
type scraper struct {
	token string
	http  *http.Client
}

func newScraper(t *testing.T) *scraper {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	require.NoError(t, k8s.Create(ctx, sa))
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "dolphin-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}}}
	require.NoError(t, k8s.Create(ctx, binding))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &scraper{token: tr.Status.Token, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} //nolint:gosec // see scraper
}

// scrape returns the metric families the operator's pod serves now.
func (s *scraper) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ground.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	var ip string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("no running operator pod among %d", len(pods.Items))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, "8443")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// value is the value of the series of family name whose labels include want, and
// whether there is one.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// requireClusterMetrics waits until the operator's scrape says what a Ready cluster of
// three instances with name-0 primary is, and checks the whole scrape passes the linter
// `promtool check metrics` runs.
func requireClusterMetrics(t *testing.T, s *scraper, ns, name string) {
	t.Helper()
	var families map[string]*dto.MetricFamily
	took := waitFor(t, time.Minute, "the operator's metrics to show "+ns+"/"+name+" Ready", func() error {
		var err error
		if families, err = s.scrape(context.Background()); err != nil {
			return err
		}
		cluster := map[string]string{"namespace": ns, "cluster": name}
		want := []struct {
			name   string
			labels map[string]string
			value  float64
		}{
			{"dolphin_cluster_phase", map[string]string{"phase": "Ready"}, 1},
			{"dolphin_cluster_phase", map[string]string{"phase": "Degraded"}, 0},
			{"dolphin_cluster_ready_instances", nil, 3},
			{"dolphin_instance_primary", map[string]string{"instance": name + "-0"}, 1},
			{"dolphin_instance_primary", map[string]string{"instance": name + "-1"}, 0},
			{"dolphin_instance_replication_io_running", map[string]string{"instance": name + "-1"}, 1},
			{"dolphin_instance_replication_sql_running", map[string]string{"instance": name + "-2"}, 1},
			{"dolphin_instance_replication_lag_transactions", map[string]string{"instance": name + "-2"}, 0},
			{"dolphin_instance_semisync_on", map[string]string{"instance": name + "-0"}, 1},
			{"dolphin_cluster_failover_blocked", nil, 0},
			// Both replicas acknowledge; a commit waits for one.
			{"dolphin_cluster_semisync_replicas", nil, 2},
			{"dolphin_cluster_semisync_wait_for_replicas", nil, 1},
		}
		for _, w := range want {
			labels := map[string]string{}
			for k, v := range cluster {
				labels[k] = v
			}
			for k, v := range w.labels {
				labels[k] = v
			}
			if got, ok := value(families, w.name, labels); !ok || got != w.value {
				return fmt.Errorf("%s%v = %v (series: %v), want %v", w.name, labels, got, ok, w.value)
			}
		}
		return nil
	})
	t.Logf("operator metrics show %s/%s Ready %s after it was", ns, name, took.Round(10*time.Millisecond))
	var all []*dto.MetricFamily
	for _, f := range families {
		all = append(all, f)
	}
	problems, err := promlint.NewWithMetricFamilies(all).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "the scrape passes promtool's checks")
}

// requireNoClusterSeries waits until no series of the operator's scrape is of the cluster.
func requireNoClusterSeries(t *testing.T, s *scraper, ns, name string) {
	t.Helper()
	waitFor(t, time.Minute, "the deleted cluster's series to go", func() error {
		families, err := s.scrape(context.Background())
		if err != nil {
			return err
		}
		var left []string
		for fname, f := range families {
			for _, m := range f.GetMetric() {
				if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "namespace" && l.GetValue() == ns }) &&
					slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "cluster" && l.GetValue() == name }) {
					left = append(left, fname)
				}
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("series left: %s", strings.Join(slices.Compact(slices.Sorted(slices.Values(left))), ", "))
		}
		return nil
	})
}
