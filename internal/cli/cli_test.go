package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// base is the tests' now.
var base = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

const uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(base.Add(d)); return &t }

func testCluster(ns, name string) *mysqlv1beta1.MySQLCluster {
	return &mysqlv1beta1.MySQLCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 3,
			CreationTimestamp: *at(-72 * time.Hour)},
		Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3))},
		Status: mysqlv1beta1.MySQLClusterStatus{ObservedGeneration: 3, Phase: mysqlv1beta1.PhaseDegraded,
			Instances: 3, ReadyInstances: 2, CurrentPrimary: name + "-0", Version: "9.7.4",
			Endpoints: mysqlv1beta1.ClusterEndpoints{Primary: name + "-primary." + ns + ".svc:3306",
				Replicas: name + "-replicas." + ns + ".svc:3306"},
			Backup: mysqlv1beta1.BackupStatus{LastSuccessful: at(-2 * time.Hour), NextScheduled: at(22 * time.Hour)},
			History: []mysqlv1beta1.HistoryEntry{
				{Time: *at(-72 * time.Hour), Action: "Bootstrap", Instance: name + "-0", Reason: mysqlv1beta1.ReasonBootstrap},
				{Time: *at(-5 * time.Minute), Action: "Clone", Instance: name + "-2", From: name + "-0", Reason: mysqlv1beta1.ReasonCloning}},
			Conditions: []metav1.Condition{
				{Type: mysqlv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: mysqlv1beta1.ReasonInstancesNotReady,
					Message: "2 of 3 instances ready", LastTransitionTime: *at(-5 * time.Minute)},
				{Type: mysqlv1beta1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: mysqlv1beta1.ReasonInstanceUnreachable,
					Message: name + "-2 is unreachable", LastTransitionTime: *at(-5 * time.Minute)},
				{Type: mysqlv1beta1.ConditionReplicationHealthy, Status: metav1.ConditionTrue, Reason: mysqlv1beta1.ReasonReplicationHealthy,
					Message: "every replica replicates", LastTransitionTime: *at(-71 * time.Hour)},
			}},
	}
}

func testPod(c *mysqlv1beta1.MySQLCluster, i int, role resources.Role, ready bool) *corev1.Pod {
	labels := resources.SelectorLabels(c)
	labels[resources.LabelRole] = string(role)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name + "-" + string(rune('0'+i)), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-" + string(rune('a'+i))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: resources.ContainerMySQL, RestartCount: int32(i)}}},
	}
}

// fakeSQL answers instanceQuery per pod, as the mysql client's batch output would.
type fakeSQL map[string]struct {
	out string
	err error
}

func (f fakeSQL) Query(_ context.Context, pod *corev1.Pod, statements string) (string, error) {
	if statements != instanceQuery {
		return "", errors.New("unexpected statements")
	}
	a, ok := f[pod.Name]
	if !ok {
		return "", errors.New("no such pod")
	}
	return a.out, a.err
}

func primaryOut(executed string, clients int) string {
	return "gtid_executed\t" + executed + "\nread_only\t0\t0\nRpl_semi_sync_source_clients\t" + string(rune('0'+clients)) +
		"\nRpl_semi_sync_source_status\tON\nRpl_semi_sync_replica_status\tOFF\n"
}

func replicaOut(executed, source string) string {
	return "gtid_executed\t" + executed + "\nread_only\t1\t1\nio\tON\t\nsource\t" + source + "\nsql\tON\n" +
		"Rpl_semi_sync_source_clients\t0\nRpl_semi_sync_source_status\tOFF\nRpl_semi_sync_replica_status\tON\n"
}

func degradedWorld() ([]client.Object, fakeSQL) {
	c := testCluster("ns", "db")
	objs := []client.Object{c, testPod(c, 0, resources.RolePrimary, true), testPod(c, 1, resources.RoleReplica, true),
		testPod(c, 2, resources.RoleNone, false)}
	sql := fakeSQL{
		"db-0": {out: primaryOut(uuid+":1-42", 1)},
		"db-1": {out: replicaOut(uuid+":1-40", "db-0.db-instances.ns.svc")},
		// As the executor returns an exec the API server refuses: text, not a status error.
		"db-2": {err: errors.New(`exec in db-2: unable to upgrade connection: pods "db-2" is forbidden: ` +
			`User "dev" cannot create resource "pods/exec" in API group "" in the namespace "ns"`)},
	}
	return objs, sql
}

type harness struct {
	o        *options
	client   client.WithWatch
	out, err *bytes.Buffer
}

func newHarness(t *testing.T, sql sqlRunner, funcs *interceptor.Funcs, objs ...client.Object) *harness {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithStatusSubresource(&mysqlv1beta1.MySQLCluster{}).
		WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Name}
		})
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	h := &harness{client: c, out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	h.o = &options{flags: genericclioptions.NewConfigFlags(true), client: c, sql: sql, namespace: "ns",
		io: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: h.out, ErrOut: h.err}, now: func() time.Time { return base },
		poll: time.Millisecond}
	return h
}

