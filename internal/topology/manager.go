package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Notes the primary Lease keeps besides its holder, so that they survive operator restarts.
const (
	// annotationFailedPrimary names the primary a failover replaced. With lossless
	// semi-sync, transactions only it holds were never acknowledged to a client, so it may
	// be re-cloned without asking when it comes back with them.
	annotationFailedPrimary = "mysql.dolphin-operator.io/failed-primary"
)

// AnnotationReclone lists (comma-separated) instances the user allows to be re-cloned
// although they hold errant transactions: their own writes are then discarded.
const AnnotationReclone = "mysql.dolphin-operator.io/reclone"

// PollInterval is how often a settled cluster is looked at again: failure detection needs
// it, since a dead mysqld changes nothing a watch would see.
const PollInterval = time.Second

// UnreachableInterval is how often a cluster none of whose instances answered is looked at
// (from the start of one pass to the start of the next, and never sooner than PollInterval
// after a pass ends): no failover can pick an instance that does not answer, and one that
// comes back is found within it. A cluster whose databases are all down (an outage, or a
// new cluster whose mysqld still initialises) then costs a third of the dials; a cluster
// with any instance answering is looked at every PollInterval.
const UnreachableInterval = 3 * time.Second

// DefaultWatchInterval is how often the primary is pinged between passes: a primary that
// refuses or stops answering is then found within this, not within a PollInterval, and
// the detection delay counts from there.
const DefaultWatchInterval = 250 * time.Millisecond

// Deadlines of one pass. Every SQL call and API request of a pass carries one of them, so a
// pass always ends: a cluster whose databases do not answer costs its own loop its time,
// never another cluster's.
const (
	// DialTimeout bounds connecting to an instance (TCP and the handshake).
	DialTimeout = time.Second
	// StatusTimeout bounds reading one instance's state: an instance that accepts TCP but
	// answers nothing within it (a hung mysqld) counts as unreachable from the read's start.
	StatusTimeout = 2 * time.Second
	// DownStatusTimeout bounds reading an instance already found unreachable.
	DownStatusTimeout = 500 * time.Millisecond
	// KnockTimeout bounds the TCP dial to an evicted primary's port (knock): a refusal
	// comes at once, and any other outcome says nothing.
	KnockTimeout = 250 * time.Millisecond
	// ActionTimeout bounds each action of act (a promotion's catch-up has CatchUpTimeout).
	ActionTimeout = 10 * time.Second
	// PassTimeout bounds a whole pass: gather, decide, act and the API writes.
	PassTimeout = 45 * time.Second
)

// Manager is the topology manager: one loop per MySQLCluster (see loop.go), each running
// passes of gather → decide → act on its own goroutine, reporting to the MySQLCluster
// reconciler through Observe and a channel of events.
type Manager struct {
	Client client.Client
	// Reader reads past the cache (nil: Client): where a stale object would have a write
	// repeated, as the withdrawal of a failover request the cache still shows.
	Reader    client.Reader
	Recorder  recorder.EventRecorder
	Addresses Addresses
	// Open connects to one instance; default mysql.Open. Tests substitute it.
	Open func(mysql.Config) (mysql.Instance, error)
	// Knock opens a TCP connection to addr and closes it (see knock); default a dial
	// bounded by KnockTimeout. Tests substitute it.
	Knock func(ctx context.Context, addr string) error
	Now   func() time.Time
	// CloneTimeout bounds one clone (default DefaultCloneTimeout).
	CloneTimeout time.Duration
	// WatchInterval is how often a settled cluster's primary is pinged between passes
	// (the operator's default is DefaultWatchInterval); zero: never, failures are then
	// found by the passes alone, one a PollInterval.
	WatchInterval time.Duration

	mu    sync.Mutex
	conns map[string]pooled    // by cluster key + instance
	down  map[string]time.Time // by cluster key + instance: unreachable since
	// downText is what the status says of each unreachable instance (downTextLocked).
	downText map[string]downText
	clones   map[string]*cloneRun // by cluster key + instance
	// evicted is the pod whose deletion a failover asked for, by cluster key + instance:
	// until the cache shows the deletion, the next pass (a millisecond later) must not ask
	// again.
	evicted map[string]types.UID
	loops   map[string]*loop // by cluster key
	// announced is the bad state last announced by an Event, by cluster key.
	announced map[string]string
	// logged is the state and reason last logged, by cluster key: a cluster that stays
	// in one state is logged once, not once a pass.
	logged map[string]string
	// tlsReloads is the last certificate reload asked of an instance, by cluster key +
	// instance.
	tlsReloads map[string]tlsReload
	// tls is each cluster's TLS Secret as last parsed, by cluster key.
	tls map[string]*tlsMaterial
	// settingsTries is the last setting of an instance's online settings, by cluster key +
	// instance.
	settingsTries map[string]settingsTry
	base          context.Context // the manager's, once started
	events        chan event.GenericEvent
}

