package controllers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

// present returns o, or nil when o is a nil pointer: builders return a typed nil for
// "must not exist".
func present[T client.Object](o T) client.Object {
	if v := reflect.ValueOf(o); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return o
}

// applyOrDelete applies desired, or deletes the object named like gone when desired is
// nil (a builder's way of saying "must not exist"), and records what changed.
func (r *MySQLClusterReconciler) applyOrDelete(ctx context.Context, st *state, desired, gone client.Object) error {
	a := r.applier()
	if desired == nil {
		deleted, err := a.Delete(ctx, st.cluster, gone)
		if deleted {
			st.changed = append(st.changed, "deleted "+kindName(gone))
		}
		return err
	}
	applied, err := a.Apply(ctx, st.cluster, desired)
	if applied {
		st.changed = append(st.changed, "applied "+kindName(desired))
	}
	return err
}

// reconcileCredentials makes the passwords Secret; passwords are generated once, and again
// by a rotation of the operator's accounts asked for on the cluster, one step a pass
// (resources.CredentialsSecret).
func (r *MySQLClusterReconciler) reconcileCredentials(ctx context.Context, st *state) error {
	c := st.cluster
	existing, err := r.existingSecret(ctx, c.Namespace, resources.CredentialsSecretName(c))
	if err != nil {
		return err
	}
	progress, err := r.rotationProgress(ctx, c, existing)
	if err != nil {
		return err
	}
	s, err := resources.CredentialsSecret(c, existing, nil, progress, r.now())
	if err != nil {
		return fmt.Errorf("while generating passwords: %w", err)
	}
	st.credentials, st.rotation = s.Annotations[resources.AnnotationRotatedFor], resources.CredentialsRotation(s)
	// Root's and the probe's passwords are never rotated: they date from the Secret.
	made, rotated := resources.PasswordsSetAt(nil, existing, r.now()), resources.PasswordsSetAt(s, existing, r.now())
	for _, account := range resources.CredentialAccounts {
		st.setPassword(account, made)
	}
	for _, account := range resources.RotatedAccounts {
		st.setPassword(account, rotated)
	}
	return r.writeCredentials(ctx, st, s, existing)
}

// reconcileApplicationSecret makes spec.application's Secret; its password is generated
// once, and again on each rotation asked for (the pass comes back to drop the previous
// one when its retention ends). Without spec.application a Secret made before is left as it is: the account stays
// in MySQL (the operator never drops it), and so does its password.
func (r *MySQLClusterReconciler) reconcileApplicationSecret(ctx context.Context, st *state) error {
	c := st.cluster
	if c.Spec.Application == nil {
		return nil
	}
	existing, err := r.existingSecret(ctx, c.Namespace, resources.ApplicationSecretName(c))
	if err != nil {
		return err
	}
	s, discardAt, err := resources.ApplicationSecret(c, existing, nil, r.now())
	st.discardAt = discardAt
	if err != nil {
		return fmt.Errorf("while generating the application's password: %w", err)
	}
	st.setPassword(c.Spec.Application.ApplicationUser(), resources.PasswordsSetAt(s, existing, r.now()))
	return r.applyOrDelete(ctx, st, s, nil)
}

// reconcileTLS issues, keeps or renews the CA and server certificate; with TLS off or a
// user-provided certificate, the operator-issued Secrets are removed.
func (r *MySQLClusterReconciler) reconcileTLS(ctx context.Context, st *state) error {
	c := st.cluster
	ca, err := r.existingSecret(ctx, c.Namespace, resources.CASecretName(c))
	if err != nil {
		return err
	}
	server, err := r.existingSecret(ctx, c.Namespace, resources.IssuedTLSSecretName(c))
	if err != nil {
		return err
	}
	res, err := resources.TLSSecrets(c, ca, server, r.now(), nil)
	if err != nil {
		return fmt.Errorf("while issuing certificates: %w", err)
	}
	st.renewAt = res.RenewAt
	gone := func(name string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	}
	if err := r.applyOrDelete(ctx, st, present(res.CA), gone(resources.CASecretName(c))); err != nil {
		return err
	}
	return r.applyOrDelete(ctx, st, present(res.Server), gone(resources.IssuedTLSSecretName(c)))
}

