package olm_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/olm"
	"github.com/dolphin-operator/dolphin/test/release"
	"github.com/dolphin-operator/dolphin/test/workload"
)

const catalogSource = "dolphin"

// A platform team's path: subscribe to stable at the previous release (its own operator
// image, built from its commit), run a cluster created through v1alpha1, then the next
// release is published to stable and OLM upgrades the operator, which takes the cluster
// over: replication managed, a primary, writes through its Service; a restart of the new
// operator under its own CSV's RBAC alone then changes nothing and loses no write.
//
// 0.1.0 did not manage replication: its instances are read-only, hold no data and lack the
// accounts 0.2.0's initialisation creates, so 0.2.0 replaces its pod template (it cannot keep
// it as it keeps an earlier 0.2.0 build's) and restarts each pod once (the operator's roll),
// and the new init container adds the accounts. Pods kept and mysqld's uptime are checked across the new operator's restart.
func TestInstallFromStableThenUpgradeWhenTheNextReleaseIsPublished(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	previous, next := versions(t)
	g, imgs := startGround(t, ground.DefaultNodes)
	m := installOLM(t, g.Cluster, imgs)
	k8s := m.Client()
	tl := m.Watch(olm.OperatorsNamespace, os.Stderr)
	t.Cleanup(tl.Stop)

	// The catalog as released: config/catalog/template.yaml, what catalog/ holds.
	publish(t, m, imgs, "v"+version(previous), readTemplate(t))
	subscribed := tl.Mark("Subscription to stable at " + previous)
	_, err := m.Subscribe(ctx, olm.Subscription{Source: catalogSource, Channel: "stable", StartingCSV: previous, Env: operatorEnv(g)})
	require.NoError(t, err)
	waitInstalled(t, m, previous)
	requireUnpackedByJob(t, k8s, previous)
	waitConversionByOLM(t, k8s)
	installed := succeededAt(t, tl, "CSV "+previous)
	t.Logf("INSTALL %s: Succeeded %.1fs after the Subscription", previous, (installed - subscribed).Seconds())

	// The operator of the installed version, its own image, as OLM's pod under its CSV's RBAC.
	pod1, log1 := waitOperator(t, g, k8s, "")
	require.Equal(t, release.OperatorRepo+":v"+version(previous), pod1.Spec.Containers[0].Image)
	ns, name := "shop", "orders"
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}))
	createThroughV1alpha1(t, k8s, ns, name, g.MySQLSeries())
	waitReadyUnmanaged(t, k8s, ns, name)

	// The next release is published: promoted from candidate to fast and stable.
	nextCatalog := readTemplate(t)
	require.NoError(t, nextCatalog.Promote(next, "candidate", "fast", "stable"))
	published := tl.Mark("next catalog published (" + next + " in stable)")
	publish(t, m, imgs, "v"+version(next), nextCatalog)
	// OLM rolls the operator's Deployment: the kubelet stops the old pod and starts the new.
	pod2, log2 := waitOperator(t, g, k8s, string(pod1.UID))
	require.Equal(t, release.OperatorRepo+":v"+version(next), pod2.Spec.Containers[0].Image)
	tl.Mark("operator of " + next + " running as " + pod2.Name)
	select {
	case <-log1.Ended():
	case <-time.After(3 * time.Minute):
		t.Fatalf("the operator pod %s of %s did not stop in 3 minutes", pod1.Name, previous)
	}
	tl.Mark("operator of " + previous + " stopped with its pod")
	requireNoForbidden(t, log1)
	waitInstalled(t, m, next)
	requireUnpackedByJob(t, k8s, next)
	waitConversionByOLM(t, k8s)
	requireOperatorNetworkPolicy(t, k8s, pod2)
	upgraded := succeededAt(t, tl, "CSV "+next)
	t.Logf("UPGRADE %s -> %s: Succeeded %.1fs after the catalog was published", previous, next, (upgraded - published).Seconds())
	requireGone(t, m, previous)
	waitReady(t, k8s, ns, name)
	ready := tl.Mark(ns + "/" + name + " Ready with a primary under " + next)
	t.Logf("TAKE-OVER: %s/%s Ready with its primary under %s %.1fs after the catalog was published", ns, name, next,
		(ready - published).Seconds())

	before := snapshot(t, k8s, ns, name)
	writer, err := workload.StartWriter(ctx, func(ctx context.Context) (*sql.DB, error) {
		return g.HostDB(ctx, ns, name, ground.ServiceHost(ns, name+"-primary"))
	})
	require.NoError(t, err)
	time.Sleep(2 * time.Second) // writes before the restart
	// A restart (the pod deleted, the Deployment makes another): while both CSVs existed
	// their RBAC overlapped on the shared ServiceAccount (watches opened then keep running);
	// from here the operator has only what the next CSV grants, which is what the
	// forbidden-call check must judge.
	requireNoForbidden(t, log2)
	// OLM may roll the Deployment again once the old CSV is gone (its webhook certificate);
	// the restart is of whichever pod runs once the rollout is done.
	pod, log := settledOperator(t, g, k8s)
	requireNoForbidden(t, log)
	restarted := time.Now()
	require.NoError(t, k8s.Delete(ctx, pod))
	_, log3 := waitOperator(t, g, k8s, string(pod.UID))
	tl.Mark("operator of " + next + " restarted under its own CSV's RBAC only")
	waitReady(t, k8s, ns, name)
	time.Sleep(2 * time.Second) // a few more writes under the restarted operator
	acks := writer.Stop()
	requireUnchanged(t, g, k8s, before, time.Since(restarted))
	requireNoLostWrites(t, g, ns, before.primary, acks)
	t.Logf("writer: %d writes acknowledged across the restart; longest gap %s",
		len(acks), writer.LongestGap(restarted, time.Now()).Round(time.Millisecond))

	requireBothVersions(t, k8s, ns, name)
	requireStoredAsHub(t, k8s, ns, name)
	// Checked before the uninstall: once the CSV is deleted OLM removes its RBAC while the
	// operator still runs, and refusals then are expected.
	requireNoForbidden(t, log3)
	uninstall(t, m, ns, name, next)
}