// PodIndex is the cache index of pods by the cluster they are an instance of, which every
// pass lists a cluster's pods by: whoever builds the manager's cache registers it
// (IndexPods) before the manager starts.
const PodIndex = "mysql.dolphin-operator.io/cluster"

// IndexPods registers PodIndex with the cache.
func IndexPods(ctx context.Context, i client.FieldIndexer) error {
	if err := i.IndexField(ctx, &corev1.Pod{}, PodIndex, PodCluster); err != nil {
		return fmt.Errorf("while indexing pods by cluster: %w", err)
	}
	return nil
}

// PodCluster is PodIndex's key of a pod: the name of the cluster whose selector labels it
// carries (none for any other pod).
func PodCluster(o client.Object) []string {
	l := o.GetLabels()
	probe := &mysqlv1beta1.MySQLCluster{}
	probe.Name = l[resources.LabelInstance]
	if probe.Name == "" {
		return nil
	}
	for k, v := range resources.SelectorLabels(probe) {
		if l[k] != v {
			return nil
		}
	}
	return []string{probe.Name}
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// pass gathers, decides and acts once, and says what it saw, when to look again and which
// primary to watch until then (none while anything is being changed).
func (m *Manager) pass(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (Report, time.Duration, probe) {
	log := logf.FromContext(ctx)
	start := time.Now()
	defer func() { metrics.TopologyPassDuration.Observe(time.Since(start).Seconds()) }()
	cl, err := m.load(ctx, c)
	if err != nil {
		r := Report{Managed: true, Reason: mysqlv1beta1.ReasonTopologyFailed, Message: err.Error()}
		if apierrors.IsNotFound(err) {
			// The credentials Secret or the TLS Secret is not there yet (the reconciler's
			// earlier steps create them): wait, not a failure.
			r.Reason = mysqlv1beta1.ReasonWaitingForInstances
		} else {
			log.Error(err, "Topology pass could not read the cluster's objects")
		}
		return r, PollInterval, probe{}
	}
	if cl.application, err = m.loadApplication(ctx, cl); err != nil {
		log.Error(err, "Topology pass could not read the application Secret")
		return Report{Managed: true, Reason: mysqlv1beta1.ReasonTopologyFailed, Message: err.Error()}, PollInterval, probe{}
	}
	in := m.gather(ctx, cl)
	in.Application = cl.application
	in.AccountsWide = m.readWide(ctx, cl, in)
	in.Rotation = cl.rotationInput()
	d := Decide(in)
	r := report(d)
	recordMetrics(c, in, r, d)
	if m.changedState(c, d) {
		log.Info("Topology", "state", d.State, "reason", d.Reason, "message", d.Message, "actions", describe(d.Actions))
	}
	acting := time.Now()
	err = m.carryOut(ctx, cl, in, d)
	if len(d.Actions) > 0 {
		// What each action took: where a failover's or a switchover's time went.
		log.Info("Topology acted", "took", time.Since(acting).Round(time.Millisecond).String(), "actions", cl.timings())
	}
	r.History = historyOf(cl.carriedOut(), d.Reason, m.now()) // this pass's: the loop keeps the last ones
	if err != nil {
		log.Error(err, "Topology pass failed", "state", d.State)
		r.Healthy = false
		r.Message = fmt.Sprintf("%s (the last step failed, retrying: %v)", d.Message, err)
		return r, PollInterval, probe{}
	}
	if cl.accountsNarrowed && cl.lease != nil && cl.lease.Annotations[annotationAccounts] == "" && cl.recordedPrimary() != "" {
		// Found narrowed (a cluster this release made): noted once, not read again.
		if err := m.recordPrimary(ctx, cl, cl.recordedPrimary()); err != nil {
			log.Error(err, "Topology pass could not note the narrowed accounts")
		}
	}
	var p probe
	if h := cl.handles[d.Primary]; h != nil && len(d.Actions) == 0 {
		p = probe{conn: h, key: clusterKey(cl.obj) + d.Primary}
	}
	return r, next(in, d, time.Since(start)), p
}

// next is the wait after a pass that took took: what the decision asks for, at most
// PollInterval; when no instance answered and there is nothing to do (the decision asks
// for no look sooner than PollInterval: a new cluster's wait for its instances asks for
// 2 s, a primary's detection delay for its rest), the rest of UnreachableInterval, at least
// PollInterval.
func next(in Input, d Decision, took time.Duration) time.Duration {
	answered := slices.ContainsFunc(in.Instances, func(i Instance) bool { return i.Reachable })
	if !answered && len(in.Instances) > 0 && len(d.Actions) == 0 && (d.RequeueAfter <= 0 || d.RequeueAfter >= PollInterval) {
		return max(UnreachableInterval-took, PollInterval)
	}
	if d.RequeueAfter <= 0 || d.RequeueAfter > PollInterval {
		return PollInterval
	}
	return d.RequeueAfter
}

// carryOut writes the notes and labels the decision needs and runs its actions.
func (m *Manager) carryOut(ctx context.Context, cl *cluster, in Input, d Decision) error {
	if err := m.tidyNotes(ctx, cl, d); err != nil {
		return err
	}
	// Demotions are labelled before acting: an old primary leaves the primary Service
	// before anyone else is promoted. Promotions are labelled after, once they happened
	// (or, while a failover waits for the kubelet, for a successor still read-only).
	if err := m.label(ctx, cl, d.Roles, false); err != nil {
		return err
	}
	if err := m.act(ctx, cl, d); err != nil {
		return err
	}
	if err := m.label(ctx, cl, d.Roles, true); err != nil {
		return err
	}
	m.announce(cl, in, d)
	return m.answerRequest(ctx, cl, d)
}

// answerRequest withdraws a manual failover request the decision did or refused, and says
// so in an Event (kubectl dolphin failover prints its note). The annotation is removed only
// while it still names the same primary, so that a request made since is not lost.
func (m *Manager) answerRequest(ctx context.Context, cl *cluster, d Decision) error {
	if d.Request != RequestDone && d.Request != RequestRefused {
		return nil
	}
	c := cl.obj
	value := c.Annotations[mysqlv1beta1.AnnotationFailover]
	now := &mysqlv1beta1.MySQLCluster{}
	var reader client.Reader = m.Client
	if m.Reader != nil {
		reader = m.Reader // the cache can still show a request withdrawn a moment ago
	}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(c), now); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("while withdrawing the failover request: %w", err))
	}
	if now.Annotations[mysqlv1beta1.AnnotationFailover] != value {
		return nil // changed since this pass read it: the next pass judges what it holds now
	}
	patch := client.MergeFromWithOptions(now.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(now.Annotations, mysqlv1beta1.AnnotationFailover)
	if err := m.Client.Patch(ctx, now, patch); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // as above
	} else if err != nil {
		return fmt.Errorf("while withdrawing the failover request: %w", err)
	}
	logf.FromContext(ctx).Info("Manual failover request answered", "primary", value, "outcome", d.Request, "note", d.RequestNote)
	if m.Recorder == nil {
		return nil
	}
	if d.Request == RequestDone {
		m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonFailover, "ManualFailover",
			"Manual failover from %s: %s", value, d.RequestNote)
	} else {
		m.Recorder.Eventf(c, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonFailoverRefused, "ManualFailover",
			"Manual failover from %s refused: %s", value, d.RequestNote)
	}
	return nil
}