func (r *MySQLClusterReconciler) existingSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("while reading Secret %s: %w", name, err)
	}
	return s, nil
}

// reconcileConfig writes my.cnf and remembers its hash for the pod template.
func (r *MySQLClusterReconciler) reconcileConfig(ctx context.Context, st *state) error {
	cm := resources.ConfigMap(st.cluster)
	st.configHash = resources.ConfigHash(st.cluster)
	return r.applyOrDelete(ctx, st, cm, nil)
}

// reconcileServices makes the headless, primary, replicas and (with the exporter) metrics Services.
func (r *MySQLClusterReconciler) reconcileServices(ctx context.Context, st *state) error {
	c := st.cluster
	for _, s := range []*corev1.Service{resources.HeadlessService(c), resources.PrimaryService(c), resources.ReplicasService(c)} {
		if err := r.applyOrDelete(ctx, st, s, nil); err != nil {
			return err
		}
	}
	return r.applyOrDelete(ctx, st, present(resources.MetricsService(c)),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.MetricsServiceName(c)}})
}

// reconcileStatefulSet applies the StatefulSet, keeping its immutable claim templates and,
// across an operator upgrade, the pod template its instances run (holdTemplate), and
// grows the data volumes when spec.storage.size grew.
func (r *MySQLClusterReconciler) reconcileStatefulSet(ctx context.Context, st *state) error {
	c := st.cluster
	existing := &appsv1.StatefulSet{}
	var live *appsv1.StatefulSet
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, existing); err == nil {
		live = existing
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("while reading the StatefulSet: %w", err)
	}
	in := resources.StatefulSetInput{Images: r.Images, ConfigHash: st.configHash, ClaimTemplates: existing.Spec.VolumeClaimTemplates,
		Credentials: st.credentials}
	if have := existing.Spec.Replicas; have != nil && *have > *c.Spec.Instances {
		// Shrinking: the topology manager's latest report says where the primary is.
		in.Replicas, st.scaleDownHeld = scaleDownReplicas(c, *have, r.Topology.Observe(ctx, c))
	}
	sts := resources.StatefulSet(c, in)
	hold := holdTemplate(sts, live, c.Spec.UpdatePolicy.OperatorUpgrade)
	st.template = &hold
	if errs := refusedChanges(c, sts, live); len(errs) > 0 {
		// The webhook refuses these; a spec that reached the API server around it (webhooks
		// off or bypassed) is not applied either.
		st.invalid = fmt.Errorf("the cluster's spec is invalid: %w", errs.ToAggregate())
		return reconcile.TerminalError(st.invalid)
	}
	if err := r.applyOrDelete(ctx, st, sts, nil); err != nil {
		return err
	}
	if err := r.growVolumes(ctx, st); err != nil {
		return err
	}
	return r.observeStatefulSet(ctx, st)
}

// refusedChanges are the webhook's change checks the reconciler can make itself, against
// what runs rather than a stored object: a pod template that would run an older MySQL
// release than status.version, and a scale-down below the semi-sync minimum.
func refusedChanges(c *mysqlv1beta1.MySQLCluster, desired, live *appsv1.StatefulSet) field.ErrorList {
	if live == nil {
		return nil
	}
	var errs field.ErrorList
	if img := resources.MySQLImageOf(desired.Spec.Template.Spec.Containers); img != resources.MySQLImageOf(live.Spec.Template.Spec.Containers) {
		to, ok := resources.ImageRelease(img)
		errs = append(errs, c.ValidateRelease(c, to, ok)...)
	}
	if have := live.Spec.Replicas; have != nil && *have > *c.Spec.Instances {
		errs = append(errs, c.ValidateScaleDownFrom(*have)...)
	}
	return errs
}

