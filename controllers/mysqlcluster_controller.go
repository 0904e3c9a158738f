package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/apply"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/internal/topology"
)

// MySQLClusterReconciler turns a MySQLCluster into running Kubernetes objects and reports
// what it sees. The order of its steps is in docs/design/reconcile.md.
type MySQLClusterReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder recorder.EventRecorder
	Images   resources.Images
	// OperatorImage is the image restore pods take the operator's binary from; empty when
	// unknown (a restore then cannot run).
	OperatorImage string
	Topology      TopologyManager
	// MaxConcurrentReconciles is how many clusters are reconciled at once (default 1).
	MaxConcurrentReconciles int
	// Now is the clock (certificates' renewal); time.Now when nil.
	Now func() time.Time
	// Watchdog tracks the reconciles in flight for the liveness check (none when nil).
	Watchdog *Watchdog
	// OperatorNamespace is where the operator's pods run, which the instances'
	// NetworkPolicy admits; empty when it runs outside the cluster (no policy is made).
	OperatorNamespace string

	archives archiveReads
	kinds    optionalKinds
	warned   warnings
}

// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlbackups,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the steps for one cluster. It is level-triggered: every pass computes the
// whole desired state from the cluster as it is now.
func (r *MySQLClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Watchdog.Start("MySQLCluster " + req.String())()
	log := logf.FromContext(ctx)
	c := &mysqlv1beta1.MySQLCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, c)
	}
	if !controllerutil.ContainsFinalizer(c, mysqlv1beta1.ClusterFinalizer) {
		patch := client.MergeFrom(c.DeepCopy())
		controllerutil.AddFinalizer(c, mysqlv1beta1.ClusterFinalizer)
		if err := r.Patch(ctx, c, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("while adding the finalizer: %w", err)
		}
	}
	observed := c.DeepCopy()
	if set := c.Default(); len(set) > 0 {
		log.V(1).Info("Applied defaults the API server did not", "fields", set)
	}
	st := &state{cluster: c}
	result, stepErr := r.runSteps(ctx, st)
	metrics.SetPasswords(c, st.passwordsSetAt)
	if st.backupsListed {
		recordBackupMetrics(c, st.backups)
		recordArchiveMetrics(c, st.archive)
		recordVerifyMetrics(c, verificationStatus(c.Status.Backup.Verification, st.verify))
		recordScheduleMetrics(c, r.now())
	}
	if err := r.writeStatus(ctx, observed, st, stepErr); err != nil {
		return ctrl.Result{}, errors.Join(stepErr, err)
	}
	if stepErr != nil {
		if apierrors.IsConflict(stepErr) {
			return ctrl.Result{RequeueAfter: time.Second}, nil // a conflict is a retry, not an error
		}
		return ctrl.Result{}, stepErr
	}
	return result, nil
}

// state carries what one pass learns from step to step.
type state struct {
	cluster     *mysqlv1beta1.MySQLCluster
	configHash  string
	statefulSet *appsv1.StatefulSet
	topology    topology.Report
	// roll is what the roll step decided (nil before it ran).
	roll *rollPlan
	// template says whether the StatefulSet keeps a pod template an earlier operator
	// built (nil before the StatefulSet step ran).
	template *templateHold
	// scaleDownHeld says what a held scale-down waits for ("" when none is held).
	scaleDownHeld string
	// volumesRefused says why spec.storage.size cannot be applied to every claim,
	// volumesGrowing which claims their provisioner is still growing ("" when none).
	volumesRefused, volumesGrowing string
	changed                        []string
	invalid                        error
	renewAt                        time.Time
	// discardAt is when the application Secret's previous password goes (zero: none).
	discardAt time.Time
	// backups are the cluster's MySQLBackups (not being deleted); nextBackup is when
	// the schedule is due next (zero: no schedule).
	backups       []mysqlv1beta1.MySQLBackup
	backupsListed bool
	nextBackup    time.Time
	// lastScheduled is the last due time the schedule reached (zero: no schedule).
	lastScheduled time.Time
	// restore is what the restore step learned (nil: no spec.bootstrap.fromBackup).
	restore *restoreState
	// archive is what the backup step learned of the binary log archive (nil: none).
	archive *archiveObservation
	// verify is what the backup step learned of restore verification (nil: none).
	verify *verifyObservation
	// credentials is the last rotation of the operator's passwords the credentials Secret
	// answered, for the pod templates; rotation is the one in progress (none: zero).
	credentials string
	rotation    resources.Rotation
	// passwordsSetAt is when each account's password was set, as the Secrets' steps read
	// it (dolphin_cluster_password_set_timestamp_seconds).
	passwordsSetAt map[string]time.Time
}

func (st *state) setPassword(account string, at time.Time) {
	if st.passwordsSetAt == nil {
		st.passwordsSetAt = map[string]time.Time{}
	}
	st.passwordsSetAt[account] = at
}

// step is one stage of a pass.
type step struct {
	name string
	run  func(context.Context, *state) error
}

