package ground

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProbeWebhooks checks that the API server sends a MySQLCluster to Dolphin's validating
// webhook, which refuses a setting the operator owns (no CRD rule can). The object is a
// dry run; nothing is stored.
func ProbeWebhooks(ctx context.Context, cfg *rest.Config) error {
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mysql.dolphin-operator.io/v1beta1", "kind": "MySQLCluster",
		"metadata": map[string]any{"name": "webhook-probe", "namespace": "default"},
		"spec": map[string]any{"instances": int64(1),
			"mysql": map[string]any{"config": map[string]any{"server_id": "1"}}},
	}}
	err = cl.Create(ctx, u, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "set by the operator") {
		return fmt.Errorf("the validating webhook did not refuse the probe object (got: %w)", err)
	}
	return nil
}