// scaleDownReplicas is how many pods the StatefulSet keeps while spec.instances shrinks from
// have: all of them until the primary runs on an instance the scale-down keeps (the topology
// manager hands over from a leaving primary first), then spec.instances. Without a topology
// manager nobody can move the primary, and the StatefulSet shrinks at once. The message says
// what a held scale-down waits for ("" when not held).
func scaleDownReplicas(c *mysqlv1beta1.MySQLCluster, have int32, rep topology.Report) (*int32, string) {
	want := *c.Spec.Instances
	if !rep.Managed {
		return &want, ""
	}
	if i, ok := c.InstanceOrdinal(rep.CurrentPrimary); ok && i < int(want) {
		return &want, ""
	}
	if rep.CurrentPrimary == "" {
		return &have, fmt.Sprintf("the scale-down to %d instances waits for a primary", want)
	}
	return &have, fmt.Sprintf("the scale-down to %d instances waits for primary %s to hand over to an instance it keeps", want, rep.CurrentPrimary)
}

// growVolumes raises each data claim's request to spec.storage.size (never lowers it) where
// the claim's StorageClass allows expansion (growPlan), and records what it cannot grow and
// what its provisioner is still growing.
func (r *MySQLClusterReconciler) growVolumes(ctx context.Context, st *state) error {
	c := st.cluster
	var claims []corev1.PersistentVolumeClaim
	classes := map[string]*storagev1.StorageClass{}
	for i := range int(*c.Spec.Instances) {
		pvc := &corev1.PersistentVolumeClaim{}
		name := resources.DataClaimName(c, i)
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("while reading claim %s: %w", name, err)
		}
		claims = append(claims, *pvc)
		class := ptr.Deref(pvc.Spec.StorageClassName, "")
		have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if _, seen := classes[class]; seen || class == "" || have.Cmp(*c.Spec.Storage.Size) >= 0 {
			continue // a claim as large as the spec needs no class (the settled case)
		}
		sc := &storagev1.StorageClass{}
		if err := r.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("while reading StorageClass %s: %w", class, err)
			}
			sc = nil
		}
		classes[class] = sc
	}
	plan := growPlan(*c.Spec.Storage.Size, claims, classes)
	st.volumesRefused, st.volumesGrowing = plan.refused, plan.growing
	for _, i := range plan.grow {
		pvc := &claims[i]
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *c.Spec.Storage.Size
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("while growing claim %s to %s: %w", pvc.Name, c.Spec.Storage.Size.String(), err)
		}
		st.changed = append(st.changed, "grew claim "+pvc.Name)
	}
	return nil
}

// volumeGrowth is what growVolumes does: grow the claims at these indexes; refused says
// why others cannot grow, growing which bound claims' provisioners have not yet grown.
type volumeGrowth struct {
	grow             []int
	refused, growing string
}

// growPlan decides, purely, which claims to grow to want: those asking for less, whose
// StorageClass (by name; nil when it does not exist) allows expansion. A claim without a
// class, or of a class that does not allow it, is refused, naming the class.
func growPlan(want resource.Quantity, claims []corev1.PersistentVolumeClaim, classes map[string]*storagev1.StorageClass) volumeGrowth {
	var g volumeGrowth
	var refused, growing []string
	for i, pvc := range claims {
		have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if have.Cmp(want) >= 0 {
			if got, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && pvc.Status.Phase == corev1.ClaimBound && got.Cmp(have) < 0 {
				growing = append(growing, fmt.Sprintf("%s (%s of %s)", pvc.Name, got.String(), have.String()))
			}
			continue
		}
		class := ptr.Deref(pvc.Spec.StorageClassName, "")
		switch sc := classes[class]; {
		case class == "":
			refused = append(refused, pvc.Name+" has no StorageClass")
		case sc == nil:
			refused = append(refused, fmt.Sprintf("%s's StorageClass %s does not exist", pvc.Name, class))
		case sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion:
			refused = append(refused, fmt.Sprintf("%s's StorageClass %s does not allow volume expansion", pvc.Name, class))
		default:
			g.grow = append(g.grow, i)
		}
	}
	if len(refused) > 0 {
		g.refused = fmt.Sprintf("spec.storage.size %s cannot be applied: %s; the claims keep their size",
			want.String(), strings.Join(refused, ", "))
	}
	if len(growing) > 0 {
		g.growing = "waiting for the volumes to grow: " + strings.Join(growing, ", ")
	}
	return g
}

