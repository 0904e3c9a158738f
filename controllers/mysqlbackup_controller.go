package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/apply"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// MySQLBackupReconciler runs each MySQLBackup once, as a Job, and reports its outcome.
//
// Invariants: a backup's phase only moves forwards (Pending → Running → Completed |
// Failed); every run reaches Completed or Failed, within its timeout (the Job's deadline)
// or at once when it cannot start; a backup is Completed only with the manifest its pod
// reported, so with a size, a SHA-256 and a GTID set; a backup completed in S3 carries
// BackupDataFinalizer before its status says Completed, so its data goes with it.
type MySQLBackupReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder recorder.EventRecorder
	Images   resources.Images
	// OperatorImage is the image backup pods take the operator's binary from; empty when
	// the operator could not learn it (backups then fail, saying so).
	OperatorImage string
	// APIReader reads past the informer cache (the manager's API reader); the Client
	// when nil. A Job the cache does not hold yet is not a deleted one.
	APIReader client.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Watchdog tracks the reconciles in flight for the liveness check (none when nil).
	Watchdog *Watchdog
}

// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlbackups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete

// pendingRecheck is how often a backup waiting for a source looks again.
const pendingRecheck = 5 * time.Second

// Reconcile moves one backup on: starts its Job, or reads the Job's outcome.
func (r *MySQLBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Watchdog.Start("MySQLBackup " + req.String())()
	b := &mysqlv1beta1.MySQLBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.deleteData(ctx, b)
	}
	if done(b) {
		return ctrl.Result{}, nil
	}
	observed := b.DeepCopy()
	out, err := r.step(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if holdsData(out.status) {
		if err := r.keepData(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
		observed = b.DeepCopy()
	}
	b.Status = out.status
	b.Status.ObservedGeneration = b.Generation
	if equality.Semantic.DeepEqual(observed.Status, b.Status) {
		return ctrl.Result{RequeueAfter: out.requeue}, nil // nothing new: no write
	}
	if err := r.Status().Patch(ctx, b, client.MergeFrom(observed)); err != nil {
		return ctrl.Result{}, fmt.Errorf("while writing the backup's status: %w", err)
	}
	r.announce(observed, b)
	return ctrl.Result{RequeueAfter: out.requeue}, nil
}

func done(b *mysqlv1beta1.MySQLBackup) bool {
	return b.Status.Phase == mysqlv1beta1.BackupPhaseCompleted || b.Status.Phase == mysqlv1beta1.BackupPhaseFailed
}

// outcome is a pass's new status and when to look again (0: on the next event).
type outcome struct {
	status  mysqlv1beta1.MySQLBackupStatus
	requeue time.Duration
}

// step computes the backup's next status, starting its Job when it has none.
func (r *MySQLBackupReconciler) step(ctx context.Context, b *mysqlv1beta1.MySQLBackup) (outcome, error) {
	st := *b.Status.DeepCopy()
	if st.Phase == "" {
		st.Phase = mysqlv1beta1.BackupPhasePending
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
	switch {
	case apierrors.IsNotFound(err) && st.Phase == mysqlv1beta1.BackupPhaseRunning:
		// The pass right after the one that created the Job often reads a cache that
		// has not seen it yet: only the API server can say it is gone.
		err = r.liveReader().Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
		if apierrors.IsNotFound(err) {
			return outcome{status: failed(st, r.now(), mysqlv1beta1.ReasonBackupPodFailed, "its Job was deleted before it ended")}, nil
		}
	case apierrors.IsNotFound(err):
		return r.start(ctx, b, st)
	}
	if err != nil {
		return outcome{}, fmt.Errorf("while reading the backup's Job: %w", err)
	}
	if !metav1.IsControlledBy(job, b) {
		return outcome{status: failed(st, r.now(), mysqlv1beta1.ReasonBackupPodFailed,
			fmt.Sprintf("Job %s exists and is not this backup's", job.Name))}, nil
	}
	return r.observe(ctx, b, st, job)
}

// start creates the backup's Job, or fails the backup when it cannot run, or leaves it
// Pending while its cluster has no instance to read from (until its timeout).
func (r *MySQLBackupReconciler) start(ctx context.Context, b *mysqlv1beta1.MySQLBackup, st mysqlv1beta1.MySQLBackupStatus) (outcome, error) {
	now := r.now()
	c := &mysqlv1beta1.MySQLCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster}, c); apierrors.IsNotFound(err) {
		return outcome{status: failed(st, now, mysqlv1beta1.ReasonClusterNotFound, fmt.Sprintf("MySQLCluster %q does not exist", b.Spec.Cluster))}, nil
	} else if err != nil {
		return outcome{}, fmt.Errorf("while reading the cluster: %w", err)
	}
	target := b.Spec.Target
	if target == nil && c.Spec.Backup != nil {
		target = c.Spec.Backup.Target
	}
	if target == nil {
		return outcome{status: failed(st, now, mysqlv1beta1.ReasonNoBackupTarget,
			"neither spec.target nor the cluster's spec.backup.target says where the backup goes")}, nil
	}
	if t := b.Spec.Target; t != nil && t.PVC != nil && t.PVC.ClaimName == "" {
		// Only the cluster's own backup volume is made by the operator.
		return outcome{status: failed(st, now, mysqlv1beta1.ReasonNoBackupTarget,
			"spec.target.pvc must name an existing claim (claimName)")}, nil
	}
	if r.OperatorImage == "" {
		return outcome{status: failed(st, now, mysqlv1beta1.ReasonNoOperatorImage,
			"the operator does not know its own image, which backup pods run (set DOLPHIN_OPERATOR_IMAGE)")}, nil
	}
	source, why, err := r.pickSource(ctx, c)
	if err != nil {
		return outcome{}, err
	}
	if source == "" {
		if now.Sub(b.CreationTimestamp.Time) > resources.BackupTimeout(b) {
			return outcome{status: failed(st, now, mysqlv1beta1.ReasonNoBackupSource, why)}, nil
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: mysqlv1beta1.BackupConditionComplete,
			Status: metav1.ConditionFalse, Reason: mysqlv1beta1.ReasonNoBackupSource, Message: why, ObservedGeneration: b.Generation})
		return outcome{status: st, requeue: pendingRecheck}, nil
	}
	job := resources.BackupJob(resources.BackupRun{Backup: b, Cluster: c, Target: target, Source: source,
		OperatorImage: r.OperatorImage, Images: r.Images})
	if _, err := (&apply.Applier{Client: r.Client, Scheme: r.Scheme}).Apply(ctx, b, job); err != nil {
		return outcome{}, fmt.Errorf("while creating the backup's Job: %w", err)
	}
	st.Phase = mysqlv1beta1.BackupPhaseRunning
	st.Method = resources.BackupMethod(b)
	st.Source, st.Job, st.StartedAt, st.Target = source, job.Name, &metav1.Time{Time: now}, target.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: mysqlv1beta1.BackupConditionComplete,
		Status: metav1.ConditionFalse, Reason: mysqlv1beta1.ReasonBackupRunning,
		Message: fmt.Sprintf("Job %s reads %s", job.Name, source), ObservedGeneration: b.Generation})
	return outcome{status: st}, nil
}