// uninstall removes Dolphin as docs/olm.md says: clusters first, while the operator runs
// (their finalizer is its to remove), then the Subscription and the CSV. OLM removes the
// operator's Deployment, whose pod's process stops with it, and leaves the CRDs.
func uninstall(t *testing.T, m *olm.OLM, ns, name, csv string) {
	t.Helper()
	ctx := context.Background()
	k8s := m.Client()
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.NoError(t, k8s.Delete(ctx, c))
	ground.WaitFor(t, 2*time.Minute, "the cluster to be deleted", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w), finalizers %v", err, c.Finalizers)
		}
		return nil
	})
	took := removeInstall(t, m, csv)
	t.Logf("UNINSTALL: cluster deleted, then the CSV and the operator's Deployment gone %s after their deletion", took.Round(10*time.Millisecond))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "mysqlclusters.mysql.dolphin-operator.io"}, crd), "OLM leaves the CRDs")
}

// requireGone waits for the CSV an upgrade replaced to be deleted.
func requireGone(t *testing.T, m *olm.OLM, csv string) {
	t.Helper()
	ground.WaitFor(t, time.Minute, "the replaced CSV "+csv+" to go away", func() error {
		err := m.Client().Get(context.Background(), client.ObjectKey{Namespace: olm.OperatorsNamespace, Name: csv},
			&operatorsv1alpha1.ClusterServiceVersion{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}

// requirePlanComplete waits for the InstallPlan of csv to complete: OLM marks it Complete
// once every step is applied, which can be after the CSV has already succeeded.
func requirePlanComplete(t *testing.T, m *olm.OLM, csv string) {
	t.Helper()
	plan, err := m.WaitForPlan(context.Background(), csv, operatorsv1alpha1.InstallPlanPhaseComplete, time.Minute)
	require.NoError(t, err)
	t.Logf("InstallPlan %s: %s, %d steps (%s)", plan.Name, plan.Status.Phase, len(plan.Status.Plan), planKinds(plan))
}

func planKinds(plan *operatorsv1alpha1.InstallPlan) string {
	count := map[string]int{}
	for _, s := range plan.Status.Plan {
		count[s.Resource.Kind]++
	}
	var parts []string
	for k, n := range count {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// createThroughV1alpha1 creates a 3-instance cluster through v1alpha1, as a user with older
// manifests would. For a moment after the CSV succeeds OLM may still be putting the CRDs'
// conversion webhook back on its own Service (the catalog operator re-applies the bundle's
// CRDs; docs/olm.md); a create refused for that is retried, anything else fails.
func createThroughV1alpha1(t *testing.T, k8s client.Client, ns, name, version string) {
	t.Helper()
	three := int32(3)
	refused := 0
	ground.WaitFor(t, 30*time.Second, "the v1alpha1 create", func() error {
		err := k8s.Create(context.Background(), &mysqlv1alpha1.MySQLCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       mysqlv1alpha1.MySQLClusterSpec{Replicas: &three, Version: version, StorageSize: new(resource.MustParse("1Gi"))},
		})
		if err != nil && strings.Contains(err.Error(), "conversion webhook for") {
			refused++
			return err
		}
		require.NoError(t, err)
		return nil
	})
	t.Logf("created %s/%s through v1alpha1 (%d attempts refused while OLM rewired the conversion webhook)", ns, name, refused)
}

func waitReady(t *testing.T, k8s client.Client, ns, name string) {
	t.Helper()
	c := waitCluster(t, k8s, ns, name, "Ready with its primary", func(c *mysqlv1beta1.MySQLCluster) bool {
		return c.Status.CurrentPrimary != "" &&
			meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) &&
			meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
	})
	t.Logf("%s/%s primary %s", ns, name, c.Status.CurrentPrimary)
}

// waitReadyUnmanaged waits for a cluster of a release that does not manage replication
// (0.1.0) to be Ready as that release defines it: every pod ready, replication reported as
// not managed.
func waitReadyUnmanaged(t *testing.T, k8s client.Client, ns, name string) {
	t.Helper()
	waitCluster(t, k8s, ns, name, "Ready (replication not managed)", func(c *mysqlv1beta1.MySQLCluster) bool {
		h := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
		return meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReady) &&
			h != nil && h.Reason == mysqlv1beta1.ReasonTopologyNotManaged
	})
}

// waitCluster waits up to 3 minutes for the cluster's status to be of its generation and
// to meet ok, and returns the cluster.
func waitCluster(t *testing.T, k8s client.Client, ns, name, what string, ok func(*mysqlv1beta1.MySQLCluster) bool) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	took := ground.WaitFor(t, 3*time.Minute, ns+"/"+name+" to be "+what, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if c.Status.ObservedGeneration != c.Generation || !ok(c) {
			return fmt.Errorf("phase %s, primary %q, conditions %v", c.Status.Phase, c.Status.CurrentPrimary, c.Status.Conditions)
		}
		return nil
	})
	t.Logf("%s/%s %s after %s", ns, name, what, took.Round(10*time.Millisecond))
	return c
}

// state is what an upgrade of the operator must leave alone.
type state struct {
	ns, name string
	primary  string
	pods     map[string]string // name -> UID
	revision string
}

func snapshot(t *testing.T, k8s client.Client, ns, name string) state {
	t.Helper()
	ctx := context.Background()
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c))
	sts := &appsv1.StatefulSet{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts))
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(sts.Spec.Selector.MatchLabels)))
	s := state{ns: ns, name: name, primary: c.Status.CurrentPrimary, pods: map[string]string{}, revision: sts.Status.UpdateRevision}
	for _, p := range pods.Items {
		s.pods[p.Name] = string(p.UID)
	}
	require.Len(t, s.pods, 3)
	return s
}

