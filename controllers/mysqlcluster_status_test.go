package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

func testCluster() *mysqlv1beta1.MySQLCluster {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Generation: 4}}
	c.Spec.Instances = new(int32(3))
	c.Default()
	return c
}

// sts is a StatefulSet status: replicas existing, ready, updated, and whether the
// revisions agree.
func sts(replicas, ready, updated int32, rolled bool) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3))},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: replicas, ReadyReplicas: ready,
			UpdatedReplicas: updated, CurrentRevision: "r1", UpdateRevision: "r1"}}
	if !rolled {
		s.Status.UpdateRevision = "r2"
	}
	return s
}

func cond(s mysqlv1beta1.MySQLClusterStatus, t string) (metav1.ConditionStatus, string) {
	c := meta.FindStatusCondition(s.Conditions, t)
	if c == nil {
		return "", ""
	}
	return c.Status, c.Reason
}

func TestComputeStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		oldPhase    mysqlv1beta1.ClusterPhase
		sts         *appsv1.StatefulSet
		topology    topology.Report
		changed     []string
		stepErr     error
		invalid     error
		paused      bool
		phase       mysqlv1beta1.ClusterPhase
		ready       metav1.ConditionStatus
		progressing string
		degraded    metav1.ConditionStatus
	}{
		"nothing exists yet": {sts: nil, phase: mysqlv1beta1.PhaseProvisioning, ready: metav1.ConditionFalse,
			progressing: mysqlv1beta1.ReasonScaling, degraded: metav1.ConditionFalse},
		"pods starting": {sts: sts(3, 1, 3, true), phase: mysqlv1beta1.PhaseProvisioning, ready: metav1.ConditionFalse,
			progressing: mysqlv1beta1.ReasonInstancesNotReady, degraded: metav1.ConditionFalse},
		"all ready, no topology manager": {sts: sts(3, 3, 3, true), phase: mysqlv1beta1.PhaseReady,
			ready: metav1.ConditionTrue, progressing: mysqlv1beta1.ReasonReconciled, degraded: metav1.ConditionFalse},
		"all ready but objects changed": {sts: sts(3, 3, 3, true), changed: []string{"applied ConfigMap db-config"},
			phase: mysqlv1beta1.PhaseReady, ready: metav1.ConditionTrue, progressing: mysqlv1beta1.ReasonReconciling,
			degraded: metav1.ConditionFalse},
		"a rolling update after being ready": {oldPhase: mysqlv1beta1.PhaseReady, sts: sts(3, 3, 1, false),
			phase: mysqlv1beta1.PhaseUpdating, ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonRollingUpdate,
			degraded: metav1.ConditionFalse},
		"scaling up": {oldPhase: mysqlv1beta1.PhaseReady, sts: sts(2, 2, 2, true), phase: mysqlv1beta1.PhaseUpdating,
			ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonScaling, degraded: metav1.ConditionFalse},
		"a failed step": {sts: sts(3, 3, 3, true), stepErr: errors.New("boom"), phase: mysqlv1beta1.PhaseDegraded,
			ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonReconciled, degraded: metav1.ConditionTrue},
		"an invalid spec": {sts: sts(3, 3, 3, true), invalid: errors.New("spec.instances: bad"), phase: mysqlv1beta1.PhaseFailed,
			ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonReconciled, degraded: metav1.ConditionTrue},
		"paused": {sts: sts(3, 3, 3, true), paused: true, phase: mysqlv1beta1.PhasePaused, ready: metav1.ConditionTrue,
			progressing: mysqlv1beta1.ReasonReconciled, degraded: metav1.ConditionFalse},
		"managed, healthy, with a primary": {sts: sts(3, 3, 3, true),
			topology: topology.Report{Managed: true, Healthy: true, CurrentPrimary: "db-0"}, phase: mysqlv1beta1.PhaseReady,
			ready: metav1.ConditionTrue, progressing: mysqlv1beta1.ReasonReconciled, degraded: metav1.ConditionFalse},
		"managed, pods ready but replication broken": {sts: sts(3, 3, 3, true),
			topology: topology.Report{Managed: true, Healthy: false, CurrentPrimary: "db-0", Reason: mysqlv1beta1.ReasonReplicationBroken},
			phase:    mysqlv1beta1.PhaseDegraded, ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonReconciled,
			degraded: metav1.ConditionTrue},
		"managed, no primary": {sts: sts(3, 3, 3, true), topology: topology.Report{Managed: true, Healthy: true},
			phase: mysqlv1beta1.PhaseProvisioning, ready: metav1.ConditionFalse, progressing: mysqlv1beta1.ReasonReconciled,
			degraded: metav1.ConditionFalse},
	} {
		t.Run(name, func(t *testing.T) {
			c := testCluster()
			c.Spec.Paused = tc.paused
			c.Status.Phase = tc.oldPhase
			st := &state{cluster: c, statefulSet: tc.sts, topology: tc.topology, changed: tc.changed, invalid: tc.invalid}
			s := computeStatus(c, st, tc.stepErr)
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if got, _ := cond(s, mysqlv1beta1.ConditionReady); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if _, reason := cond(s, mysqlv1beta1.ConditionProgressing); reason != tc.progressing {
				t.Errorf("Progressing reason %s, want %s", reason, tc.progressing)
			}
			if got, _ := cond(s, mysqlv1beta1.ConditionDegraded); got != tc.degraded {
				t.Errorf("Degraded %s, want %s", got, tc.degraded)
			}
			if s.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d", s.ObservedGeneration)
			}
			for _, cd := range s.Conditions {
				if cd.ObservedGeneration != 4 {
					t.Errorf("condition %s has observedGeneration %d", cd.Type, cd.ObservedGeneration)
				}
			}
		})
	}
}

