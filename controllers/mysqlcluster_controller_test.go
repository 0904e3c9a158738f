package controllers

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

// These narrow cases use the fake client: it has no webhooks, so an invalid spec can be
// stored, which is exactly the case the reconciler must refuse to build from. The
// behaviour against a real API server is in test/envtest.

// testScheme holds Kubernetes' kinds and Dolphin's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := mysqlv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func fakeReconciler(t *testing.T, objs ...client.Object) (*MySQLClusterReconciler, *events.FakeRecorder) {
	t.Helper()
	s := testScheme(t)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&mysqlv1beta1.MySQLCluster{}).Build()
	rec := events.NewFakeRecorder(10)
	return &MySQLClusterReconciler{Client: c, Scheme: s, Recorder: rec, Topology: NoTopology{}}, rec
}

func TestAnInvalidSpecIsATerminalErrorWithDegradedAndAnEvent(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Generation: 1},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(12))}}
	r, rec := fakeReconciler(t, c)
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	if err == nil || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("want a terminal error, got %v", err)
	}
	got := &mysqlv1beta1.MySQLCluster{}
	if err := r.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	d := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != mysqlv1beta1.ReasonInvalidSpec ||
		!strings.Contains(d.Message, "spec.instances") {
		t.Errorf("Degraded %+v", d)
	}
	if got.Status.Phase != mysqlv1beta1.PhaseFailed {
		t.Errorf("phase %s", got.Status.Phase)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning InvalidSpec") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Warning event")
	}
}

type failingTopology struct{ NoTopology }

func (failingTopology) Forget(context.Context, *mysqlv1beta1.MySQLCluster) error {
	return errors.New("mysqld unreachable")
}

func TestDeletionGoesOnWhenPreDeleteWorkFails(t *testing.T) {
	now := metav1.Now()
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns",
		Finalizers: []string{mysqlv1beta1.ClusterFinalizer}, DeletionTimestamp: &now},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(1)), DeletionPolicy: mysqlv1beta1.DeletionPolicyDelete}}
	r, rec := fakeReconciler(t, c)
	r.Topology = failingTopology{}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
		t.Fatalf("deletion must not fail: %v", err)
	}
	err := r.Get(context.Background(), client.ObjectKeyFromObject(c), &mysqlv1beta1.MySQLCluster{})
	if err == nil {
		t.Error("with its finalizer gone the cluster must be gone")
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "mysqld unreachable") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("the failed pre-delete work must be told in an event")
	}
}

// A new operator process (after an upgrade or a restart) reconciles before its topology
// manager has read any instance. Its status must keep what the last pass found instead of
// blanking currentPrimary and turning Ready False until that first pass.
func TestANewProcessKeepsTheLastKnownTopologyUntilItsFirstPass(t *testing.T) {
	c := testCluster()
	c.Finalizers = []string{mysqlv1beta1.ClusterFinalizer}
	c.Status = mysqlv1beta1.MySQLClusterStatus{CurrentPrimary: "db-1", Phase: mysqlv1beta1.PhaseReady,
		Conditions: []metav1.Condition{
			{Type: mysqlv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: mysqlv1beta1.ReasonAllInstancesReady,
				LastTransitionTime: metav1.Now()},
			{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: metav1.ConditionTrue,
				Reason: mysqlv1beta1.ReasonReplicationHealthy, Message: "2 replicas replicate from db-1",
				LastTransitionTime: metav1.Now()},
		}}
	r, _ := fakeReconciler(t, c)
	// The real manager, as a process has it before its loops have run a pass.
	r.Topology = &topology.Manager{}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
		t.Fatal(err)
	}
	got := &mysqlv1beta1.MySQLCluster{}
	if err := r.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.CurrentPrimary != "db-1" {
		t.Errorf("currentPrimary %q, want the last known db-1", got.Status.CurrentPrimary)
	}
	h := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
	if h == nil || h.Status != metav1.ConditionTrue || h.Message != "2 replicas replicate from db-1" {
		t.Errorf("ReplicationHealthy %+v, want the last pass's", h)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		t.Errorf("Degraded %+v", d)
	}
}

func TestLastKnown(t *testing.T) {
	healthy := metav1.Condition{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: metav1.ConditionTrue,
		Reason: mysqlv1beta1.ReasonReplicationHealthy, Message: "ok"}
	broken := metav1.Condition{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: metav1.ConditionFalse,
		Reason: mysqlv1beta1.ReasonReplicationBroken, Message: "db-2 stopped"}
	unknown := metav1.Condition{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: metav1.ConditionUnknown,
		Reason: mysqlv1beta1.ReasonTopologyNotManaged}
	notYet := (&topology.Manager{}).Observe(context.Background(), testCluster())
	observed := topology.Report{Managed: true, Healthy: true, CurrentPrimary: "db-0", Observed: time.Now()}
	st := func(primary string, cs ...metav1.Condition) mysqlv1beta1.MySQLClusterStatus {
		return mysqlv1beta1.MySQLClusterStatus{CurrentPrimary: primary, Conditions: cs}
	}
	for name, tc := range map[string]struct {
		old  mysqlv1beta1.MySQLClusterStatus
		r    topology.Report
		want topology.Report
	}{
		"a pass has run: its report":     {st("db-1", healthy), observed, observed},
		"not managed: as it is":          {st("db-1", healthy), topology.NotManaged(), topology.NotManaged()},
		"a new cluster: nothing to keep": {st(""), notYet, notYet},
		"last seen unmanaged":            {st("db-1", unknown), notYet, notYet},
		"last seen healthy": {st("db-1", healthy), notYet,
			topology.Report{Managed: true, Healthy: true, CurrentPrimary: "db-1", Reason: healthy.Reason, Message: "ok"}},
		"last seen broken": {st("db-1", broken), notYet,
			topology.Report{Managed: true, CurrentPrimary: "db-1", Reason: broken.Reason, Message: "db-2 stopped"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := lastKnown(tc.old, tc.r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