func (h *harness) run(args ...string) int { return run(context.Background(), h.o, args) }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/cli -update to write it")
	require.Equal(t, string(want), got)
}

func TestStatusShowsInstancesReplicationAndConditions(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitOK, h.run("status", "db"), h.err.String())
	golden(t, "status.txt", h.out.String())
	require.Contains(t, h.out.String(), `db-2: not read: pods/exec refused (RBAC: grant "create" on "pods/exec")`)

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("status", "db", "-o", "json"), h.err.String())
	golden(t, "status.json", h.out.String())
}

func TestStatusColoursOnlyWhenAsked(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitOK, h.run("status", "db"))
	require.NotContains(t, h.out.String(), "\x1b[", "no terminal, no escape codes")

	h.out.Reset()
	h.o.color = true
	require.Equal(t, ExitOK, h.run("status", "db"))
	require.Contains(t, h.out.String(), colorRed+"False"+colorReset+"   "+mysqlv1beta1.ReasonInstancesNotReady,
		"the colour does not shift the columns")
}

func TestStatusListsClusters(t *testing.T) {
	objs := []client.Object{testCluster("ns", "db"), testCluster("ns", "app"), testCluster("other", "orders")}
	ready := objs[1].(*mysqlv1beta1.MySQLCluster)
	ready.Status.Phase, ready.Status.ReadyInstances = mysqlv1beta1.PhaseReady, 3
	ready.Status.Conditions[0].Status = metav1.ConditionTrue
	h := newHarness(t, fakeSQL{}, nil, objs...)
	require.Equal(t, ExitOK, h.run("status"), h.err.String())
	golden(t, "list.txt", h.out.String())

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("status", "-A"), h.err.String())
	golden(t, "list-all.txt", h.out.String())

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("status", "-A", "-o", "yaml"), h.err.String())
	require.Contains(t, h.out.String(), "clusters:\n- backup:")
	require.Contains(t, h.out.String(), "name: orders\n")
}

func TestVersionNeedsNoCluster(t *testing.T) {
	h := &harness{out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	h.o = &options{flags: genericclioptions.NewConfigFlags(true), io: genericiooptions.IOStreams{Out: h.out, ErrOut: h.err}}
	require.Equal(t, ExitOK, h.run("version", "--kubeconfig", "/nonexistent"), h.err.String())
	require.Equal(t, "kubectl-dolphin 0.0.0-dev (commit unknown)\n", h.out.String())
}

func TestUsageAndMissingClusterExitCodes(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitNotFound, h.run("status", "nope"))
	require.Equal(t, "Error: MySQLCluster \"nope\" not found in namespace ns\n", h.err.String())

	for _, args := range [][]string{{"status", "db", "-o", "xml"}, {"status", "a", "b"}, {"switchover", "db"},
		{"pause"}, {"status", "--no-such-flag"}, {"no-such-command"}} {
		h.err.Reset()
		require.Equal(t, ExitUsage, h.run(args...), "%v: %s", args, h.err.String())
		require.NotEmpty(t, h.err.String())
	}
	h.err.Reset()
	require.Equal(t, ExitNotFound, h.run("switchover", "db", "--to", "db-3"))
	require.Equal(t, "Error: \"db-3\" is not an instance of db (it has db-0 to db-2)\n", h.err.String())
}

func TestARefusedVerbIsNamed(t *testing.T) {
	objs, sql := degradedWorld()
	funcs := &interceptor.Funcs{Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: mysqlv1beta1.GroupVersion.Group, Resource: "mysqlclusters"},
			obj.GetName(), errors.New(`User "dev" cannot patch resource "mysqlclusters"`))
	}}
	h := newHarness(t, sql, funcs, objs...)
	require.Equal(t, ExitForbidden, h.run("switchover", "db", "--to", "db-1"))
	require.Contains(t, h.err.String(), `refused: you may not patch mysqlclusters db in namespace ns (RBAC: grant the verb "patch" on "mysqlclusters")`)
}

// operator stands in for the operator: once the cluster has been read enough times after
// spec.primary changed, it reports the new primary and records its Switchover Event.
func operator(t *testing.T, reads int) *interceptor.Funcs {
	var n atomic.Int32
	return &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		cl, ok := obj.(*mysqlv1beta1.MySQLCluster)
		if !ok || cl.Spec.Primary == "" || cl.Spec.Primary == cl.Status.CurrentPrimary {
			return nil
		}
		switch n.Add(1) {
		case 2:
			cl.Status.Conditions[1] = metav1.Condition{Type: mysqlv1beta1.ConditionDegraded, Status: metav1.ConditionTrue,
				Reason: mysqlv1beta1.ReasonSwitchover, Message: "switching over from db-0 to " + cl.Spec.Primary}
		case int32(reads):
			from := cl.Status.CurrentPrimary
			cl.Status.CurrentPrimary, cl.Status.ReadyInstances = cl.Spec.Primary, 3
			cl.Status.Conditions[0] = metav1.Condition{Type: mysqlv1beta1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: mysqlv1beta1.ReasonAllInstancesReady, Message: "3 of 3 instances ready"}
			cl.Status.Conditions[1] = metav1.Condition{Type: mysqlv1beta1.ConditionDegraded, Status: metav1.ConditionFalse,
				Reason: mysqlv1beta1.ReasonReconciled, Message: "serving"}
			require.NoError(t, c.Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: cl.Namespace, Name: "db.switchover"},
				InvolvedObject: corev1.ObjectReference{Kind: "MySQLCluster", Namespace: cl.Namespace, Name: cl.Name, UID: cl.UID},
				Reason:         mysqlv1beta1.ReasonSwitchover, EventTime: metav1.NewMicroTime(base.Add(time.Second)),
				Message: cl.Spec.Primary + " is the primary: switching over from " + from + " to " + cl.Spec.Primary +
					"; writes were refused for 412ms (from fencing " + from + " until " + cl.Spec.Primary + " was promoted and labelled primary)"}))
		default:
			return nil
		}
		return c.Status().Update(ctx, cl)
	}}
}

