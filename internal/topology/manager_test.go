package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// fakeInstance records the calls act makes, in one log shared by every instance, so that
// tests can check their order across instances.
type fakeInstance struct {
	name   string
	log    *[]string
	mu     *sync.Mutex
	status mysql.Status
	down   bool
	// closed: nothing listens at its port (a knock is refused); otherwise a knock is
	// accepted, as a hung mysqld's kernel accepts it.
	closed bool
	// hang, when set, is called by Status instead of answering (a hung mysqld).
	hang func(ctx context.Context) error
	// cloneGate, when set, holds Clone until it is closed.
	cloneGate chan struct{}
	// configured, when set, is called by ConfigureReplica.
	configured func()
	// replicaOptions are those of the last ConfigureReplica.
	replicaOptions mysql.ReplicaOptions
	// reloaded, when set, is called by ReloadTLS.
	reloaded func(*mysql.Status)
	// reloadErr is what ReloadTLS returns.
	reloadErr error
	// vars are its global system variables (Variables, SetGlobal); setErr is what SetGlobal
	// returns, clamp what it stores instead of a value (mysqld rounding it).
	vars   map[string]string
	setErr error
	clamp  string
	// failFence makes Fence fail.
	failFence bool
	// wide: its admin account is an earlier release's (Wide, NarrowAccount); wideReads
	// counts the Wide calls (not logged: other tests' logs stay as they were).
	wide      bool
	wideReads int
}

func (f *fakeInstance) record(call string) {
	f.mu.Lock()
	*f.log = append(*f.log, f.name+" "+call)
	f.mu.Unlock()
}

func (f *fakeInstance) Ping(ctx context.Context) error {
	_, err := f.Status(ctx)
	return err
}

