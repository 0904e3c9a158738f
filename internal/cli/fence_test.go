package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// fencingOperator answers the fenced-instances annotation as the operator's status would:
// it lists what the annotation lists, and the cluster is Ready when nothing is fenced.
func fencingOperator(t *testing.T) *interceptor.Funcs {
	return &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		cl, ok := obj.(*mysqlv1beta1.MySQLCluster)
		if !ok || strings.Join(cl.Status.FencedInstances, ",") == strings.Join(cl.FencedInstances(), ",") {
			return nil
		}
		cl.Status.FencedInstances = cl.FencedInstances()
		ready := metav1.ConditionTrue
		if len(cl.Status.FencedInstances) > 0 {
			ready = metav1.ConditionFalse
		}
		cl.Status.Conditions[0] = metav1.Condition{Type: mysqlv1beta1.ConditionReady, Status: ready, Reason: "Test", Message: "as fenced"}
		require.NoError(t, c.Status().Update(ctx, cl))
		return c.Get(ctx, key, obj, opts...)
	}}
}

func (h *harness) cluster(t *testing.T) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c))
	return c
}

func TestFenceAndUnfenceWaitForTheOperator(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, fencingOperator(t), objs...)
	h.o.now = ticking()
	require.Equal(t, ExitOK, h.run("fence", "db", "db-2"), h.err.String())
	require.Equal(t, "db-2", h.cluster(t).Annotations[mysqlv1beta1.AnnotationFencedInstances])
	require.Contains(t, h.out.String(), "db-2 is fenced: read-only, replication stopped, out of both Services")
	require.Contains(t, h.out.String(), "kubectl dolphin mysql db --instance db-2 reaches it; kubectl dolphin unfence db db-2 returns it.")

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("fence", "db", "db-2"), "fencing twice is fencing once: %s", h.err.String())
	require.Equal(t, "db-2", h.cluster(t).Annotations[mysqlv1beta1.AnnotationFencedInstances])

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("unfence", "db", "db-2"), h.err.String())
	require.NotContains(t, h.cluster(t).Annotations, mysqlv1beta1.AnnotationFencedInstances)
	require.Contains(t, h.out.String(), "db-2 is back in service and ns/db is Ready")
}

func TestFenceRefusesToStopWritesWithoutForce(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, fencingOperator(t), objs...)
	h.o.now = ticking()
	require.Equal(t, ExitRefused, h.run("fence", "db", "db-0"))
	require.Contains(t, h.err.String(), "db-0 is the primary of db: fenced, it refuses every write until it is unfenced")

	require.Equal(t, ExitOK, h.run("fence", "db", "db-2"), h.err.String())
	h.err.Reset()
	require.Equal(t, ExitRefused, h.run("fence", "db", "db-1"))
	require.Contains(t, h.err.String(), "with db-1 fenced, 0 replica(s) of db would acknowledge commits and "+
		"spec.replication.semiSync.waitForReplicaCount is 1")
	require.Equal(t, "db-2", h.cluster(t).Annotations[mysqlv1beta1.AnnotationFencedInstances], "nothing changed")

	require.Equal(t, ExitOK, h.run("fence", "db", "db-1", "--force"), h.err.String())
	require.Equal(t, "db-2,db-1", h.cluster(t).Annotations[mysqlv1beta1.AnnotationFencedInstances])
}

func TestFenceErrors(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	h.o.now = ticking()
	require.Equal(t, ExitNotFound, h.run("fence", "db", "db-3"))
	require.Contains(t, h.err.String(), `"db-3" is not an instance of db (it has db-0 to db-2)`)
	require.Equal(t, ExitUsage, h.run("fence", "db"))
	require.Equal(t, ExitTimeout, h.run("fence", "db", "db-2", "--timeout", "50ms"), "no operator lists it")
	require.Contains(t, h.err.String(), "is the operator running?")
}

// failoverOperator answers a failover request once it has been read reads times: with the
// outcome's Event, withdrawing it.
func failoverOperator(t *testing.T, refuse bool) *interceptor.Funcs {
	n := 0
	return &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		cl, ok := obj.(*mysqlv1beta1.MySQLCluster)
		if !ok || cl.Annotations[mysqlv1beta1.AnnotationFailover] == "" {
			return nil
		}
		if n++; n < 3 {
			return nil
		}
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db.answer"},
			InvolvedObject: corev1.ObjectReference{Kind: "MySQLCluster", Namespace: "ns", Name: "db", UID: cl.UID},
			Action:         manualFailoverAction, Type: corev1.EventTypeNormal, Reason: mysqlv1beta1.ReasonFailover,
			EventTime: metav1.NewMicroTime(base.Add(time.Second)),
			Message:   "Manual failover from db-0: failover from db-0: primary db-0 lost: promoting db-1 (42 transactions)"}
		if refuse {
			e.Type, e.Reason = corev1.EventTypeWarning, mysqlv1beta1.ReasonFailoverRefused
			e.Message = "Manual failover from db-0 refused: primary db-0 answers: a failover replaces a primary that does not"
		}
		require.NoError(t, c.Create(ctx, e))
		delete(cl.Annotations, mysqlv1beta1.AnnotationFailover)
		require.NoError(t, c.Update(ctx, cl))
		return c.Get(ctx, key, obj, opts...)
	}}
}