// runSteps runs the steps in order and stops at the first error.
func (r *MySQLClusterReconciler) runSteps(ctx context.Context, st *state) (ctrl.Result, error) {
	if err := validate(st.cluster); err != nil {
		st.invalid = err
		if r.warned.due(st.cluster.UID, mysqlv1beta1.ReasonInvalidSpec+"/"+err.Error(), r.now()) {
			r.Recorder.Eventf(st.cluster, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonInvalidSpec, "Validate", "%v", err)
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if st.cluster.Spec.Paused {
		r.Topology.Observe(ctx, st.cluster) // so that its loop leaves the cluster alone too
		return ctrl.Result{}, r.observeStatefulSet(ctx, st)
	}
	steps := []step{
		{"credentials", r.reconcileCredentials},
		{"application secret", r.reconcileApplicationSecret},
		{"tls", r.reconcileTLS},
		{"config", r.reconcileConfig},
		{"services", r.reconcileServices},
		{"restore", r.reconcileRestore},
		{"statefulset", r.reconcileStatefulSet},
		{"disruption budget", r.reconcilePDB},
		{"network policy", r.reconcileNetworkPolicy},
		{"backup", r.reconcileBackup},
		{"monitoring", r.reconcileMonitoring},
		{"topology", r.reconcileTopology},
		{"roll", r.reconcileRoll},
	}
	for _, s := range steps {
		if err := s.run(ctx, st); err != nil {
			if !apierrors.IsConflict(err) && r.warned.due(st.cluster.UID, mysqlv1beta1.ReasonApplyFailed+"/"+s.name, r.now()) {
				r.Recorder.Eventf(st.cluster, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonApplyFailed,
					"Reconcile", "Step %s failed: %v", s.name, err)
			}
			return ctrl.Result{}, fmt.Errorf("step %s: %w", s.name, err)
		}
		if st.restore != nil && st.restore.hold {
			// No instance starts before its data is in place.
			return r.requeueRestore(st), nil
		}
	}
	return r.requeue(st), nil
}

// requeue asks for the next pass when something is due: a certificate renewal, a
// scheduled backup, the next read of the binary log archive's index, the next step of a
// rotation of the operator's passwords. The topology
// manager's reports arrive through its Changes channel instead, and backups' progress
// through the watch on MySQLBackups.
func (r *MySQLClusterReconciler) requeue(st *state) ctrl.Result {
	var after time.Duration
	due := []time.Time{st.renewAt, st.nextBackup, st.discardAt}
	if (st.roll != nil && st.roll.step != "") || st.scaleDownHeld != "" {
		due = append(due, r.now().Add(rollRecheck))
	}
	if st.rotation.Phase != "" {
		due = append(due, r.now().Add(rotationRecheck))
	}
	if st.archive != nil {
		due = append(due, st.archive.nextRead)
	}
	if st.verify != nil {
		due = append(due, st.verify.next)
	}
	for _, at := range due {
		if at.IsZero() {
			continue
		}
		if d := max(time.Until(at), time.Second); after == 0 || d < after {
			after = d
		}
	}
	return ctrl.Result{RequeueAfter: after}
}

// requeueRestore asks for the next pass of a restore waiting for its backup (or for the
// store it is in to answer); one that waits for its Job is brought back by the Job's
// changes, and one that failed by a change of the spec or the Job's deletion.
func (r *MySQLClusterReconciler) requeueRestore(st *state) ctrl.Result {
	if st.restore.failed || st.restore.cond.Reason == mysqlv1beta1.ReasonRestoring {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: restoreRecheck}
}

func (r *MySQLClusterReconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, Scheme: r.Scheme}
}

// SetupWithManager watches clusters (spec, metadata and deletion, not their own status
// writes) and every kind of child they own.
func (r *MySQLClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Topology == nil {
		r.Topology = NoTopology{}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&mysqlv1beta1.MySQLCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)})
	if ch := r.Topology.Changes(); ch != nil {
		b = b.WatchesRawSource(source.Channel(ch, &handler.EnqueueRequestForObject{}))
	}
	// The children's events queue after the clusters' own (priorityChildChanged).
	owner := &mysqlv1beta1.MySQLCluster{}
	for _, o := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}, &corev1.Service{},
		&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.PersistentVolumeClaim{}, &policyv1.PodDisruptionBudget{},
		&batchv1.Job{}, &networkingv1.NetworkPolicy{}} {
		b = b.Watches(o, ownedBy(mgr.GetScheme(), mgr.GetRESTMapper(), owner))
	}
	return b.
		Watches(&mysqlv1beta1.MySQLBackup{}, handler.EnqueueRequestsFromMapFunc(backupCluster)).
		Named("mysqlcluster").
		Complete(r)
}

// backupCluster maps a MySQLBackup to the cluster it backs up: the cluster's status
// reports its backups.
func backupCluster(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*mysqlv1beta1.MySQLBackup)
	if !ok || b.Spec.Cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster}}}
}