func (f *fakeInstance) Status(ctx context.Context) (*mysql.Status, error) {
	if f.hang != nil {
		if err := f.hang(ctx); err != nil {
			return nil, err
		}
	}
	if f.down {
		return nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	}
	s := f.status
	return &s, nil
}
func (f *fakeInstance) ConfigurePrimary(_ context.Context, o mysql.PrimaryOptions) error {
	f.record("ConfigurePrimary")
	f.status.ReadOnly, f.status.SuperReadOnly, f.status.Replica = false, false, nil
	f.status.SemiSyncSource = o.SemiSync
	return nil
}
func (f *fakeInstance) ConfigureReplica(_ context.Context, o mysql.ReplicaOptions) error {
	if o.Renew {
		f.record("RenewReplica " + o.SourceHost + " password=" + o.Password)
	} else {
		f.record("ConfigureReplica " + o.SourceHost)
	}
	f.replicaOptions = o
	if f.configured != nil {
		f.configured()
	}
	return nil
}
func (f *fakeInstance) PrepareClone(context.Context, mysql.CloneOptions) error {
	f.record("PrepareClone")
	return nil
}
func (f *fakeInstance) Clone(ctx context.Context, _ mysql.CloneOptions) error {
	f.record("Clone")
	if f.cloneGate != nil {
		select {
		case <-f.cloneGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
func (f *fakeInstance) SetSuperReadOnly(_ context.Context, on bool) error {
	f.record(fmt.Sprintf("SetSuperReadOnly %v", on))
	f.status.SuperReadOnly = on
	return nil
}
func (f *fakeInstance) ReloadTLS(context.Context) error {
	f.record("ReloadTLS")
	if f.reloadErr != nil {
		return f.reloadErr
	}
	if f.reloaded != nil {
		f.reloaded(&f.status)
	}
	return nil
}
func (f *fakeInstance) Variables(_ context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		if v, ok := f.vars[n]; ok {
			out[n] = v
		}
	}
	return out, nil
}
func (f *fakeInstance) SetGlobal(_ context.Context, name string, value any) error {
	f.record(fmt.Sprintf("SetGlobal %s=%v", name, value))
	if f.setErr != nil {
		return f.setErr
	}
	if f.vars == nil {
		f.vars = map[string]string{}
	}
	f.vars[name] = fmt.Sprint(value)
	if f.clamp != "" {
		f.vars[name] = f.clamp
	}
	return nil
}
func (f *fakeInstance) Fence(context.Context, ...string) error {
	f.record("Fence")
	if f.failFence {
		return errors.New("fence refused")
	}
	f.status.SuperReadOnly = true
	return nil
}
func (f *fakeInstance) EnsureAccount(_ context.Context, o mysql.AccountOptions) error {
	f.record(fmt.Sprintf("EnsureAccount %s %s password=%s", o.Database, o.User, o.Password))
	return nil
}
func (f *fakeInstance) Wide(context.Context) (bool, error) {
	f.mu.Lock()
	f.wideReads++
	f.mu.Unlock()
	return f.wide, nil
}
func (f *fakeInstance) NarrowAccount(_ context.Context, o mysql.NarrowOptions) error {
	f.record(fmt.Sprintf("NarrowAccount %d prepared, %d grants", len(o.Prepare), len(o.Grants)))
	f.wide = false
	return nil
}
func (f *fakeInstance) RetainPasswords(_ context.Context, changes []mysql.PasswordChange) error {
	for _, c := range changes {
		f.record(fmt.Sprintf("RetainPassword %s password=%s", c.User, c.Password))
	}
	return nil
}
func (f *fakeInstance) DiscardOldPasswords(_ context.Context, users []string) error {
	f.record(fmt.Sprintf("DiscardOldPasswords %s", strings.Join(users, ",")))
	return nil
}
func (f *fakeInstance) StopReplication(_ context.Context, all bool) error {
	f.record(fmt.Sprintf("StopReplication all=%v", all))
	return nil
}
func (f *fakeInstance) KillConnections(context.Context, ...string) error {
	f.record("KillConnections")
	return nil
}
func (f *fakeInstance) WaitForGTID(_ context.Context, set string, _ time.Duration) error {
	f.record("WaitForGTID " + set)
	return nil
}
func (f *fakeInstance) GTIDSubtract(context.Context, string, string) (string, error) { return "", nil }
func (f *fakeInstance) Exec(context.Context, string, ...any) error                   { return nil }
func (f *fakeInstance) ExecUnlogged(context.Context, ...string) error                { return nil }
func (f *fakeInstance) Close() error                                                 { return nil }

type world struct {
	m         *Manager
	c         *mysqlv1beta1.MySQLCluster
	clusters  map[string]*mysqlv1beta1.MySQLCluster
	instances map[string]*fakeInstance
	log       []string
	mu        sync.Mutex
}

// newWorld has a 3-instance cluster "db" whose pods have IPs 10.0.0.<index+1>, and a
// 3-instance cluster for each further name, the k-th's pods at 10.0.<k>.<index+1>.
func newWorld(t *testing.T, more ...string) *world {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, mysqlv1beta1.AddToScheme(scheme))
	w := &world{clusters: map[string]*mysqlv1beta1.MySQLCluster{}, instances: map[string]*fakeInstance{}}
	var objs []client.Object
	byAddr := map[string]*fakeInstance{}
	for k, name := range append([]string{"db"}, more...) {
		c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: mysqlv1beta1.MySQLClusterSpec{Instances: new(int32(3)), TLS: mysqlv1beta1.TLSSpec{Enabled: new(false)}}}
		w.clusters[name] = c
		objs = append(objs, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.CredentialsSecretName(c)},
			Data: map[string][]byte{resources.KeyAdminPassword: []byte("a"), resources.KeyReplicationPassword: []byte("r"),
				resources.KeyUsersPassword: []byte("u"), resources.KeyProbePassword: []byte("p")}})
		for i := range 3 {
			pod := fmt.Sprintf("%s-%d", name, i)
			ip := fmt.Sprintf("10.0.%d.%d", k, i+1)
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod, Labels: resources.SelectorLabels(c)},
				Status: corev1.PodStatus{PodIP: ip}})
			f := &fakeInstance{name: pod, log: &w.log, mu: &w.mu, status: mysql.Status{ReadOnly: true, SuperReadOnly: true}}
			w.instances[pod], byAddr[ip+":3306"] = f, f
		}
	}
	w.c = w.clusters["db"]
	w.m = &Manager{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, PodIndex, PodCluster).Build(), Addresses: AddressPodIP,
		Open: func(cfg mysql.Config) (mysql.Instance, error) { return byAddr[cfg.Addr], nil },
		Knock: func(_ context.Context, addr string) error {
			if f := byAddr[addr]; f == nil || f.closed {
				return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			}
			return nil
		}}
	return w
}

