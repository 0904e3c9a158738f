package workload

import (
	"context"
	"database/sql"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// ViaPodRunner connects to the pod the primary Service routes to through the pod runner's
// mysqld, for the tiers that still run on kwok (no Service proxy there).
func ViaPodRunner(k8s client.Client, r *localcluster.PodRunner, namespace, cluster string) Connect {
	return func(ctx context.Context) (*sql.DB, error) {
		p := PrimaryEndpoint(ctx, k8s, namespace, cluster)
		if p == "" {
			return nil, fmt.Errorf("the primary Service of %s/%s has no endpoint", namespace, cluster)
		}
		inst, err := r.Instance(ctx, namespace, p)
		if err != nil {
			return nil, err
		}
		return inst.DB()
	}
}
