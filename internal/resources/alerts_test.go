package resources

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The promtool tests of the rules file (make test-rules) give every alert a positive case
// (it fires) and a negative one (it does not).
func TestEveryAlertHasAPositiveAndANegativeCase(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", "dolphin-alerts_test.yaml"))
	require.NoError(t, err)
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range append(append([]Alert(nil), ClusterAlerts...), OperatorAlerts...) {
		require.True(t, fires[a.Name], "%s has a case where it fires", a.Name)
		require.True(t, quiet[a.Name], "%s has a case where it does not", a.Name)
	}
}