func (w *world) pass(t *testing.T) Decision {
	t.Helper()
	w.mu.Lock()
	w.log = nil
	w.mu.Unlock()
	r, _, _ := w.m.pass(context.Background(), w.c)
	require.NotContains(t, r.Message, "the last step failed")
	return Decision{Primary: r.CurrentPrimary, Healthy: r.Healthy, Reason: r.Reason, Message: r.Message}
}

// logged is the call log so far, safe against clones running on their own goroutines.
func (w *world) logged() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.log, "\n")
}

func (w *world) holder(t *testing.T) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-primary"}, l))
	return *l.Spec.HolderIdentity
}

func (w *world) role(t *testing.T, pod string) string {
	t.Helper()
	p := &corev1.Pod{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: pod}, p))
	return p.Labels[resources.LabelRole]
}

// replicate makes the fake replicas report replicating from the primary's address.
func (w *world) replicate(primary string, executed string) {
	for name, f := range w.instances {
		f.status.GTIDExecuted = executed
		if name == primary {
			continue
		}
		f.status.Replica = &mysql.ReplicaStatus{SourceHost: "10.0.0." + string(primary[3]+1), IORunning: true,
			SQLRunning: true, ReceivedGTIDSet: executed}
		f.status.SemiSyncReplica = true
	}
	w.instances[primary].status.SemiSyncSource = true
}

func TestManagerBootstrapsRecordsTheLeaseThenConfiguresReplicas(t *testing.T) {
	w := newWorld(t)
	w.pass(t)
	require.Equal(t, "db-0", w.holder(t))
	require.Equal(t, []string{"db-0 ConfigurePrimary"}, w.log)
	require.Equal(t, "primary", w.role(t, "db-0"))

	w.pass(t)
	require.ElementsMatch(t, []string{"db-1 ConfigureReplica 10.0.0.1", "db-2 ConfigureReplica 10.0.0.1"}, w.log)

	w.replicate("db-0", u1+":1-5")
	d := w.pass(t)
	require.True(t, d.Healthy, d.Message)
	require.Empty(t, w.log, "a healthy cluster costs no writes")
	require.Equal(t, "replica", w.role(t, "db-1"))
}

// With DNS addresses the operator still dials the pods' IPs (no lookup on its failover
// path) and verifies each certificate for the instance's name, while replicas are pointed
// at their source's DNS name.
func TestManagerDialsPodIPsAndPointsReplicasAtDNSNames(t *testing.T) {
	w := newWorld(t)
	w.m.Addresses = AddressDNS
	w.c.Spec.TLS.Enabled = nil
	open := w.m.Open
	dialled := map[string]string{}
	w.m.Open = func(cfg mysql.Config) (mysql.Instance, error) {
		name := ""
		if cfg.TLS != nil {
			name = cfg.TLS.ServerName
		}
		dialled[cfg.Addr] = name
		return open(cfg)
	}
	w.tlsSecret(t, time.Now(), time.Hour)
	w.pass(t)
	w.pass(t)
	require.Equal(t, map[string]string{"10.0.0.1:3306": "db-0.db-instances.ns.svc", "10.0.0.2:3306": "db-1.db-instances.ns.svc",
		"10.0.0.3:3306": "db-2.db-instances.ns.svc"}, dialled)
	require.ElementsMatch(t, []string{"db-1 ConfigureReplica db-0.db-instances.ns.svc", "db-2 ConfigureReplica db-0.db-instances.ns.svc"}, w.log)
}