// forgetLocked drops the connections, detection times and clones kept for a cluster; the
// caller holds m.mu.
func (m *Manager) forgetLocked(c *mysqlv1beta1.MySQLCluster) error {
	prefix := clusterKey(c)
	var errs []error
	for k, p := range m.conns {
		if strings.HasPrefix(k, prefix) {
			errs = append(errs, p.conn.Close())
			delete(m.conns, k)
		}
	}
	for k := range m.downText {
		if strings.HasPrefix(k, prefix) {
			delete(m.downText, k)
		}
	}
	for k := range m.down {
		if strings.HasPrefix(k, prefix) {
			delete(m.down, k)
		}
	}
	for k := range m.evicted {
		if strings.HasPrefix(k, prefix) {
			delete(m.evicted, k)
		}
	}
	for k := range m.tlsReloads {
		if strings.HasPrefix(k, prefix) {
			delete(m.tlsReloads, k)
		}
	}
	for k := range m.settingsTries {
		if strings.HasPrefix(k, prefix) {
			delete(m.settingsTries, k)
		}
	}
	delete(m.announced, prefix)
	delete(m.logged, prefix)
	delete(m.tls, prefix)
	for k, run := range m.clones {
		if strings.HasPrefix(k, prefix) {
			run.cancel()
			delete(m.clones, k)
		}
	}
	return errors.Join(errs...)
}

