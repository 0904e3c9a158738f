package envtest_test

import (
	"testing"

	"github.com/dolphin-operator/dolphin/test/envtest"
)

func TestDiscoveryPathsAreToldFromResourcePaths(t *testing.T) {
	for path, want := range map[string]bool{
		"/api":                                    true,
		"/api/v1":                                 true,
		"/apis":                                   true,
		"/apis/monitoring.coreos.com":             true,
		"/apis/monitoring.coreos.com/v1":          true,
		"/openapi/v3":                             true,
		"/api/v1/namespaces":                      false,
		"/api/v1/namespaces/x/secrets/db-ca":      false,
		"/apis/apps/v1/statefulsets":              false,
		"/apis/apps/v1/namespaces/x/statefulsets": false,
		"/healthz":                                false,
	} {
		if got := envtest.IsDiscovery(path); got != want {
			t.Errorf("IsDiscovery(%q) = %v, want %v", path, got, want)
		}
	}
}