func TestManagerSwitchoverFencesBeforePromoting(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(10)
	w.m.Recorder = rec
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	w.c.Spec.Primary = "db-2"
	// The primary Service routes to the new primary while its replicas are pointed at it:
	// its commits wait for their acknowledgement, and the old primary's takes a while.
	var roles sync.Map
	for _, n := range []string{"db-0", "db-1"} {
		w.instances[n].configured = func() { roles.Store(n, w.role(t, "db-2")) }
	}
	w.pass(t)
	require.Equal(t, []string{
		"db-0 Fence",
		"db-2 WaitForGTID " + u1 + ":1-5", "db-2 ConfigurePrimary",
	}, w.log[:3])
	require.ElementsMatch(t, []string{"db-0 ConfigureReplica 10.0.0.3", "db-1 ConfigureReplica 10.0.0.3"}, w.log[3:],
		"the old primary and the other replica follow the new one in the same pass")
	for _, n := range []string{"db-0", "db-1"} {
		role, _ := roles.Load(n)
		require.Equal(t, "primary", role, "db-2 is labelled primary before %s is configured", n)
	}
	require.Equal(t, "db-2", w.holder(t))
	require.Equal(t, "primary", w.role(t, "db-2"))
	require.Equal(t, "none", w.role(t, "db-0"), "the old primary leaves the primary Service")

	// The Event kubectl dolphin switchover prints: how long writes were refused.
	var notes []string
	for len(rec.Events) > 0 {
		notes = append(notes, <-rec.Events)
	}
	require.Len(t, notes, 2, "the bootstrap's and the switchover's: %q", notes)
	require.Regexp(t, `^Normal Switchover db-2 is the primary: switching over from db-0 to db-2; `+
		`writes were refused for \d+(\.\d+)?[mµn]?s \(from fencing db-0 until db-2 was promoted and labelled primary\)$`, notes[1])
}

func TestManagerFailoverFreezesThenPromotesAndRemembersTheFailedPrimary(t *testing.T) {
	w := newWorld(t)
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 0}
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.instances["db-2"].status.Replica.ReceivedGTIDSet = u1 + ":1-7"
	w.instances["db-0"].status.GTIDExecuted = u1 + ":1-7"
	w.pass(t)
	one := func(name string) prometheus.Labels {
		return prometheus.Labels{metrics.LabelNamespace: "ns", metrics.LabelCluster: "db", metrics.LabelInstance: name}
	}
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.InstancePrimary.With(one("db-0"))))
	require.Equal(t, 2.0, testutil.ToFloat64(metrics.ReplicationLag.With(one("db-1"))), "db-1 lacks 6-7")
	failovers := metrics.PrimaryChanges.With(prometheus.Labels{metrics.LabelNamespace: "ns", metrics.LabelCluster: "db",
		metrics.LabelKind: metrics.KindFailover})
	before := testutil.ToFloat64(failovers)
	w.instances["db-0"].down = true

	w.pass(t)
	require.ElementsMatch(t, []string{"db-1 StopReplication all=false", "db-2 StopReplication all=false"}, w.log)
	require.Equal(t, "none", w.role(t, "db-0"), "the lost primary leaves the primary Service first")
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	w.pass(t)
	require.Equal(t, []string{"db-2 WaitForGTID " + u1 + ":1-7", "db-2 ConfigurePrimary"}, w.log)
	require.Equal(t, "db-2", w.holder(t))
	require.Equal(t, before+1, testutil.ToFloat64(failovers), "one failover counted")
	require.Equal(t, 0.0, testutil.ToFloat64(metrics.InstanceUp.With(one("db-0"))))
	l := &coordinationv1.Lease{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-primary"}, l))
	require.Equal(t, "db-0", l.Annotations[annotationFailedPrimary])

	// db-0 returns with a transaction nobody acknowledged: re-cloned without asking.
	w.instances["db-0"].down = false
	w.instances["db-0"].status = mysql.Status{ReadOnly: true, SuperReadOnly: true, GTIDExecuted: u1 + ":1-8"}
	w.instances["db-2"].status.GTIDExecuted = u1 + ":1-7"
	w.pass(t)
	require.Contains(t, w.logged(), "db-0 PrepareClone")
	require.Eventually(t, func() bool { return strings.Contains(w.logged(), "db-0 Clone") }, 5*time.Second, 10*time.Millisecond)
}