// pickSource is the instance to read: a ready replica while the cluster reports its
// replication healthy (so that the primary serves on undisturbed), else the ready
// primary; "" and why when there is neither.
func (r *MySQLBackupReconciler) pickSource(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (string, string, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return "", "", fmt.Errorf("while listing the cluster's pods: %w", err)
	}
	healthy := meta.IsStatusConditionTrue(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy)
	var replicas []string
	primary := ""
	for _, p := range pods.Items {
		if !podReady(&p) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		switch resources.Role(p.Labels[resources.LabelRole]) {
		case resources.RoleReplica:
			replicas = append(replicas, p.Name)
		case resources.RolePrimary:
			primary = p.Name
		}
	}
	if healthy && len(replicas) > 0 {
		slices.Sort(replicas)
		return replicas[len(replicas)-1], "", nil
	}
	if primary != "" {
		return primary, "", nil
	}
	return "", fmt.Sprintf("no instance of %s is ready to be read from (waiting up to the backup's timeout)", c.Name), nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *MySQLBackupReconciler) liveReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *MySQLBackupReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// failed is st ended as Failed with reason and message.
func failed(st mysqlv1beta1.MySQLBackupStatus, now time.Time, reason, message string) mysqlv1beta1.MySQLBackupStatus {
	st.Phase = mysqlv1beta1.BackupPhaseFailed
	st.CompletedAt = &metav1.Time{Time: now}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: mysqlv1beta1.BackupConditionComplete,
		Status: metav1.ConditionFalse, Reason: reason, Message: message})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: mysqlv1beta1.BackupConditionFailed,
		Status: metav1.ConditionTrue, Reason: reason, Message: message})
	return st
}

// completed is st ended as Completed with what the manifest says.
func completed(st mysqlv1beta1.MySQLBackupStatus, now time.Time, m *backup.Manifest) mysqlv1beta1.MySQLBackupStatus {
	st.Phase = mysqlv1beta1.BackupPhaseCompleted
	st.CompletedAt = &metav1.Time{Time: now}
	st.Size = resource.NewQuantity(m.Size, resource.BinarySI)
	st.Location, st.SHA256, st.GTIDSet = m.Location, m.SHA256, m.GTIDSet
	st.BinlogFile, st.BinlogPosition, st.MySQLVersion = m.BinlogFile, m.BinlogPosition, m.MySQLVersion
	msg := fmt.Sprintf("%d bytes at %s", m.Size, m.Location)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: mysqlv1beta1.BackupConditionComplete,
		Status: metav1.ConditionTrue, Reason: mysqlv1beta1.ReasonBackupCompleted, Message: msg})
	meta.RemoveStatusCondition(&st.Conditions, mysqlv1beta1.BackupConditionFailed)
	return st
}

// errNoReport: the pod ended without a result of its own.
var errNoReport = errors.New("no report")