func (r *MySQLClusterReconciler) observeStatefulSet(ctx context.Context, st *state) error {
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: st.cluster.Namespace, Name: resources.StatefulSetName(st.cluster)}, sts)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("while reading the StatefulSet: %w", err)
	}
	st.statefulSet = sts
	return nil
}

func (r *MySQLClusterReconciler) reconcilePDB(ctx context.Context, st *state) error {
	c := st.cluster
	return r.applyOrDelete(ctx, st, present(resources.PodDisruptionBudget(c)),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.PodDisruptionBudgetName(c)}})
}

// reconcileNetworkPolicy keeps the instances' NetworkPolicy (spec.networkPolicy), or
// deletes it when disabled.
func (r *MySQLClusterReconciler) reconcileNetworkPolicy(ctx context.Context, st *state) error {
	c := st.cluster
	return r.applyOrDelete(ctx, st, present(resources.NetworkPolicy(c, r.OperatorNamespace)),
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.NetworkPolicyName(c)}})
}

// reconcileBackup keeps the backup volume and the binary log archiver, creates the
// scheduled backups that are due, and deletes the backups retention expires. The CronJob earlier releases ran scheduled
// backups with is deleted: they are MySQLBackups now.
func (r *MySQLClusterReconciler) reconcileBackup(ctx context.Context, st *state) error {
	c := st.cluster
	legacy := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.BackupClaimName(c)}}
	if err := r.applyOrDelete(ctx, st, nil, legacy); err != nil {
		return err
	}
	// A backup volume holds backups: it outlives a removed schedule and goes only with
	// the cluster (deletion policy Delete).
	if claim := resources.BackupClaim(c); claim != nil {
		if err := r.applyOrDelete(ctx, st, claim, nil); err != nil {
			return err
		}
	}
	list := &mysqlv1beta1.MySQLBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return fmt.Errorf("while listing backups: %w", err)
	}
	for _, b := range list.Items {
		if b.Spec.Cluster == c.Name && b.DeletionTimestamp.IsZero() {
			st.backups = append(st.backups, b)
		}
	}
	st.backupsListed = true
	if err := r.reconcileArchive(ctx, st); err != nil {
		return err
	}
	if err := r.reconcileVerify(ctx, st); err != nil {
		return err
	}
	if c.Spec.Backup == nil {
		return nil
	}
	if err := r.schedule(ctx, st); err != nil {
		return err
	}
	for _, name := range expired(st.backups, c.Spec.Backup.Retention, r.now()) {
		b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
		if err := r.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("while deleting expired backup %s: %w", name, err)
		}
		st.changed = append(st.changed, "deleted expired MySQLBackup "+name)
	}
	return nil
}