// A partial partition: the primary and one replica stop answering the operator. With one
// acknowledgement per commit that replica may hold the only copy of the newest acknowledged
// write, so nothing is promoted, nothing is frozen, and one Event says why.
func TestManagerRefusesAFailoverItCannotProveLossless(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(10)
	w.m.Recorder = rec
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 0}
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	<-rec.Events // the bootstrap's
	w.instances["db-0"].down = true
	w.instances["db-1"].down = true
	for range 3 {
		d := w.pass(t)
		require.Equal(t, mysqlv1beta1.ReasonFailoverBlocked, d.Reason, d.Message)
		require.Contains(t, d.Message, "1 of 2 replicas unreachable or unfit (db-1 unreachable: Refused)")
		require.Empty(t, w.logged(), "a blocked failover changes nothing")
	}
	require.Equal(t, "db-0", w.holder(t))
	blocked := metrics.FailoverBlocked.With(prometheus.Labels{metrics.LabelNamespace: "ns", metrics.LabelCluster: "db"})
	require.Equal(t, 1.0, testutil.ToFloat64(blocked))
	require.Len(t, rec.Events, 1, "one Event for the episode, not one a pass")
	require.Contains(t, <-rec.Events, "FailoverBlocked")
	w.instances["db-1"].down = false
	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonFailover, d.Reason, "with db-1 back, the failover goes on: %s", d.Message)
	require.Equal(t, 0.0, testutil.ToFloat64(blocked))
}

// An API error other than NotFound while loading the cluster's objects (RBAC taken away, an
// API server answering 5xx) is reported as a failure, not as waiting for instances.
func TestManagerReportsAnAPIErrorItCannotWaitOut(t *testing.T) {
	w := newWorld(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db-credentials", errors.New("RBAC"))
	w.m.Client = interceptor.NewClient(w.m.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				return forbidden
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	r, _, _ := w.m.pass(context.Background(), w.c)
	require.Equal(t, mysqlv1beta1.ReasonTopologyFailed, r.Reason)
	require.Contains(t, r.Message, "forbidden")
	require.False(t, r.Healthy)

	w2 := newWorld(t)
	require.NoError(t, w2.m.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
		Name: resources.CredentialsSecretName(w2.c)}}))
	r, _, _ = w2.m.pass(context.Background(), w2.c)
	require.Equal(t, mysqlv1beta1.ReasonWaitingForInstances, r.Reason, "a Secret not created yet is waited for: %s", r.Message)
}

// A cluster that stays in one bad state is logged once, not once a pass; every pass that
// acts is, and so is the return to health.
func TestTopologyLogsAStateOnceNotEveryPass(t *testing.T) {
	m := &Manager{}
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	healthy := Decision{State: StateHealthy, Reason: mysqlv1beta1.ReasonReplicationHealthy}
	unreachable := Decision{State: StatePrimaryUnreachable, Reason: mysqlv1beta1.ReasonPrimaryUnavailable}
	acting := Decision{State: StateFailover, Reason: mysqlv1beta1.ReasonFailover, Actions: []Action{{Kind: ActFreeze, Target: "db-1"}}}
	for k, step := range []struct {
		d    Decision
		logs bool
	}{
		{healthy, false}, {healthy, false}, {unreachable, true}, {unreachable, false}, {unreachable, false},
		{acting, true}, {acting, true}, {healthy, true}, {healthy, false},
	} {
		require.Equal(t, step.logs, m.changedState(c, step.d), "pass %d (%s)", k, step.d.State)
	}
}

func TestInstanceNamesKeepLeavingPodsWhileTheyRun(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	c.Spec.Instances = new(int32(2))
	gone := metav1.Now()
	pods := map[string]*corev1.Pod{
		"db-0": {}, "db-1": {}, "db-3": {}, "db-2": {},
		"db-4":  {ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &gone}},
		"db-x":  {},
		"db-05": {},
	}
	names, leaving := instanceNames(c, pods, "")
	require.Equal(t, []string{"db-0", "db-1", "db-2", "db-3"}, names, "a leaving pod being deleted is gone; other names are not instances")
	require.Equal(t, map[string]bool{"db-2": true, "db-3": true}, leaving)

	names, leaving = instanceNames(c, pods, "db-4")
	require.Equal(t, []string{"db-0", "db-1", "db-2", "db-3", "db-4"}, names, "the recorded primary stays until a failover replaces it")
	require.True(t, leaving["db-4"])

	delete(pods, "db-1")
	names, _ = instanceNames(c, pods, "")
	require.Equal(t, []string{"db-0", "db-1", "db-2", "db-3"}, names, "an instance spec.instances keeps is read without its pod")
}

