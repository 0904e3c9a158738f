package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// validate refuses a spec the webhook would have refused: with webhooks off (or an
// object stored before a rule existed) the reconciler must not build from it.
func validate(c *mysqlv1beta1.MySQLCluster) error {
	if errs := c.Validate(); len(errs) > 0 {
		return fmt.Errorf("the cluster's spec is invalid: %w", errs.ToAggregate())
	}
	return nil
}

// writeStatus computes the status from what this pass observed and writes it only when
// it differs from the stored one. This reconciler is the only writer of the conditions.
func (r *MySQLClusterReconciler) writeStatus(ctx context.Context, observed *mysqlv1beta1.MySQLCluster, st *state, stepErr error) error {
	status := computeStatus(observed, st, stepErr)
	metrics.SetClusterStatus(observed, &status)
	if equality.Semantic.DeepEqual(observed.Status, status) {
		return nil
	}
	wasReady := meta.IsStatusConditionTrue(observed.Status.Conditions, mysqlv1beta1.ConditionReady)
	wasPending := meta.IsStatusConditionTrue(observed.Status.Conditions, mysqlv1beta1.ConditionPendingRestart)
	patch := client.MergeFrom(observed.DeepCopy())
	observed.Status = status
	if err := r.Status().Patch(ctx, observed, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("while writing status: %w", err))
	}
	if ready := meta.FindStatusCondition(status.Conditions, mysqlv1beta1.ConditionReady); ready != nil && !wasReady &&
		ready.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(observed, nil, corev1.EventTypeNormal, ready.Reason, "Reconcile", "%s", ready.Message)
	}
	if p := meta.FindStatusCondition(status.Conditions, mysqlv1beta1.ConditionPendingRestart); p != nil && !wasPending &&
		p.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(observed, nil, corev1.EventTypeNormal, p.Reason, "Reconcile", "%s", p.Message)
	}
	return nil
}

// rollout summarises the StatefulSet against the desired instance count.
type rollout struct {
	desired, replicas, ready int32
	rolledOut                bool
	scaling, rolling         bool
}

func observeRollout(sts *appsv1.StatefulSet, desired int32) rollout {
	ro := rollout{desired: desired}
	if sts == nil {
		ro.scaling = true
		return ro
	}
	s := sts.Status
	ro.replicas, ro.ready = s.Replicas, s.ReadyReplicas
	ro.scaling = s.Replicas != desired || (sts.Spec.Replicas != nil && *sts.Spec.Replicas != desired)
	ro.rolling = s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision
	ro.rolledOut = s.ObservedGeneration >= sts.Generation && !ro.scaling && !ro.rolling && s.UpdatedReplicas == desired
	return ro
}

// runningVersion is the release the rolled-out StatefulSet's mysqld image names, so that a
// series ("9.7") is recorded as the release it runs; an image that names none (a digest)
// leaves the version as the spec writes it.
func runningVersion(sts *appsv1.StatefulSet, c *mysqlv1beta1.MySQLCluster) string {
	if v, ok := resources.ImageRelease(resources.MySQLImageOf(sts.Spec.Template.Spec.Containers)); ok {
		return v.String()
	}
	return c.Spec.MySQL.Version
}

