package e2e_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/ground/suite"
)

var (
	g   *ground.Ground
	k8s client.Client
)

// TestMain starts the ground (three real nodes) with the operator installed by `make deploy`
// and, once every test passed, scans the operator's whole log for the run's secrets.
func TestMain(m *testing.M) { suite.Main(m, &g, &k8s, requireNoSecretLogged) }
