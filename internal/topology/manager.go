package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/controllers"
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

// Manager is the TopologyManager of the MySQLCluster reconciler.
type Manager struct {
	Client    client.Client
	Recorder  recorder.EventRecorder
	Addresses Addresses
	// Open connects to one instance; default mysql.Open. Tests substitute it.
	Open func(mysql.Config) (mysql.Instance, error)
	Now  func() time.Time

	mu    sync.Mutex
	conns map[string]mysql.Instance // by cluster key, instance, address and a hash of the credentials and CA
	down  map[string]time.Time      // by cluster key + instance: unreachable since
}

var _ controllers.TopologyManager = &Manager{}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// Reconcile gathers, decides and acts once, and reports the outcome.
func (m *Manager) Reconcile(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (controllers.TopologyStatus, error) {
	log := logf.FromContext(ctx)
	cl, err := m.load(ctx, c)
	if err != nil {
		// The credentials Secret or the pods are not there yet (the earlier steps create
		// them): report and look again, not an error.
		//nolint:nilerr // reported in the status instead
		return controllers.TopologyStatus{Managed: true, Reason: mysqlv1beta1.ReasonWaitingForInstances, Message: err.Error(),
			RequeueAfter: 2 * time.Second}, nil
	}
	in := m.gather(ctx, cl)
	d := Decide(in)
	if err := m.tidyNotes(ctx, cl, d); err != nil {
		return status(d), err
	}
	if len(d.Actions) > 0 || d.State != StateHealthy {
		log.Info("Topology", "state", d.State, "reason", d.Reason, "message", d.Message, "actions", describe(d.Actions))
	}
	// Demotions are labelled before acting: an old primary leaves the primary Service
	// before anyone else is promoted. Promotions are labelled after, once they happened.
	if err := m.label(ctx, cl, d.Roles, false); err != nil {
		return status(d), err
	}
	actErr := m.act(ctx, cl, d)
	if actErr == nil {
		if err := m.label(ctx, cl, d.Roles, true); err != nil {
			return status(d), err
		}
		m.announce(c, in, d)
	}
	return status(d), actErr
}

// Forget closes the cluster's connections.
func (m *Manager) Forget(_ context.Context, c *mysqlv1beta1.MySQLCluster) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := clusterKey(c)
	var errs []error
	for k, conn := range m.conns {
		if strings.HasPrefix(k, prefix) {
			errs = append(errs, conn.Close())
			delete(m.conns, k)
		}
	}
	for k := range m.down {
		if strings.HasPrefix(k, prefix) {
			delete(m.down, k)
		}
	}
	return errors.Join(errs...)
}

func status(d Decision) controllers.TopologyStatus {
	ts := controllers.TopologyStatus{Managed: true, Healthy: d.Healthy, Reason: d.Reason, Message: d.Message,
		RequeueAfter: d.RequeueAfter}
	if d.Roles[d.Primary] == resources.RolePrimary && d.State != StateLost {
		ts.CurrentPrimary = d.Primary
	}
	if ts.RequeueAfter == 0 || ts.RequeueAfter > PollInterval {
		ts.RequeueAfter = PollInterval
	}
	return ts
}

// cluster is what one pass works with.
type cluster struct {
	obj             *mysqlv1beta1.MySQLCluster
	names           []string
	pods            map[string]*corev1.Pod
	lease           *coordinationv1.Lease
	adminPassword   string
	replicaPassword string
	handles         map[string]mysql.Instance
	// failedPrimary is the primary the last failover replaced, until it replicates again.
	failedPrimary string
	// tlsCA verifies the instances' certificates; nil when the cluster has TLS off.
	tlsCA []byte
}

func (m *Manager) load(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (*cluster, error) {
	secret := &corev1.Secret{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CredentialsSecretName(c)}, secret); err != nil {
		return nil, fmt.Errorf("while reading the credentials: %w", err)
	}
	pods := &corev1.PodList{}
	if err := m.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, fmt.Errorf("while listing pods: %w", err)
	}
	cl := &cluster{obj: c, pods: map[string]*corev1.Pod{}, handles: map[string]mysql.Instance{},
		adminPassword:   string(secret.Data[resources.KeyAdminPassword]),
		replicaPassword: string(secret.Data[resources.KeyReplicationPassword])}
	for i := range pods.Items {
		cl.pods[pods.Items[i].Name] = &pods.Items[i]
	}
	for i := range *c.Spec.Instances {
		cl.names = append(cl.names, fmt.Sprintf("%s-%d", resources.StatefulSetName(c), i))
	}
	if tlsEnabled(cl) {
		tlsSecret := &corev1.Secret{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.TLSSecretName(c)}, tlsSecret); err != nil {
			return nil, fmt.Errorf("while reading the TLS Secret: %w", err)
		}
		if cl.tlsCA = tlsSecret.Data[resources.KeyCACert]; len(cl.tlsCA) == 0 {
			return nil, fmt.Errorf("TLS Secret %s has no %s to verify the instances with", tlsSecret.Name, resources.KeyCACert)
		}
	}
	lease := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: LeaseName(c)}, lease)
	switch {
	case err == nil:
		cl.lease = lease
		cl.failedPrimary = lease.Annotations[annotationFailedPrimary]
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("while reading the primary Lease: %w", err)
	}
	return cl, nil
}

// LeaseName is the Lease recording the cluster's primary.
func LeaseName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-primary" }

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
	if cl.recordedPrimary() == name && cl.lease != nil && maps.Equal(cl.lease.Annotations, annotations) {
		return nil
	}
	now := metav1.NewMicroTime(m.now())
	if cl.lease == nil {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: cl.obj.Namespace, Name: LeaseName(cl.obj),
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
		if promote != (role != resources.RoleNone) {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[resources.LabelRole] = string(role)
		if err := m.Client.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while labelling %s %s: %w", name, role, err)
		}
	}
	return nil
}

// announce emits an event when the primary changes or the state turns bad.
func (m *Manager) announce(c *mysqlv1beta1.MySQLCluster, in Input, d Decision) {
	if m.Recorder == nil {
		return
	}
	for _, a := range d.Actions {
		switch a.Kind {
		case ActBootstrap, ActPromote, ActSwitchover:
			if a.Target != in.Primary {
				m.Recorder.Eventf(c, nil, corev1.EventTypeNormal, d.Reason, string(a.Kind), "%s is the primary: %s", a.Target, d.Message)
			}
		case ActFence, ActIsolate, ActClone:
			m.Recorder.Eventf(c, nil, corev1.EventTypeWarning, d.Reason, string(a.Kind), "%s: %s", a.Target, d.Message)
		}
	}
	if d.State == StateLost || d.State == StateErrant {
		m.Recorder.Eventf(c, nil, corev1.EventTypeWarning, d.Reason, "Decide", "%s", d.Message)
	}
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