// ticking is a clock that moves on half a second each time it is read.
func ticking() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * 500 * time.Millisecond) }
}

func TestSwitchoverSetsThePrimaryWaitsAndSaysHowLongWritesWereRefused(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, operator(t, 4), objs...)
	h.o.now = ticking()
	require.Equal(t, ExitOK, h.run("switchover", "db", "--to", "db-2"), h.err.String())
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c))
	require.Equal(t, "db-2", c.Spec.Primary)
	golden(t, "switchover.txt", h.out.String())

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("switchover", "db", "--to", "db-2"))
	require.Equal(t, "db-2 is already the primary of ns/db.\n", h.out.String())
}

func TestSwitchoverTimesOutOnAnOperatorThatDoesNotAnswer(t *testing.T) {
	objs, sql := degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Status.ObservedGeneration = 2 // it has not seen generation 3
	h := newHarness(t, sql, nil, objs...)
	h.o.now = ticking()
	require.Equal(t, ExitTimeout, h.run("switchover", "db", "--to", "db-1"))
	require.Contains(t, h.err.String(), "the operator has not taken up the change in 30s (status.observedGeneration 2 < 3): is it running?")

	// One that answers but never finishes: the timeout, with what the cluster said last.
	objs, sql = degradedWorld()
	h = newHarness(t, sql, operator(t, 1<<30), objs...)
	require.Equal(t, ExitTimeout, h.run("switchover", "db", "--to", "db-1", "--timeout", "50ms"))
	require.Contains(t, h.err.String(), "switchover to db-1: not done after 50ms (Degraded Switchover: switching over from db-0 to db-1); the change stays asked for")
}

func TestSwitchoverOfAPausedClusterIsRefused(t *testing.T) {
	objs, sql := degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Spec.Paused = true
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitRefused, h.run("switchover", "db", "--to", "db-1"))
	require.Contains(t, h.err.String(), "db is paused")
}

func TestPauseWaitsForTheOperator(t *testing.T) {
	objs, sql := degradedWorld()
	funcs := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if cl, ok := obj.(*mysqlv1beta1.MySQLCluster); ok && cl.Spec.Paused && cl.Status.Phase != mysqlv1beta1.PhasePaused {
			cl.Status.Phase = mysqlv1beta1.PhasePaused
			return c.Status().Update(ctx, cl)
		}
		return nil
	}}
	h := newHarness(t, sql, funcs, objs...)
	require.Equal(t, ExitOK, h.run("pause", "db"), h.err.String())
	require.Equal(t, "ns/db paused: the operator changes nothing of it until kubectl dolphin resume db.\n", h.out.String())
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c))
	require.True(t, c.Spec.Paused)

	h.out.Reset()
	require.Equal(t, ExitOK, h.run("resume", "db"), h.err.String())
	require.NoError(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c))
	require.False(t, c.Spec.Paused)
}

func TestParseInstanceReadsTheClientsBatchOutput(t *testing.T) {
	s, err := parseInstance("gtid_executed\t" + uuid + ":1-5,\\n" + uuid[:35] + "3:1\nread_only\t1\t0\n" +
		"io\tCONNECTING\terror connecting to source 'repl@db-0:3306' - retry-time: 1\\tretries: 3\n" +
		"source\tdb-0\nsql\tON\nsql_error\tnot this one\nRpl_semi_sync_replica_status\tOFF\n")
	require.NoError(t, err)
	require.Equal(t, &InstanceSQL{GTIDExecuted: uuid + ":1-5,\n" + uuid[:35] + "3:1", ReadOnly: true, Source: "db-0",
		IOThread: "CONNECTING", SQLThread: "ON",
		LastError: "error connecting to source 'repl@db-0:3306' - retry-time: 1\tretries: 3"}, s,
		"the receiver's error comes first")

	_, err = parseInstance("ERROR 2002 (HY000): Can't connect to local MySQL server\n")
	require.ErrorContains(t, err, "no gtid_executed")
	_, err = parseInstance("gtid_executed\t\nRpl_semi_sync_source_clients\tmany\n")
	require.ErrorContains(t, err, "Rpl_semi_sync_source_clients")
}