// cluster is what one pass works with.
type cluster struct {
	obj   *mysqlv1beta1.MySQLCluster
	names []string
	// leaving are the instances a scale-down removes (their pods still run).
	leaving map[string]bool
	// handOver are the instances whose pods carry resources.AnnotationHandOver.
	handOver map[string]bool
	// pods are the cache's own objects (not copies): read them, never change them.
	pods            map[string]*corev1.Pod
	lease           *coordinationv1.Lease
	adminPassword   string
	replicaPassword string
	handles         map[string]mysql.Instance
	// fenced: super_read_only was on when the instance was read this pass.
	fenced map[string]bool
	// failedPrimary is the primary the last failover replaced, until it replicates again.
	failedPrimary string
	// applicationDigest is the Lease's note of the application account last applied;
	// application is the account spec.application asks for (nil: none).
	applicationDigest string
	application       *Application
	// usersPassword is the users account's; accountsNarrowed: the Lease notes (or this
	// pass found) that the primary's accounts are narrowed (accounts.go).
	usersPassword, probePassword string
	accountsNarrowed             bool
	// rotation is the rotation of the operator's passwords the credentials Secret is in;
	// nextPasswords its new passwords by account (while retaining); passwordsRetained and
	// passwordsDiscarded the Lease's notes of the asks whose steps are done.
	rotation                              resources.Rotation
	nextPasswords                         map[string]string
	passwordsRetained, passwordsDiscarded string
	// tls verifies the instances' certificates (tlsmaterial.go); nil when the cluster
	// has TLS off. Its notAfter is the TLS Secret's certificate's expiry: an instance
	// serving one that expires otherwise has not loaded it yet.
	tls *tlsMaterial

	timingsMu sync.Mutex
	took      []string // each action carried out and how long it took, in the order they ended
	done      []Action // the actions that succeeded, in the order they ended

	// writesRefused is how long this pass's switchover kept writes out (act says from when
	// to when); zero without one.
	writesRefused time.Duration
}

// timed notes how long an action took (actions of a group end in any order).
func (cl *cluster) timed(a Action, d time.Duration) {
	cl.timingsMu.Lock()
	defer cl.timingsMu.Unlock()
	cl.took = append(cl.took, describe([]Action{a})[0]+" "+d.Round(time.Millisecond).String())
}