// requireUnchanged checks the upgrade restarted nothing: the same pods (UIDs), the same
// StatefulSet revision, the same primary, and every mysqld up for longer than the upgrade.
func requireUnchanged(t *testing.T, g *ground.Ground, k8s client.Client, before state, upgrade time.Duration) {
	t.Helper()
	ctx := context.Background()
	after := snapshot(t, k8s, before.ns, before.name)
	// Should a pod or the primary have changed, the cluster's Events say what the operator did.
	why := clusterEvents(t, k8s, before.ns, before.name)
	require.Equal(t, before.pods, after.pods, "the upgrade recreated no pod; events:\n%s", why)
	require.Equal(t, before.revision, after.revision, "the upgrade changed no pod template")
	require.Equal(t, before.primary, after.primary, "the upgrade moved no primary; events:\n%s", why)
	for pod := range before.pods {
		d := rootDB(t, g, before.ns, before.name, pod)
		var variable string
		var uptime int
		require.NoError(t, d.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Uptime'").Scan(&variable, &uptime))
		require.Greater(t, time.Duration(uptime)*time.Second, upgrade, "mysqld of %s ran through the upgrade", pod)
	}
}

// clusterEvents lists the Events about the cluster and its pods, oldest first.
func clusterEvents(t *testing.T, k8s client.Client, ns, name string) string {
	t.Helper()
	events := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		return "(events not read: " + err.Error() + ")"
	}
	slices.SortFunc(events.Items, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var out strings.Builder
	for _, e := range events.Items {
		if strings.HasPrefix(e.Regarding.Name, name) {
			fmt.Fprintf(&out, "%s %s/%s %s %s: %s\n", e.CreationTimestamp.UTC().Format(time.RFC3339), e.Regarding.Kind,
				e.Regarding.Name, e.Type, e.Reason, e.Note)
		}
	}
	return out.String()
}

// rootDB is a root connection to a pod's mysqld, closed when the test ends.
func rootDB(t *testing.T, g *ground.Ground, ns, cluster, pod string) *sql.DB {
	t.Helper()
	d, err := g.DB(context.Background(), ns, cluster, pod)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func requireNoLostWrites(t *testing.T, g *ground.Ground, ns, primary string, acks []workload.Ack) {
	t.Helper()
	require.NotEmpty(t, acks, "the writer wrote")
	lost, err := workload.Lost(context.Background(), rootDB(t, g, ns, primary[:strings.LastIndex(primary, "-")], primary), acks)
	require.NoError(t, err)
	require.Empty(t, lost, "every acknowledged write survives the upgrade")
}

// requireBothVersions reads the cluster through v1alpha1 and v1beta1: the new operator's
// conversion webhook answers, and both say the same. It allows for a certificate OLM
// rotates after the upgrade to reach the operator (the kubelet's volume sync, then
// controller-runtime's certificate watcher).
func requireBothVersions(t *testing.T, k8s client.Client, ns, name string) {
	t.Helper()
	ctx := context.Background()
	took := ground.WaitFor(t, 30*time.Second, "the cluster to read the same through v1alpha1 and v1beta1", func() error {
		old := &mysqlv1alpha1.MySQLCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, old); err != nil {
			return err
		}
		hub := &mysqlv1beta1.MySQLCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hub); err != nil {
			return err
		}
		if *old.Spec.Replicas != *hub.Spec.Instances || old.Status.Primary != hub.Status.CurrentPrimary || old.Status.Primary == "" {
			return fmt.Errorf("v1alpha1 replicas %d primary %q, v1beta1 instances %d primary %q",
				*old.Spec.Replicas, old.Status.Primary, *hub.Spec.Instances, hub.Status.CurrentPrimary)
		}
		return nil
	})
	t.Logf("read through both versions (after %s)", took.Round(10*time.Millisecond))
}