// computeStatus is the whole status, as a pure function of what the pass saw.
func computeStatus(observed *mysqlv1beta1.MySQLCluster, st *state, stepErr error) mysqlv1beta1.MySQLClusterStatus {
	c := st.cluster
	old := observed.Status
	ro := observeRollout(st.statefulSet, *c.Spec.Instances)
	s := mysqlv1beta1.MySQLClusterStatus{
		ObservedGeneration: observed.Generation,
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		Instances:          ro.replicas,
		ReadyInstances:     ro.ready,
		CurrentPrimary:     st.topology.CurrentPrimary,
		FencedInstances:    slices.Clone(st.topology.Fenced),
		Version:            old.Version,
		Endpoints: mysqlv1beta1.ClusterEndpoints{
			Primary:  fmt.Sprintf("%s.%s.svc:%d", resources.PrimaryServiceName(c), c.Namespace, resources.MySQLPort),
			Replicas: fmt.Sprintf("%s.%s.svc:%d", resources.ReplicasServiceName(c), c.Namespace, resources.MySQLPort),
		},
		Backup:  *old.Backup.DeepCopy(),
		Restore: old.Restore.DeepCopy(),
		History: mergeHistory(old.History, st.topology.History),
	}
	if st.backupsListed {
		s.Backup = backupStatus(c, old.Backup, st)
	}
	if ro.rolledOut {
		s.Version = runningVersion(st.statefulSet, c)
	}
	if st.roll != nil && st.roll.step != "" {
		s.Rollout = &mysqlv1beta1.RolloutStatus{Revision: st.statefulSet.Status.UpdateRevision,
			Updated: int32(st.roll.updated), Total: int32(st.roll.total), Step: st.roll.step}
	} else if st.roll == nil {
		s.Rollout = old.Rollout.DeepCopy() // the pass stopped before the roll step
	}
	set := func(t string, ok metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: ok, Reason: reason,
			Message: msg, ObservedGeneration: observed.Generation})
	}
	topoOK := !st.topology.Managed || (st.topology.Healthy && st.topology.CurrentPrimary != "")
	ready := st.invalid == nil && stepErr == nil && ro.rolledOut && ro.ready == ro.desired && topoOK
	rs := st.restore
	if rs != nil {
		s.Restore = rs.status.DeepCopy()
		set(rs.cond.Type, rs.cond.Status, rs.cond.Reason, rs.cond.Message)
	} else if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		meta.RemoveStatusCondition(&s.Conditions, mysqlv1beta1.ConditionRestored)
	}
	switch {
	case st.invalid != nil:
		set(mysqlv1beta1.ConditionReady, metav1.ConditionFalse, mysqlv1beta1.ReasonInvalidSpec, st.invalid.Error())
	case rs != nil && rs.hold:
		set(mysqlv1beta1.ConditionReady, metav1.ConditionFalse, rs.cond.Reason, "no instance runs until the backup is restored: "+rs.cond.Message)
	case ready:
		msg := fmt.Sprintf("%d/%d instances ready", ro.ready, ro.desired)
		if !st.topology.Managed {
			msg += " (Kubernetes readiness only: replication is not managed)"
		}
		set(mysqlv1beta1.ConditionReady, metav1.ConditionTrue, mysqlv1beta1.ReasonAllInstancesReady, msg)
	default:
		set(mysqlv1beta1.ConditionReady, metav1.ConditionFalse, mysqlv1beta1.ReasonInstancesNotReady,
			fmt.Sprintf("%d/%d instances ready", ro.ready, ro.desired))
	}
	setProgressing(set, st, ro)
	degraded := setDegraded(set, st, stepErr)
	if rs != nil && rs.hold {
		// Only the restore is going on: the instances' conditions wait for it.
		if rs.failed {
			set(mysqlv1beta1.ConditionProgressing, metav1.ConditionFalse, rs.cond.Reason, rs.cond.Message)
			set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, rs.cond.Reason, rs.cond.Message)
		} else {
			set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, rs.cond.Reason, rs.cond.Message)
		}
	}
	if st.topology.Managed {
		ok := metav1.ConditionFalse
		if st.topology.Healthy {
			ok = metav1.ConditionTrue
		}
		set(mysqlv1beta1.ConditionReplicationHealthy, ok, orDefault(st.topology.Reason, mysqlv1beta1.ReasonReplicationHealthy), st.topology.Message)
	} else {
		set(mysqlv1beta1.ConditionReplicationHealthy, metav1.ConditionUnknown, mysqlv1beta1.ReasonTopologyNotManaged, st.topology.Message)
	}
	setPendingRestart(set, st.template)
	if st.backupsListed {
		// A pass that stopped before the backup step learned nothing of backups: what
		// the stored status says of them stands.
		setLastBackup(&s.Conditions, st.backups, observed.Generation)
		setArchiving(&s.Conditions, st.archive, observed.Generation)
		setVerified(&s.Conditions, s.Backup.Verification, st.verify, observed.Generation)
	}
	s.Phase = phase(c, old.Phase, st, ready, degraded)
	return s
}

