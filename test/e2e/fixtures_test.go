package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/promfixture"
)

// captureOperatorFixture writes, when `make alert-fixtures` runs the test, what the
// operator serves now about the test's namespace and itself (its dolphin_ and
// controller_runtime_ series) to the fixture file name.prom; otherwise it does nothing. A
// nil s is a scraper of the test's namespace, made only when capturing.
func captureOperatorFixture(t *testing.T, s *scraper, name, ns string) {
	t.Helper()
	dir, err := promfixture.CaptureDir()
	if errors.Is(err, promfixture.ErrNoFixtures) {
		return
	}
	if s == nil {
		s = newScraper(t)
	}
	families, err := s.scrape(context.Background())
	require.NoError(t, err)
	keep := func(family string, labels map[string]string) bool {
		if !strings.HasPrefix(family, "dolphin_") && !strings.HasPrefix(family, "controller_runtime_") {
			return false
		}
		n, ok := labels["namespace"]
		return !ok || n == ns
	}
	header := fmt.Sprintf("Captured by `make alert-fixtures` in %s: the operator's own series and those of\n"+
		"namespace %s, as its metrics endpoint serves them. Do not edit.", t.Name(), ns)
	require.NoError(t, promfixture.Write(filepath.Join(dir, name+".prom"), header, families, keep))
	t.Logf("fixture %s.prom captured", name)
}

// captureExporterFixture writes, when `make alert-fixtures` runs the test, the exporter
// series of the named instances as Prometheus stores them (with the labels the cluster's
// ServiceMonitor gives) to the fixture file name.prom; otherwise it does nothing.
func captureExporterFixture(t *testing.T, p *ground.Prometheus, name, ns, cluster string, instances ...string) {
	t.Helper()
	dir, err := promfixture.CaptureDir()
	if errors.Is(err, promfixture.ErrNoFixtures) {
		return
	}
	raw, err := p.Federate(context.Background(), fmt.Sprintf(`{__name__=~"mysql_.+",namespace=%q,cluster=%q,instance=~%q}`,
		ns, cluster, strings.Join(instances, "|")))
	require.NoError(t, err)
	families, err := promfixture.Parse(raw)
	require.NoError(t, err)
	header := fmt.Sprintf("Captured by `make alert-fixtures` in %s: mysqld_exporter's series of\n"+
		"%s (MySQL from the ground's image) as Prometheus stores them. Do not edit.", t.Name(), strings.Join(instances, ", "))
	require.NoError(t, promfixture.Write(filepath.Join(dir, name+".prom"), header, families,
		func(string, map[string]string) bool { return true }))
	t.Logf("fixture %s.prom captured", name)
}