func withLease(objs []client.Object, holder string) []client.Object {
	return append(objs, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-primary"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}})
}

func TestFailoverAsksTheOperatorAndPrintsItsAnswer(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, failoverOperator(t, false), withLease(objs, "db-0")...)
	h.o.now = ticking()
	require.Equal(t, ExitOK, h.run("failover", "db", "--force"), h.err.String())
	require.Contains(t, h.out.String(), "Failover of ns/db from primary db-0 asked for (annotation mysql.dolphin-operator.io/failover).")
	require.Contains(t, h.out.String(), "The operator reports: Manual failover from db-0: failover from db-0: primary db-0 lost: promoting db-1")

	objs, sql = degradedWorld()
	h = newHarness(t, sql, failoverOperator(t, true), withLease(objs, "db-0")...)
	h.o.now = ticking()
	require.Equal(t, ExitRefused, h.run("failover", "db", "--force"))
	require.Contains(t, h.err.String(), "the operator refused: Manual failover from db-0 refused: primary db-0 answers")
}

func TestFailoverErrors(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	h.o.now = ticking()
	require.Equal(t, ExitUsage, h.run("failover", "db"))
	require.Contains(t, h.err.String(), "pass --force to ask for it")
	require.Equal(t, ExitRefused, h.run("failover", "db", "--force"))
	require.Contains(t, h.err.String(), "db has no primary yet (no Lease db-primary)")

	objs, sql = degradedWorld()
	h = newHarness(t, sql, nil, withLease(objs, "db-0")...)
	h.o.now = ticking()
	require.Equal(t, ExitTimeout, h.run("failover", "db", "--force"))
	require.Contains(t, h.err.String(), "the operator has not answered in 30s (is it running?); the request stays: "+
		"kubectl annotate mysqlcluster db mysql.dolphin-operator.io/failover- withdraws it")
	require.Equal(t, "db-0", h.cluster(t).Annotations[mysqlv1beta1.AnnotationFailover])
}

func TestStatusShowsAFencedInstance(t *testing.T) {
	objs, sql := degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Status.FencedInstances = []string{"db-2"}
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitOK, h.run("status", "db"), h.err.String())
	require.Regexp(t, `(?m)^\s*db-2\s+fenced\s`, h.out.String())
	require.Regexp(t, `(?m)^\s*db-1\s+replica\s`, h.out.String())
	h.out.Reset()
	require.Equal(t, ExitOK, h.run("status", "db", "-o", "json"), h.err.String())
	require.Contains(t, h.out.String(), `"name": "db-2",
      "role": "none",
      "fenced": true,`)
}

// The operator's Event may be written a moment after it withdrew the request: the plugin
// waits for it, within eventWait.
func TestFailoverWaitsForTheOperatorsEvent(t *testing.T) {
	objs, sql := degradedWorld()
	lists := 0
	funcs := failoverOperator(t, false)
	get := funcs.Get
	var event *corev1.Event
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := get(ctx, c, key, obj, opts...); err != nil {
			return err
		}
		// Take the answer's Event out again: it comes with the third list.
		if e := (&corev1.Event{}); event == nil && c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db.answer"}, e) == nil {
			event = e
			require.NoError(t, c.Delete(ctx, e))
		}
		return nil
	}
	funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.EventList); ok {
			if lists++; lists == 3 {
				event.ResourceVersion = ""
				require.NoError(t, c.Create(ctx, event))
			}
		}
		return c.List(ctx, list, opts...)
	}
	h := newHarness(t, sql, funcs, withLease(objs, "db-0")...)
	h.o.now = ticking()
	require.Equal(t, ExitOK, h.run("failover", "db", "--force"), h.err.String())
	require.Equal(t, 3, lists)
	require.Contains(t, h.out.String(), "The operator reports: Manual failover from db-0")

	was := eventWait
	eventWait = 50 * time.Millisecond
	t.Cleanup(func() { eventWait = was })
	objs, sql = degradedWorld()
	funcs = failoverOperator(t, false)
	get2 := funcs.Get
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := get2(ctx, c, key, obj, opts...); err != nil {
			return err
		}
		_ = c.Delete(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db.answer"}})
		return nil
	}
	h = newHarness(t, sql, funcs, withLease(objs, "db-0")...)
	h.o.now = ticking()
	require.Equal(t, ExitFailed, h.run("failover", "db", "--force"))
	require.Contains(t, h.err.String(), "the operator withdrew the request, and no Event of its answer came within 50ms")
}