// setLastBackup sets LastBackupSucceeded from the cluster's newest ended backup: True
// when it completed, False with its reason when it failed; without an ended backup the
// condition is absent.
func setLastBackup(conds *[]metav1.Condition, backups []mysqlv1beta1.MySQLBackup, gen int64) {
	last := newestEnded(backups, "")
	if last == nil {
		meta.RemoveStatusCondition(conds, mysqlv1beta1.ConditionLastBackupSucceeded)
		return
	}
	c := metav1.Condition{Type: mysqlv1beta1.ConditionLastBackupSucceeded, Status: metav1.ConditionTrue,
		Reason: mysqlv1beta1.ReasonBackupCompleted, ObservedGeneration: gen,
		Message: fmt.Sprintf("%s completed at %s", last.Name, last.Status.CompletedAt.UTC().Format(time.RFC3339))}
	if last.Status.Phase == mysqlv1beta1.BackupPhaseFailed {
		f := failedCondition(last)
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, f.Reason, last.Name+": "+f.Message
	}
	meta.SetStatusCondition(conds, c)
}

// newestEnded is the backup that ended last, in phase (any end when ""), or nil.
func newestEnded(backups []mysqlv1beta1.MySQLBackup, phase mysqlv1beta1.BackupPhase) *mysqlv1beta1.MySQLBackup {
	var last *mysqlv1beta1.MySQLBackup
	for i := range backups {
		b := &backups[i]
		if !done(b) || b.Status.CompletedAt == nil || (phase != "" && b.Status.Phase != phase) {
			continue
		}
		if last == nil || b.Status.CompletedAt.After(last.Status.CompletedAt.Time) {
			last = b
		}
	}
	return last
}

func setProgressing(set func(string, metav1.ConditionStatus, string, string), st *state, ro rollout) {
	switch {
	case st.scaleDownHeld != "":
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonScaling, st.scaleDownHeld)
	case ro.scaling:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonScaling,
			fmt.Sprintf("%d of %d instances exist", ro.replicas, ro.desired))
	case st.roll != nil && st.roll.step != "":
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonRollingUpdate,
			fmt.Sprintf("%d of %d instances updated: %s", st.roll.updated, st.roll.total, st.roll.step))
	case ro.rolling:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonRollingUpdate, "pods are being replaced")
	case st.volumesGrowing != "":
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonResizingVolumes, st.volumesGrowing)
	case len(st.changed) > 0:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonReconciling, strings.Join(st.changed, ", "))
	case ro.ready != ro.desired:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonInstancesNotReady,
			fmt.Sprintf("waiting for %d instances to be ready", ro.desired-ro.ready))
	default:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionFalse, mysqlv1beta1.ReasonReconciled, "every object matches the spec")
	}
}

// setPendingRestart reports a pod template held across an operator upgrade; a pass that
// stopped before the StatefulSet step leaves the condition as it was.
func setPendingRestart(set func(string, metav1.ConditionStatus, string, string), t *templateHold) {
	switch {
	case t == nil:
	case t.held:
		set(mysqlv1beta1.ConditionPendingRestart, metav1.ConditionTrue, mysqlv1beta1.ReasonTemplateHeld,
			"the instances keep the pod template an earlier operator built; a restart would change "+
				strings.Join(t.changes, ", ")+". spec.updatePolicy.operatorUpgrade: Roll, or a spec change that "+
				"restarts the instances, rolls them onto it (replicas first, the primary last)")
	default:
		set(mysqlv1beta1.ConditionPendingRestart, metav1.ConditionFalse, mysqlv1beta1.ReasonTemplateCurrent,
			"the StatefulSet has the pod template this operator builds")
	}
}

