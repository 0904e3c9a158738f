package envtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// BenchmarkSettledClusterPass measures reconcile passes of a cluster whose children are
// all in place and unchanged (no pod runs here, so it stays Provisioning; the operator has
// nothing to write): the API requests, the discovery ones among them, and the time of a
// pass. The API server serves no monitoring.coreos.com group, so every pass asks whether
// ServiceMonitor and PrometheusRule are served. The baseline, measured in the same run, is
// what asking the manager's REST mapper directly costs, which is what each pass would
// send if the reconciler did not remember that the kinds are missing. make bench-reconcile
// runs it; make test does not.
func BenchmarkSettledClusterPass(b *testing.B) {
	env, rec, counting := controllerEnv(b)
	ctx := context.Background()
	ns := namespace(b, env.Client)
	require.NoError(b, env.Client.Create(ctx, v1beta1Cluster(ns, "db")))
	eventually(b, "a status for the current generation", func() error {
		got, err := get(ctx, env.Client, ns, "db", &mysqlv1beta1.MySQLCluster{})
		if err == nil && got.Status.ObservedGeneration != got.Generation {
			err = fmt.Errorf("status of generation %d, object at %d", got.Status.ObservedGeneration, got.Generation)
		}
		return err
	})
	settle(b, counting)

	env.Requests.Reset()
	for _, gvk := range []schema.GroupVersionKind{resources.ServiceMonitorGVK, resources.PrometheusRuleGVK} {
		_, err := env.Manager.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		require.True(b, meta.IsNoMatchError(err), "the API server serves %s: %v", gvk, err)
	}
	_, uncached := env.Requests.Counts()

	env.Requests.Reset()
	counting.Reset()
	passes := 0
	for b.Loop() {
		_, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "db"}})
		require.NoError(b, err)
		passes++
	}
	all, discovery := env.Requests.Counts()
	require.Empty(b, counting.Writes(), "a settled cluster's passes wrote")
	perPass := float64(len(discovery)) / float64(passes)
	b.ReportMetric(perPass, "discovery-req/pass")
	b.ReportMetric(float64(all)/float64(passes), "api-req/pass")
	b.ReportMetric(float64(len(uncached)), "baseline-discovery-req/pass")
	b.Logf("%d settled passes: %d API requests, %d discovery (%.3f a pass); baseline, the two lookups uncached: %d discovery requests a pass (%v)",
		passes, all, len(discovery), perPass, len(uncached), uncached)
}