// rotatingOperator answers a rotation as the operator does: an ApplicationAccount Event,
// here one that recurs (a series whose first time is before the rotation), seen by the
// plugin's next read of Events.
func rotatingOperator(t *testing.T) *interceptor.Funcs {
	return &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		cl := &mysqlv1beta1.MySQLCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db"}, cl))
		if _, ok := list.(*corev1.EventList); ok && cl.Annotations[mysqlv1beta1.AnnotationRotateApplicationPassword] != "" {
			e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db.account"},
				InvolvedObject: corev1.ObjectReference{Kind: "MySQLCluster", Namespace: "ns", Name: "db", UID: cl.UID},
				Type:           corev1.EventTypeNormal, Reason: mysqlv1beta1.ReasonApplicationAccount, Action: "EnsureApplication",
				EventTime: metav1.NewMicroTime(base.Add(-time.Hour)),
				Series:    &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(base.Add(time.Second))},
				Message:   "Account shop has every privilege on database shop (created if missing) and the password of Secret db-app"}
			if err := c.Create(ctx, e); err != nil && !strings.Contains(err.Error(), "already exists") {
				return err
			}
		}
		return c.List(ctx, list, opts...)
	}}
}

func TestRotatePasswordAsksAndWaitsForTheOperator(t *testing.T) {
	objs, sql := degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop",
		PreviousPasswordRetention: &metav1.Duration{Duration: 10 * time.Minute}}
	h := newHarness(t, sql, rotatingOperator(t), objs...)
	require.Equal(t, ExitOK, h.run("rotate-password", "db"), h.err.String())
	require.Equal(t, base.Format(time.RFC3339Nano), h.cluster(t).Annotations[mysqlv1beta1.AnnotationRotateApplicationPassword])
	require.Contains(t, h.out.String(), "The operator reports: Account shop has every privilege on database shop")
	require.Contains(t, h.out.String(), "The new password is in Secret db-app (key password); the previous one (key previous-password) "+
		"logs in until about 2026-12-05T12:10:00Z.")

	objs, sql = degradedWorld()
	h = newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitRefused, h.run("rotate-password", "db"))
	require.Contains(t, h.err.String(), "db has no spec.application")

	objs, sql = degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Spec.Application = &mysqlv1beta1.ApplicationSpec{Database: "shop"}
	h = newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitTimeout, h.run("rotate-password", "db", "--timeout", "50ms"))
	require.Contains(t, h.err.String(), "the operator has not reported the new password set after 50ms (is it running?)")
}

func TestStatusShowsTheLastFiveActions(t *testing.T) {
	objs, sql := degradedWorld()
	c := objs[0].(*mysqlv1beta1.MySQLCluster)
	c.Status.History = nil
	for k := range 7 {
		c.Status.History = append(c.Status.History, mysqlv1beta1.HistoryEntry{Time: *at(time.Duration(k-7) * time.Minute),
			Action: "Fence", Instance: fmt.Sprintf("db-%d", k)})
	}
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitOK, h.run("status", "db"), h.err.String())
	out := h.out.String()
	require.NotContains(t, out, "Fence         db-1")
	require.Regexp(t, `(?m)^Fence\s+db-2\s+-\s+`, out)
	require.Regexp(t, `(?m)^Fence\s+db-6\s+-\s+`, out)
	require.Equal(t, 5, strings.Count(out, "\nFence "))
}

// rotatingOperatorPasswords answers a rotation of the operator's passwords as the operator
// does once it is done: a PasswordRotation Event naming the request.
func rotatingOperatorPasswords(t *testing.T) *interceptor.Funcs {
	return &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		cl := &mysqlv1beta1.MySQLCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db"}, cl))
		if ask := cl.Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords]; ask != "" {
			if _, ok := list.(*corev1.EventList); ok {
				for k, msg := range []string{"Rotation " + ask + ": every account accepts its new password; the pods restart onto it",
					"Rotation " + ask + " of the operator's passwords is done: the old passwords are discarded"} {
					e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("db.rotation%d", k)},
						InvolvedObject: corev1.ObjectReference{Kind: "MySQLCluster", Namespace: "ns", Name: "db", UID: cl.UID},
						Type:           corev1.EventTypeNormal, Reason: mysqlv1beta1.ReasonPasswordRotation, Action: "RotatePasswords",
						EventTime: metav1.NewMicroTime(base.Add(time.Duration(k+1) * time.Second)), Message: msg}
					if err := c.Create(ctx, e); err != nil && !strings.Contains(err.Error(), "already exists") {
						return err
					}
				}
			}
		}
		return c.List(ctx, list, opts...)
	}}
}

func TestRotatePasswordOfTheOperatorsAccountsWaitsForTheRotationsEnd(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, rotatingOperatorPasswords(t), objs...)
	require.Equal(t, ExitOK, h.run("rotate-password", "db", "--operator-accounts"), h.err.String())
	token := base.Format(time.RFC3339Nano)
	require.Equal(t, token, h.cluster(t).Annotations[mysqlv1beta1.AnnotationRotateOperatorPasswords])
	require.Empty(t, h.cluster(t).Annotations[mysqlv1beta1.AnnotationRotateApplicationPassword])
	require.Contains(t, h.out.String(), "The operator reports: Rotation "+token+" of the operator's passwords is done")

	objs, sql = degradedWorld()
	h = newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitTimeout, h.run("rotate-password", "db", "--operator-accounts", "--timeout", "50ms"))
	require.Contains(t, h.err.String(), "the operator has not reported the rotation done after 50ms")
}