// succeeded notes an action that was carried out.
func (cl *cluster) succeeded(a Action) {
	cl.timingsMu.Lock()
	defer cl.timingsMu.Unlock()
	cl.done = append(cl.done, a)
}

func (cl *cluster) carriedOut() []Action {
	cl.timingsMu.Lock()
	defer cl.timingsMu.Unlock()
	return slices.Clone(cl.done)
}

func (cl *cluster) timings() []string {
	cl.timingsMu.Lock()
	defer cl.timingsMu.Unlock()
	return slices.Clone(cl.took)
}

func (m *Manager) load(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (*cluster, error) {
	secret := &corev1.Secret{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CredentialsSecretName(c)}, secret); err != nil {
		return nil, fmt.Errorf("while reading the credentials: %w", err)
	}
	pods := &corev1.PodList{}
	// By the index, a list reads the cluster's own pods: by its labels alone it would test
	// every pod of the namespace, on every pass of every cluster.
	// Not copied either: a pass reads the cache's own pods, and whatever changes one (label)
	// changes a copy.
	if err := m.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingFields{PodIndex: c.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("while listing pods: %w", err)
	}
	cl := &cluster{obj: c, pods: map[string]*corev1.Pod{}, handles: map[string]mysql.Instance{}, fenced: map[string]bool{},
		adminPassword:   string(secret.Data[resources.KeyAdminPassword]),
		replicaPassword: string(secret.Data[resources.KeyReplicationPassword]),
		usersPassword:   string(secret.Data[resources.KeyUsersPassword]),
		probePassword:   string(secret.Data[resources.KeyProbePassword])}
	cl.loadRotation(secret)
	for i := range pods.Items {
		cl.pods[pods.Items[i].Name] = &pods.Items[i]
	}
	if tlsEnabled(cl) {
		tlsSecret := &corev1.Secret{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.TLSSecretName(c)}, tlsSecret); err != nil {
			return nil, fmt.Errorf("while reading the TLS Secret: %w", err)
		}
		ca := tlsSecret.Data[resources.KeyCACert]
		if len(ca) == 0 {
			return nil, fmt.Errorf("TLS Secret %s has no %s to verify the instances with", tlsSecret.Name, resources.KeyCACert)
		}
		t, err := m.tlsMaterial(clusterKey(c), tlsSecret.Name, ca, tlsSecret.Data[corev1.TLSCertKey])
		if err != nil {
			return nil, err
		}
		cl.tls = t
	}
	lease := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PrimaryLeaseName(c)}, lease)
	switch {
	case err == nil:
		cl.lease = lease
		cl.failedPrimary = lease.Annotations[annotationFailedPrimary]
		cl.applicationDigest = lease.Annotations[annotationApplication]
		cl.accountsNarrowed = lease.Annotations[annotationAccounts] == accountsNarrowed
		cl.passwordsRetained = lease.Annotations[resources.AnnotationPasswordsRetained]
		cl.passwordsDiscarded = lease.Annotations[resources.AnnotationPasswordsDiscarded]
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("while reading the primary Lease: %w", err)
	}
	cl.names, cl.leaving = instanceNames(c, cl.pods, cl.recordedPrimary())
	cl.handOver = map[string]bool{}
	for name, pod := range cl.pods {
		if _, ok := pod.Annotations[resources.AnnotationHandOver]; ok {
			cl.handOver[name] = true
		}
	}
	return cl, nil
}