func TestComputeStatusIsStableAcrossPasses(t *testing.T) {
	c := testCluster()
	st := &state{cluster: c, statefulSet: sts(3, 3, 3, true)}
	first := computeStatus(c, st, nil)
	c.Status = first
	second := computeStatus(c, st, nil)
	for k := range first.Conditions {
		if !first.Conditions[k].LastTransitionTime.Equal(&second.Conditions[k].LastTransitionTime) {
			t.Errorf("condition %s moved its transition time without a transition", first.Conditions[k].Type)
		}
	}
	if first.Version != "8.4" {
		t.Errorf("version once rolled out: %q", first.Version)
	}
}

func TestStatusVersionIsTheReleaseTheRolledOutImageNames(t *testing.T) {
	for name, tc := range map[string]struct {
		image  string
		rolled bool
		want   string
	}{
		"a series runs its image's release":           {"registry.local/mysql:9.7.3-oracle", true, "9.7.3"},
		"a digest names no release: the spec's":       {"registry.local/mysql@sha256:abc", true, "9.7"},
		"not rolled out: the version recorded before": {"registry.local/mysql:9.7.5", false, "9.7.2"},
	} {
		t.Run(name, func(t *testing.T) {
			c := testCluster()
			c.Spec.MySQL.Version, c.Status.Version = "9.7", "9.7.2"
			s := sts(3, 3, 3, tc.rolled)
			s.Spec.Template.Spec.Containers = []corev1.Container{
				{Name: resources.ContainerExporter, Image: "registry.local/exporter:0.19.0"},
				{Name: resources.ContainerMySQL, Image: tc.image}}
			if got := computeStatus(c, &state{cluster: c, statefulSet: s}, nil).Version; got != tc.want {
				t.Errorf("status.version %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStatusHistoryMergesTheManagersActionsOnce(t *testing.T) {
	at := func(sec int, nsec int, action, instance string) mysqlv1beta1.HistoryEntry {
		return mysqlv1beta1.HistoryEntry{Time: metav1.NewTime(time.Date(2026, 12, 6, 3, 0, sec, nsec, time.UTC)), Action: action, Instance: instance}
	}
	stored := []mysqlv1beta1.HistoryEntry{at(1, 0, "Bootstrap", "db-0"), at(5, 0, "Switchover", "db-1")}
	// The manager's list: the switchover again (to the nanosecond), then a fence; a restarted
	// manager knows only what it did since.
	latest := []mysqlv1beta1.HistoryEntry{at(5, 123456, "Switchover", "db-1"), at(9, 5, "Fence", "db-2")}
	got := mergeHistory(stored, latest)
	require.Equal(t, []mysqlv1beta1.HistoryEntry{at(1, 0, "Bootstrap", "db-0"), at(5, 0, "Switchover", "db-1"), at(9, 0, "Fence", "db-2")}, got)
	require.Equal(t, got, mergeHistory(got, nil), "a manager that did nothing yet keeps the stored history")

	var many []mysqlv1beta1.HistoryEntry
	for k := range mysqlv1beta1.HistoryLength + 3 {
		many = append(many, at(10+k, 0, "Clone", "db-2"))
	}
	got = mergeHistory(stored, many)
	require.Len(t, got, mysqlv1beta1.HistoryLength)
	require.Equal(t, many[3:], got, "the oldest go first")
}
