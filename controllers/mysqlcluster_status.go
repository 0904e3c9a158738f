package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
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
	cron, err := r.backupCronJob(ctx, st.cluster)
	if err != nil {
		return err
	}
	status := computeStatus(observed, st, cron, stepErr)
	if equality.Semantic.DeepEqual(observed.Status, status) {
		return nil
	}
	wasReady := meta.IsStatusConditionTrue(observed.Status.Conditions, mysqlv1beta1.ConditionReady)
	patch := client.MergeFrom(observed.DeepCopy())
	observed.Status = status
	if err := r.Status().Patch(ctx, observed, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("while writing status: %w", err))
	}
	if ready := meta.FindStatusCondition(status.Conditions, mysqlv1beta1.ConditionReady); ready != nil && !wasReady &&
		ready.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(observed, nil, corev1.EventTypeNormal, ready.Reason, "Reconcile", "%s", ready.Message)
	}
	return nil
}

func (r *MySQLClusterReconciler) backupCronJob(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (*batchv1.CronJob, error) {
	if c.Spec.Backup == nil {
		return nil, nil
	}
	cj := &batchv1.CronJob{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.BackupCronJobName(c)}, cj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("while reading the backup CronJob: %w", err)
	}
	return cj, nil
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

// computeStatus is the whole status, as a pure function of what the pass saw.
func computeStatus(observed *mysqlv1beta1.MySQLCluster, st *state, cj *batchv1.CronJob, stepErr error) mysqlv1beta1.MySQLClusterStatus {
	c := st.cluster
	old := observed.Status
	ro := observeRollout(st.statefulSet, *c.Spec.Instances)
	s := mysqlv1beta1.MySQLClusterStatus{
		ObservedGeneration: observed.Generation,
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
		Instances:          ro.replicas,
		ReadyInstances:     ro.ready,
		CurrentPrimary:     st.topology.CurrentPrimary,
		Version:            old.Version,
		Endpoints: mysqlv1beta1.ClusterEndpoints{
			Primary:  fmt.Sprintf("%s.%s.svc:%d", resources.PrimaryServiceName(c), c.Namespace, resources.MySQLPort),
			Replicas: fmt.Sprintf("%s.%s.svc:%d", resources.ReplicasServiceName(c), c.Namespace, resources.MySQLPort),
		},
		Backup: backupStatus(c, cj),
	}
	if ro.rolledOut {
		s.Version = c.Spec.MySQL.Version
	}
	set := func(t string, ok metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: ok, Reason: reason,
			Message: msg, ObservedGeneration: observed.Generation})
	}
	topoOK := !st.topology.Managed || (st.topology.Healthy && st.topology.CurrentPrimary != "")
	ready := st.invalid == nil && stepErr == nil && ro.rolledOut && ro.ready == ro.desired && topoOK
	switch {
	case st.invalid != nil:
		set(mysqlv1beta1.ConditionReady, metav1.ConditionFalse, mysqlv1beta1.ReasonInvalidSpec, st.invalid.Error())
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
	if st.topology.Managed {
		ok := metav1.ConditionFalse
		if st.topology.Healthy {
			ok = metav1.ConditionTrue
		}
		set(mysqlv1beta1.ConditionReplicationHealthy, ok, orDefault(st.topology.Reason, mysqlv1beta1.ReasonReplicationHealthy), st.topology.Message)
	} else {
		set(mysqlv1beta1.ConditionReplicationHealthy, metav1.ConditionUnknown, mysqlv1beta1.ReasonTopologyNotManaged, st.topology.Message)
	}
	s.Phase = phase(c, old.Phase, st, ready, degraded)
	return s
}

func setProgressing(set func(string, metav1.ConditionStatus, string, string), st *state, ro rollout) {
	switch {
	case ro.scaling:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonScaling,
			fmt.Sprintf("%d of %d instances exist", ro.replicas, ro.desired))
	case ro.rolling:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonRollingUpdate, "pods are being replaced")
	case len(st.changed) > 0:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonReconciling, strings.Join(st.changed, ", "))
	case ro.ready != ro.desired:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionTrue, mysqlv1beta1.ReasonInstancesNotReady,
			fmt.Sprintf("waiting for %d instances to be ready", ro.desired-ro.ready))
	default:
		set(mysqlv1beta1.ConditionProgressing, metav1.ConditionFalse, mysqlv1beta1.ReasonReconciled, "every object matches the spec")
	}
}

func setDegraded(set func(string, metav1.ConditionStatus, string, string), st *state, stepErr error) bool {
	switch {
	case st.invalid != nil:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonInvalidSpec, st.invalid.Error())
	case stepErr != nil:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, mysqlv1beta1.ReasonApplyFailed, stepErr.Error())
	case st.topology.Managed && !st.topology.Healthy:
		set(mysqlv1beta1.ConditionDegraded, metav1.ConditionTrue, orDefault(st.topology.Reason, mysqlv1beta1.ReasonReplicationBroken), st.topology.Message)
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
	case st.invalid != nil:
		return mysqlv1beta1.PhaseFailed
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

// backupStatus reports the scheduled backups from their CronJob.
func backupStatus(c *mysqlv1beta1.MySQLCluster, cj *batchv1.CronJob) mysqlv1beta1.BackupStatus {
	if cj == nil || c.Spec.Backup == nil {
		return mysqlv1beta1.BackupStatus{}
	}
	bs := mysqlv1beta1.BackupStatus{LastSuccessful: cj.Status.LastSuccessfulTime.DeepCopy()}
	if c.Spec.Backup.Suspend {
		return bs
	}
	if sched, err := cron.ParseStandard(c.Spec.Backup.Schedule); err == nil {
		from := cj.CreationTimestamp.Time
		if cj.Status.LastScheduleTime != nil {
			from = cj.Status.LastScheduleTime.Time
		}
		next := metav1.NewTime(sched.Next(from).UTC().Truncate(time.Second))
		bs.NextScheduled = &next
	}
	return bs
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