// instanceNames are the instances a pass reads, in ordinal order: those spec.instances
// keeps, and those a scale-down removes while their pods still run (leaving). The StatefulSet
// removes them only once the primary is elsewhere (the reconciler holds it), so until then
// they replicate and count like any other; a leaving pod already being deleted is gone for
// the topology, unless it is the recorded primary, whose loss must go through a failover.
func instanceNames(c *mysqlv1beta1.MySQLCluster, pods map[string]*corev1.Pod, primary string) ([]string, map[string]bool) {
	var names []string
	for i := range *c.Spec.Instances {
		names = append(names, c.InstanceName(int(i)))
	}
	var extra []int
	for name, pod := range pods {
		i, ok := c.InstanceOrdinal(name)
		if ok && i >= int(*c.Spec.Instances) && (pod.DeletionTimestamp == nil || name == primary) {
			extra = append(extra, i)
		}
	}
	slices.Sort(extra)
	leaving := map[string]bool{}
	for _, i := range extra {
		names = append(names, c.InstanceName(i))
		leaving[c.InstanceName(i)] = true
	}
	return names, leaving
}

func (cl *cluster) recordedPrimary() string {
	if cl.lease == nil || cl.lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *cl.lease.Spec.HolderIdentity
}

// recordPrimary writes the Lease: the single point at which the primary changes. The
// update carries the resourceVersion read at the start of the pass, so two operators (or
// a stale pass) cannot both move it.
func (m *Manager) recordPrimary(ctx context.Context, cl *cluster, name string) error {
	annotations := map[string]string{}
	if cl.failedPrimary != "" {
		annotations[annotationFailedPrimary] = cl.failedPrimary
	}
	if cl.applicationDigest != "" {
		annotations[annotationApplication] = cl.applicationDigest
	}
	if cl.accountsNarrowed {
		annotations[annotationAccounts] = accountsNarrowed
	}
	if cl.passwordsRetained != "" {
		annotations[resources.AnnotationPasswordsRetained] = cl.passwordsRetained
	}
	if cl.passwordsDiscarded != "" {
		annotations[resources.AnnotationPasswordsDiscarded] = cl.passwordsDiscarded
	}
	if cl.recordedPrimary() == name && cl.lease != nil && maps.Equal(cl.lease.Annotations, annotations) {
		return nil
	}
	now := metav1.NewMicroTime(m.now())
	if cl.lease == nil {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cl.obj.Namespace, Name: resources.PrimaryLeaseName(cl.obj),
			Labels: resources.Labels(cl.obj, resources.ComponentDatabase), Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, AcquireTime: &now, RenewTime: &now}}
		if err := controllerutil.SetControllerReference(cl.obj, lease, m.Client.Scheme()); err != nil {
			return fmt.Errorf("while owning the primary Lease: %w", err)
		}
		if err := m.Client.Create(ctx, lease); err != nil {
			return fmt.Errorf("while recording %s as primary: %w", name, err)
		}
		cl.lease = lease
		return nil
	}
	transitions := int32(1)
	if cl.lease.Spec.LeaseTransitions != nil {
		transitions = *cl.lease.Spec.LeaseTransitions + 1
	}
	if cl.recordedPrimary() != name {
		cl.lease.Spec.HolderIdentity, cl.lease.Spec.AcquireTime, cl.lease.Spec.RenewTime = &name, &now, &now
		cl.lease.Spec.LeaseTransitions = &transitions
	}
	cl.lease.Annotations = annotations
	if err := m.Client.Update(ctx, cl.lease); err != nil {
		return fmt.Errorf("while recording %s as primary: %w", name, err)
	}
	return nil
}

// tidyNotes drops the failed-primary note once that instance replicates again.
func (m *Manager) tidyNotes(ctx context.Context, cl *cluster, d Decision) error {
	if cl.recordedPrimary() == "" || cl.failedPrimary == "" || d.Roles[cl.failedPrimary] != resources.RoleReplica {
		return nil
	}
	cl.failedPrimary = ""
	return m.recordPrimary(ctx, cl, cl.recordedPrimary())
}