func setDegraded(set func(string, metav1.ConditionStatus, string, string), st *state, stepErr error) bool {
	switch {
	case st.invalid != nil:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonInvalidSpec, st.invalid.Error())
	case stepErr != nil:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonApplyFailed, stepErr.Error())
	case st.roll != nil && st.roll.stuck != "":
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonRollPaused, st.roll.step)
	case st.topology.Managed && !st.topology.Healthy:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, orDefault(st.topology.Reason, mysqlv1beta1.ReasonReplicationBroken), st.topology.Message)
	case st.volumesRefused != "":
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonVolumeExpansionRefused, st.volumesRefused)
	default:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionFalse, mysqlv1beta1.ReasonReconciled, "no problem found")
		return false
	}
	return true
}

func phase(c *mysqlv1beta1.MySQLCluster, old mysqlv1beta1.ClusterPhase, st *state, ready, degraded bool) mysqlv1beta1.ClusterPhase {
	switch {
	case c.Spec.Paused:
		return mysqlv1beta1.PhasePaused
	case st.invalid != nil, st.restore != nil && st.restore.failed:
		return mysqlv1beta1.PhaseFailed
	case st.restore != nil && st.restore.hold:
		return mysqlv1beta1.PhaseProvisioning // no instance yet, whatever came before
	case degraded:
		return mysqlv1beta1.PhaseDegraded
	case ready:
		return mysqlv1beta1.PhaseReady
	case old == "" || old == mysqlv1beta1.PhasePending || old == mysqlv1beta1.PhaseProvisioning:
		return mysqlv1beta1.PhaseProvisioning // never been ready yet
	default:
		return mysqlv1beta1.PhaseUpdating
	}
}

// backupStatus reports the cluster's backups: when the newest completed and the newest
// failed ended, when the schedule is due next, and what the binary log archive reaches.
func backupStatus(c *mysqlv1beta1.MySQLCluster, old mysqlv1beta1.BackupStatus, st *state) mysqlv1beta1.BackupStatus {
	var bs mysqlv1beta1.BackupStatus
	if b := newestEnded(st.backups, mysqlv1beta1.BackupPhaseCompleted); b != nil {
		bs.LastSuccessful = b.Status.CompletedAt.DeepCopy()
	}
	if b := newestEnded(st.backups, mysqlv1beta1.BackupPhaseFailed); b != nil {
		bs.LastFailure = b.Status.CompletedAt.DeepCopy()
	}
	if c.Spec.Backup != nil && !c.Spec.Backup.Suspend && !st.nextBackup.IsZero() {
		bs.NextScheduled = &metav1.Time{Time: st.nextBackup}
	}
	if c.Spec.Backup != nil && !st.lastScheduled.IsZero() {
		bs.LastScheduleTime = &metav1.Time{Time: st.lastScheduled}
	}
	archiveStatus(&bs, old, st.archive)
	bs.Verification = verificationStatus(old.Verification, st.verify)
	return bs
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// mergeHistory is status.history with the topology manager's latest actions added: both
// lists hold the same action once (status keeps times to the second), oldest first, the
// last mysqlv1beta1.HistoryLength kept.
func mergeHistory(old, latest []mysqlv1beta1.HistoryEntry) []mysqlv1beta1.HistoryEntry {
	key := func(e mysqlv1beta1.HistoryEntry) string {
		return fmt.Sprintf("%d|%s|%s|%s", e.Time.Unix(), e.Action, e.Instance, e.From)
	}
	seen := map[string]bool{}
	var out []mysqlv1beta1.HistoryEntry
	for _, e := range slices.Concat(old, latest) {
		e.Time = metav1.NewTime(e.Time.Truncate(time.Second))
		if k := key(e); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b mysqlv1beta1.HistoryEntry) int { return a.Time.Compare(b.Time.Time) })
	if n := len(out) - mysqlv1beta1.HistoryLength; n > 0 {
		out = out[n:]
	}
	return out
}