// requireStoredAsHub checks the CRD records v1beta1 as its only stored version and that
// etcd holds the cluster, created through v1alpha1, as v1beta1.
func requireStoredAsHub(t *testing.T, k8s client.Client, ns, name string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "mysqlclusters.mysql.dolphin-operator.io"}, crd))
	require.Equal(t, []string{"v1beta1"}, crd.Status.StoredVersions)
	// The local cluster's etcd listens on 127.0.0.1:2379 inside the namespace.
	require.Equal(t, "mysql.dolphin-operator.io/v1beta1", storedAPIVersion(t, "http://127.0.0.1:2379",
		"/registry/mysql.dolphin-operator.io/mysqlclusters/"+ns+"/"+name), "etcd holds the hub version")
}

// storedAPIVersion is the apiVersion etcd holds under key (read through its JSON gateway).
func storedAPIVersion(t *testing.T, etcdURL, key string) string {
	t.Helper()
	v, err := ground.StoredAPIVersion(etcdURL, key)
	require.NoError(t, err)
	return v
}

// requireOperatorNetworkPolicy checks that OLM installed the bundle's NetworkPolicy beside
// the operator, selecting its pod, with ingress to the webhook, metrics and health ports.
func requireOperatorNetworkPolicy(t *testing.T, k8s client.Client, pod *corev1.Pod) {
	t.Helper()
	p := &networkingv1.NetworkPolicy{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: "dolphin-controller-manager"}, p),
		"OLM installs the bundle's NetworkPolicy")
	selector, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	require.NoError(t, err)
	require.True(t, selector.Matches(labels.Set(pod.Labels)), "the policy selects the operator's pod %s", pod.Name)
	var ports []int
	for _, rule := range p.Spec.Ingress {
		for _, port := range rule.Ports {
			ports = append(ports, port.Port.IntValue())
		}
	}
	require.ElementsMatch(t, []int{9443, 8443, 8081}, ports)
}