// Online settings reach every running instance by SET GLOBAL, once: a value mysqld reads back
// as the spec's is not set again, one it clamps is set again only SettingsRetry later, and
// one it refuses is told in a Warning Event without failing the pass.
func TestManagerSetsOnlineSettingsOnRunningInstances(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(10)
	w.m.Recorder = rec
	now := time.Now()
	w.m.Now = func() time.Time { return now }
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	for _, f := range w.instances {
		f.vars = map[string]string{"max_connections": "151", "slow_query_log": "OFF", "long_query_time": "10.000000"}
	}
	require.True(t, w.pass(t).Healthy)
	require.Empty(t, w.log, "no online setting in the spec: nothing is set")
	<-rec.Events // the bootstrap's

	w.c.Spec.MySQL.Config = map[string]string{"max_connections": "500", "slow-query-log": "on", "long_query_time": "10", "back_log": "9"}
	d := w.pass(t)
	require.True(t, d.Healthy, "online settings change nothing of the topology: %s", d.Message)
	var want []string
	for _, n := range []string{"db-0", "db-1", "db-2"} {
		want = append(want, n+" SetGlobal max_connections=500", n+" SetGlobal slow_query_log=ON")
	}
	require.ElementsMatch(t, want, w.log, "only the settings that differ, and none read at start only")
	w.pass(t)
	require.Empty(t, w.log, "every instance runs the spec's values")

	w.c.Spec.MySQL.Config["max_connections"] = "100000"
	w.instances["db-1"].clamp = "10000"
	w.instances["db-2"].setErr = errors.New("Error 1227: Access denied; you need SYSTEM_VARIABLES_ADMIN")
	w.pass(t)
	require.ElementsMatch(t, []string{"db-0 SetGlobal max_connections=100000", "db-1 SetGlobal max_connections=100000",
		"db-2 SetGlobal max_connections=100000"}, w.log)
	require.Len(t, rec.Events, 1)
	ev := <-rec.Events
	require.Contains(t, ev, mysqlv1beta1.ReasonSettingRefused)
	require.Contains(t, ev, "db-2 keeps its values until its next restart: max_connections: Error 1227")
	w.pass(t)
	require.Empty(t, w.log, "a clamped or refused value is not set again every pass")
	now = now.Add(SettingsRetry)
	w.pass(t)
	require.ElementsMatch(t, []string{"db-1 SetGlobal max_connections=100000", "db-2 SetGlobal max_connections=100000"}, w.log)
}

// An unreachable instance is reported with the first error of its kind while it stays
// unreachable: a refused dial that times out on a busy operator changes no status, an
// error of mysqld's does, and so does another one of mysqld's.
func TestAnUnreachableInstanceKeepsTheErrorOfItsKind(t *testing.T) {
	m := &Manager{}
	const key = "ns/db/db-0"
	for _, tc := range []struct {
		fault      mysql.Fault
		text, want string
	}{
		{mysql.FaultRefused, "dial: connection refused", "dial: connection refused"},
		{mysql.FaultNoAnswer, "dial: i/o timeout", "dial: connection refused"},
		{mysql.FaultDropped, "invalid connection", "dial: connection refused"},
		{mysql.FaultRejected, "Error 1045: Access denied", "Error 1045: Access denied"},
		{mysql.FaultRejected, "Error 1045: Access denied", "Error 1045: Access denied"},
		{mysql.FaultRejected, "Error 1040: Too many connections", "Error 1040: Too many connections"},
		{mysql.FaultNoAnswer, "dial: i/o timeout", "dial: i/o timeout"},
	} {
		if got := m.downTextLocked(key, tc.fault, tc.text); got != tc.want {
			t.Errorf("%s %q: reported %q, want %q", tc.fault, tc.text, got, tc.want)
		}
	}
	if got := m.downTextLocked("ns/db/db-1", mysql.FaultNoAnswer, "dial: i/o timeout"); got != "dial: i/o timeout" {
		t.Errorf("another instance got %q", got)
	}
}