// schedule creates the scheduled backup that is due, if any, and notes when the next is.
func (r *MySQLClusterReconciler) schedule(ctx context.Context, st *state) error {
	c := st.cluster
	if c.Spec.Backup.Schedule == "" {
		return nil // suspended without a schedule (validation allows no other): nothing is due
	}
	sched, err := mysqlv1beta1.ParseSchedule(c.Spec.Backup.Schedule)
	if err != nil {
		return fmt.Errorf("spec.backup.schedule: %w", err) // validation refuses it first
	}
	// Due times are in UTC. A schedule seen for the first time runs from now on; after
	// that, from the last due time it reached or the newest scheduled backup's.
	in := scheduleInput{now: r.now().UTC(), schedule: sched, since: r.now().UTC()}
	if last := c.Status.Backup.LastScheduleTime; last != nil {
		in.since = last.UTC()
	}
	for _, b := range st.backups {
		due, ok := scheduledAt(&b)
		if !ok {
			continue
		}
		if due.After(in.since) {
			in.since = due
		}
		if !done(&b) {
			in.running = true
		}
	}
	st.lastScheduled = in.since
	if c.Spec.Backup.Suspend {
		// Due times pass unrun while suspended: resuming does not catch up on them.
		if due := decideSchedule(in).due; !due.IsZero() {
			st.lastScheduled = due
		}
		return nil
	}
	d := decideSchedule(in)
	st.nextBackup = d.next
	if d.due.IsZero() {
		return nil
	}
	st.lastScheduled = d.due
	b := resources.ScheduledBackup(c, d.due)
	if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("while creating scheduled backup %s: %w", b.Name, err)
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonBackupPending, "Backup", "scheduled backup %s created", b.Name)
	st.backups = append(st.backups, *b)
	st.changed = append(st.changed, "created MySQLBackup "+b.Name)
	return nil
}

// reconcileMonitoring makes the ServiceMonitor and PrometheusRule when the Prometheus
// Operator's CRDs exist; without them there is nothing to do and nothing is wrong (CRDs
// installed later are seen within missingKindRecheck).
func (r *MySQLClusterReconciler) reconcileMonitoring(ctx context.Context, st *state) error {
	c := st.cluster
	for gvk, desired := range map[schema.GroupVersionKind]*unstructured.Unstructured{
		resources.ServiceMonitorGVK: resources.ServiceMonitor(c),
		resources.PrometheusRuleGVK: resources.PrometheusRule(c),
	} {
		if served, err := r.kinds.served(r.RESTMapper(), gvk, r.now()); err != nil {
			return err
		} else if !served {
			continue
		}
		gone := &unstructured.Unstructured{}
		gone.SetGroupVersionKind(gvk)
		gone.SetNamespace(c.Namespace)
		gone.SetName(resources.MonitoringName(c))
		if err := r.applyOrDelete(ctx, st, present(desired), gone); err != nil {
			return err
		}
	}
	return nil
}

// reconcileTopology hands the cluster to the topology manager and takes its latest report.
func (r *MySQLClusterReconciler) reconcileTopology(ctx context.Context, st *state) error {
	st.topology = lastKnown(st.cluster.Status, r.Topology.Observe(ctx, st.cluster))
	return nil
}

// lastKnown is the report the status is computed from. Until the topology manager's first
// pass over a cluster (an operator process that has just started, after an upgrade or a
// restart), its report knows nothing; the status then keeps what the last pass found, maybe
// an earlier process's, instead of blanking currentPrimary and turning Ready False for the
// second until the pass ends. The first pass's report replaces it, and its change wakes a
// reconcile.
func lastKnown(old mysqlv1beta1.MySQLClusterStatus, r topology.Report) topology.Report {
	if !r.Managed || !r.Observed.IsZero() || old.CurrentPrimary == "" {
		return r
	}
	c := meta.FindStatusCondition(old.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
	if c == nil || c.Status == metav1.ConditionUnknown {
		return r
	}
	return topology.Report{Managed: true, CurrentPrimary: old.CurrentPrimary,
		Healthy: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
}

func kindName(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.TypeOf(o).Elem().Name()
	}
	return kind + " " + o.GetName()
}

func (r *MySQLClusterReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// scheduledAt is the due time a scheduled backup was created for.
func scheduledAt(b *mysqlv1beta1.MySQLBackup) (time.Time, bool) {
	v, ok := b.Annotations[resources.AnnotationScheduledAt]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