// label sets each pod's role label: demotions (promote=false) or promotions (true).
func (m *Manager) label(ctx context.Context, cl *cluster, roles map[string]resources.Role, promote bool) error {
	for name, role := range roles {
		pod := cl.pods[name]
		if pod == nil || pod.Labels[resources.LabelRole] == string(role) {
			continue
		}
		if _, labelled := pod.Labels[resources.LabelRole]; !labelled && role == resources.RoleNone {
			continue // a pod never labelled is in no Service already: no write for a new pod
		}
		if promote != (role != resources.RoleNone) {
			continue
		}
		patch := client.MergeFrom(pod)
		pod = pod.DeepCopy() // the pass's pods are the cache's: never changed in place
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[resources.LabelRole] = string(role)
		if err := m.Client.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while labelling %s %s: %w", name, role, err)
		}
		cl.pods[name] = pod
	}
	return nil
}

// announce emits an event when the primary changes or the state turns bad.
func (m *Manager) announce(cl *cluster, in Input, d Decision) {
	c := cl.obj
	countPrimaryChanges(c, in, d)
	if m.Recorder == nil {
		return
	}
	for _, a := range d.Actions {
		switch a.Kind {
		case ActBootstrap, ActPromote:
			if a.Target != in.Primary {
				m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, d.Reason, string(a.Kind), "%s is the primary: %s", a.Target, d.Message)
			}
		case ActSwitchover:
			// kubectl dolphin switchover prints this note: how long writes were refused.
			m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, d.Reason, string(a.Kind),
				"%s is the primary: %s; writes were refused for %s (from fencing %s until %s was promoted and labelled primary)",
				a.Target, d.Message, cl.writesRefused.Round(time.Millisecond), a.From, a.Target)
		case ActFence, ActIsolate, ActClone, ActEvict:
			m.Recorder.Eventf(c, nil, corev1.EventTypeWarning, d.Reason, string(a.Kind), "%s: %s", a.Target, d.Message)
		case ActEnsureApplication:
			m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonApplicationAccount, string(a.Kind),
				"Account %s has every privilege on database %s (created if missing) and the password of Secret %s",
				cl.application.User, cl.application.Database, resources.ApplicationSecretName(c))
		case ActRetainPasswords, ActDiscardOldPasswords:
			m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonPasswordRotation, string(a.Kind),
				"On %s: %s (rotation %s)", a.Target, rotationNote[a.Kind], cl.rotation.Ask)
		case ActNarrowAccounts:
			m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonAccountsNarrowed, string(a.Kind),
				"On %s: root connects over the local socket only; %s has the operator's privileges only; %s manages the application's account",
				a.Target, resources.AdminUser, resources.UsersUser)
		}
	}
	if d.State == StateLost || d.State == StateErrant || d.State == StateFailoverBlocked {
		// Once per episode, not once a pass: the loop looks every second.
		m.mu.Lock()
		if m.announced == nil {
			m.announced = map[string]string{}
		}
		again := m.announced[clusterKey(c)] == d.Reason
		m.announced[clusterKey(c)] = d.Reason
		m.mu.Unlock()
		if !again {
			m.Recorder.Eventf(c, nil, corev1.EventTypeWarning, d.Reason, "Decide", "%s", d.Message)
		}
		return
	}
	m.mu.Lock()
	delete(m.announced, clusterKey(c))
	m.mu.Unlock()
}

// changedState says whether a pass's decision is worth a log line: it acts, or its state
// or reason differs from the last one logged for the cluster (a healthy cluster's first
// pass after a bad state is logged once too).
func (m *Manager) changedState(c *mysqlv1beta1.MySQLCluster, d Decision) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.logged == nil {
		m.logged = map[string]string{}
	}
	key, now := clusterKey(c), string(d.State)+"/"+d.Reason
	last, seen := m.logged[key]
	m.logged[key] = now
	if len(d.Actions) > 0 {
		return true
	}
	if !seen {
		return d.State != StateHealthy
	}
	return last != now
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func clusterKey(c *mysqlv1beta1.MySQLCluster) string { return c.Namespace + "/" + c.Name + "/" }

func describe(as []Action) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		s := string(a.Kind) + " " + a.Target
		if a.From != "" {
			s += " from " + a.From
		}
		out = append(out, s)
	}
	return out
}