// A new cluster none of whose instances answers costs no pod write: a pod never labelled
// is in no Service, which is what role "none" says. A pod that had a role is labelled
// "none" when it loses it (TestManagerSwitchoverFencesBeforePromoting).
func TestManagerLeavesANewUnreachablePodUnlabelled(t *testing.T) {
	w := newWorld(t)
	for _, f := range w.instances {
		f.down = true
	}
	for range 2 {
		w.pass(t)
	}
	for _, pod := range []string{"db-0", "db-1", "db-2"} {
		p := &corev1.Pod{}
		require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: pod}, p))
		_, labelled := p.Labels[resources.LabelRole]
		require.False(t, labelled, "%s labelled %q", pod, p.Labels[resources.LabelRole])
		require.Equal(t, "999", p.ResourceVersion, "%s was written", pod)
	}
}

// An instance has one pooled connection: reused while its address and credentials stay,
// replaced (the old one evicted) when they change, and evicting it leaves every other
// instance's alone.
func TestManagerPoolsOneConnectionAnInstance(t *testing.T) {
	w := newWorld(t, "other")
	cl := &cluster{obj: w.c, pods: map[string]*corev1.Pod{}, adminPassword: "a"}
	other := &cluster{obj: w.clusters["other"], pods: map[string]*corev1.Pod{}, adminPassword: "a"}
	for _, c := range []*cluster{cl, other} {
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", c.obj.Name, i)
			p := &corev1.Pod{}
			require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, p))
			c.pods[name] = p
			_, err := w.m.connect(c, name)
			require.NoError(t, err)
		}
	}
	require.Len(t, w.m.conns, 6)
	first := w.m.conns["ns/db/db-0"]
	_, err := w.m.connect(cl, "db-0")
	require.NoError(t, err)
	require.Equal(t, first, w.m.conns["ns/db/db-0"], "the same credentials reuse the connection")
	cl.adminPassword = "rotated"
	_, err = w.m.connect(cl, "db-0")
	require.NoError(t, err)
	require.NotEqual(t, first.id, w.m.conns["ns/db/db-0"].id, "a rotated password opens a new connection")
	w.m.mu.Lock()
	w.m.evict(cl, "db-1")
	w.m.mu.Unlock()
	require.Len(t, w.m.conns, 5)
	require.NotContains(t, w.m.conns, "ns/db/db-1")
}

// A new cluster none of whose instances answers yet is looked at again after the rest of
// UnreachableInterval, not every PollInterval; once one answers, the usual pace.
func TestManagerLooksAtAClusterWithNoInstanceAnsweringLessOften(t *testing.T) {
	w := newWorld(t)
	for _, f := range w.instances {
		f.down = true
	}
	_, after, _ := w.m.pass(context.Background(), w.c)
	require.Greater(t, after, PollInterval)
	require.LessOrEqual(t, after, UnreachableInterval)

	w.instances["db-1"].down = false
	_, after, _ = w.m.pass(context.Background(), w.c)
	require.LessOrEqual(t, after, PollInterval)
}

// requestFailover sets the manual failover annotation on the stored cluster and on the
// copy passes read, as the reconciler hands it over.
func (w *world) requestFailover(t *testing.T, value string) {
	t.Helper()
	stored := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKeyFromObject(w.c), stored))
	stored.Annotations = map[string]string{mysqlv1beta1.AnnotationFailover: value}
	require.NoError(t, w.m.Client.Update(context.Background(), stored))
	w.c = stored.DeepCopy()
}

func (w *world) storedAnnotations(t *testing.T) map[string]string {
	t.Helper()
	stored := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKeyFromObject(w.c), stored))
	return stored.Annotations
}

func TestManagerAnswersAManualFailoverRequestAndWithdrawsIt(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(20)
	w.m.Recorder = rec
	f := false
	w.c.Spec.Replication.Failover.Enabled = &f // only the request may fail over
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	<-rec.Events // the bootstrap's

	// The primary answers: refused, withdrawn, told in a Warning Event.
	w.requestFailover(t, "db-0")
	w.pass(t)
	require.NotContains(t, w.storedAnnotations(t), mysqlv1beta1.AnnotationFailover)
	require.Equal(t, "Warning FailoverRefused Manual failover from db-0 refused: primary db-0 answers: a failover replaces "+
		"a primary that does not (a switchover, spec.primary, moves a healthy one without losing a write)", <-rec.Events)

	// A request the user changed since the pass read it is left for the next pass.
	w.requestFailover(t, "db-1")
	w.c.Annotations[mysqlv1beta1.AnnotationFailover] = "db-0"
	w.pass(t)
	require.Equal(t, "db-1", w.storedAnnotations(t)[mysqlv1beta1.AnnotationFailover])
	require.Empty(t, rec.Events)

	// The primary is lost: the request fails over at once, and is withdrawn once the
	// promotion is done.
	w.requestFailover(t, "db-0")
	w.instances["db-0"].down = true
	d := w.pass(t)
	require.Equal(t, mysqlv1beta1.ReasonFailover, d.Reason, d.Message)
	require.ElementsMatch(t, []string{"db-1 StopReplication all=false", "db-2 StopReplication all=false"}, w.log)
	require.Equal(t, "db-0", w.storedAnnotations(t)[mysqlv1beta1.AnnotationFailover], "kept while the failover runs")
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	w.pass(t)
	require.Equal(t, "db-1", w.holder(t))
	require.NotContains(t, w.storedAnnotations(t), mysqlv1beta1.AnnotationFailover)
	var told []string
	for len(rec.Events) > 0 {
		told = append(told, <-rec.Events)
	}
	require.Contains(t, told, "Normal Failover Manual failover from db-0: failover from db-0: primary db-0 lost: promoting db-1 (5 transactions)")
}

func TestPassesReportTheActionsTheyCarriedOutForTheHistory(t *testing.T) {
	w := newWorld(t)
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{Duration: 0}
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	w.m.Now = func() time.Time { return now }
	history := func() []string {
		r, _, _ := w.m.pass(context.Background(), w.c)
		var out []string
		for _, e := range r.History {
			require.Equal(t, now, e.Time.Time)
			out = append(out, fmt.Sprintf("%s %s from %q (%s)", e.Action, e.Instance, e.From, e.Reason))
		}
		return out
	}
	require.Equal(t, []string{`Bootstrap db-0 from "" (Bootstrap)`}, history())
	require.Empty(t, history(), "configuring the replicas is routine")
	w.replicate("db-0", u1+":1-5")
	require.Empty(t, history())
	w.instances["db-0"].down = true
	require.Empty(t, history(), "freezing receivers is part of the failover, not an entry of its own")
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	require.Equal(t, []string{`Failover db-1 from "db-0" (Failover)`}, history())

	// A failed action is no entry.
	w.instances["db-2"].status.ReadOnly, w.instances["db-2"].status.SuperReadOnly = false, false
	w.instances["db-2"].failFence = true
	require.Empty(t, history())
	require.Contains(t, w.logged(), "db-2 Fence", "the fence was tried")
}

func TestTheHistoryKeepsTheLastEntries(t *testing.T) {
	var h []mysqlv1beta1.HistoryEntry
	for k := range mysqlv1beta1.HistoryLength + 5 {
		h = appendHistory(h, []mysqlv1beta1.HistoryEntry{{Action: "Fence", Instance: fmt.Sprintf("db-%d", k)}})
	}
	require.Len(t, h, mysqlv1beta1.HistoryLength)
	require.Equal(t, "db-5", h[0].Instance)
	require.Equal(t, fmt.Sprintf("db-%d", mysqlv1beta1.HistoryLength+4), h[len(h)-1].Instance)
}

// The pass after a failover's eviction runs before the cache shows the pod's deletion: it
// must not ask for it again.
func TestAFailoverEvictsAHungPrimaryOnce(t *testing.T) {
	w := newWorld(t)
	w.c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{}
	w.pass(t)
	w.replicate("db-0", u1+":1-5")
	w.pass(t)
	pod := &corev1.Pod{}
	require.NoError(t, w.m.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-0"}, pod))
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.ContainerMySQL,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	require.NoError(t, w.m.Client.Status().Update(context.Background(), pod))
	deletes := 0
	w.m.Client = interceptor.NewClient(w.m.Client.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				deletes++
				return nil // asked, and not seen yet: the cache still has the pod
			}
			return c.Delete(ctx, obj, opts...)
		}})
	w.instances["db-0"].hang = func(ctx context.Context) error { return fmt.Errorf("read: %w", os.ErrDeadlineExceeded) }
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.IORunning = false
	}
	for range 3 {
		w.pass(t)
	}
	require.Equal(t, 1, deletes, "the eviction was asked for once")
	require.Equal(t, "db-0", w.holder(t), "nothing is promoted before the kubelet stops the old primary")
}
