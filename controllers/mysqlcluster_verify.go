package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// Restore verification: at each due time of spec.backup.verify.schedule the cluster
// reconciler runs a Job that restores the newest completed backup into a throwaway
// volume, with every check of a restore. A Job that ended is recorded in
// status.backup.verification on one pass and deleted on a later one, once the record is
// stored: a lost status write loses no outcome.

// verifyObservation is what a pass learned of restore verification.
type verifyObservation struct {
	// running is the verification in progress; ended the one this pass saw end.
	running, ended *mysqlv1beta1.BackupVerification
	// next is the schedule's next due time; lastScheduled the last one reached.
	next, lastScheduled time.Time
	// noBackup: a due time came with no completed backup to verify.
	noBackup bool
}

// reconcileVerify runs, records and clears the cluster's verification Jobs.
func (r *MySQLClusterReconciler) reconcileVerify(ctx context.Context, st *state) error {
	c := st.cluster
	jobs := &batchv1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(c.Namespace), client.MatchingLabels(resources.Labels(c, resources.ComponentVerify))); err != nil {
		return fmt.Errorf("while listing verification Jobs: %w", err)
	}
	var spec *mysqlv1beta1.BackupVerifySpec
	if c.Spec.Backup != nil {
		spec = c.Spec.Backup.Verify
	}
	old := c.Status.Backup.Verification
	obs := &verifyObservation{}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !metav1.IsControlledBy(job, c) {
			continue
		}
		recorded := old != nil && old.Last != nil && old.Last.Job == job.Name
		if spec == nil || recorded {
			if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("while deleting verification Job %s: %w", job.Name, err)
			}
			continue
		}
		run, err := r.verification(ctx, job)
		if err != nil {
			return err
		}
		if run.CompletedAt == nil {
			obs.running = run
		} else if obs.ended == nil || run.CompletedAt.After(obs.ended.CompletedAt.Time) {
			obs.ended = run
		}
	}
	if spec == nil {
		return nil
	}
	st.verify = obs
	if obs.ended != nil {
		r.announceVerification(c, obs.ended)
	}
	return r.scheduleVerify(ctx, st, spec, old)
}

// scheduleVerify starts the verification that is due, if any, of the newest completed
// backup.
func (r *MySQLClusterReconciler) scheduleVerify(ctx context.Context, st *state, spec *mysqlv1beta1.BackupVerifySpec, old *mysqlv1beta1.VerificationStatus) error {
	c, obs := st.cluster, st.verify
	sched, err := mysqlv1beta1.ParseSchedule(spec.Schedule)
	if err != nil {
		return fmt.Errorf("spec.backup.verify.schedule: %w", err) // validation refuses it first
	}
	now := r.now().UTC()
	in := scheduleInput{now: now, schedule: sched, since: now, running: obs.running != nil}
	if old != nil && old.LastScheduleTime != nil {
		in.since = old.LastScheduleTime.UTC()
	}
	d := decideSchedule(in)
	obs.next, obs.lastScheduled = d.next, in.since
	if d.due.IsZero() {
		return nil
	}
	obs.lastScheduled = d.due
	b := newestEnded(st.backups, mysqlv1beta1.BackupPhaseCompleted)
	if b == nil || b.Status.Target == nil || b.Status.SHA256 == "" || b.Status.Method == "" {
		obs.noBackup = true
		return nil
	}
	if r.OperatorImage == "" {
		obs.ended = &mysqlv1beta1.BackupVerification{Backup: b.Name, DueTime: &metav1.Time{Time: d.due},
			StartedAt: &metav1.Time{Time: now}, CompletedAt: &metav1.Time{Time: now}, Reason: mysqlv1beta1.ReasonNoOperatorImage,
			Message: "the operator does not know its own image, which verification pods run (set DOLPHIN_OPERATOR_IMAGE)"}
		return nil
	}
	job := resources.VerifyJob(resources.RestoreRun{Cluster: c, Backup: resources.SourceOfBackup(b), OperatorImage: r.OperatorImage, Images: r.Images}, d.due)
	if _, err := r.applier().Apply(ctx, c, job); err != nil {
		return fmt.Errorf("while creating verification Job %s: %w", job.Name, err)
	}
	obs.running = &mysqlv1beta1.BackupVerification{Backup: b.Name, Job: job.Name, DueTime: &metav1.Time{Time: d.due},
		StartedAt: &metav1.Time{Time: now}}
	st.changed = append(st.changed, "created verification Job "+job.Name)
	return nil
}

// verification is what a verification Job says: running, or ended with its outcome.
func (r *MySQLClusterReconciler) verification(ctx context.Context, job *batchv1.Job) (*mysqlv1beta1.BackupVerification, error) {
	run := &mysqlv1beta1.BackupVerification{Backup: job.Labels[resources.LabelBackup], Job: job.Name,
		StartedAt: job.CreationTimestamp.DeepCopy()}
	if due, err := time.Parse(time.RFC3339, job.Annotations[resources.AnnotationScheduledAt]); err == nil {
		run.DueTime = &metav1.Time{Time: due}
	}
	end := jobEnd(job)
	if end == nil {
		return run, nil
	}
	run.CompletedAt = end.LastTransitionTime.DeepCopy()
	if run.CompletedAt.IsZero() {
		run.CompletedAt = &metav1.Time{Time: r.now()}
	}
	res, err := jobReport(ctx, r.Client, job, resources.RestoreContainer)
	switch {
	case err == nil && res.Restored != nil && end.Type == batchv1.JobComplete:
		run.Reason, run.Tables = mysqlv1beta1.ReasonVerified, int32(res.Restored.Tables)
		run.Message = fmt.Sprintf("MySQLBackup %s restored from %s: its SHA-256, its GTID set %s and %d tables as recorded",
			run.Backup, res.Restored.Location, res.Restored.GTIDSet, res.Restored.Tables)
	case err == nil && res.Reason != "":
		run.Reason, run.Message = res.Reason, res.Message
	case end.Reason == batchv1.JobReasonDeadlineExceeded:
		run.Reason, run.Message = mysqlv1beta1.ReasonDeadlineExceeded, "not done within spec.backup.verify.timeout; its pod was stopped"
	case err != nil && !errors.Is(err, errNoReport):
		return nil, err
	default:
		run.Reason = mysqlv1beta1.ReasonRestorePodFailed
		run.Message = fmt.Sprintf("Job %s ended (%s) without a report: %s", job.Name, end.Reason, orDefault(res.Message, end.Message))
	}
	return run, nil
}

// announceVerification records a verification's end as an Event.
func (r *MySQLClusterReconciler) announceVerification(c *mysqlv1beta1.MySQLCluster, run *mysqlv1beta1.BackupVerification) {
	kind := corev1.EventTypeNormal
	if run.Reason != mysqlv1beta1.ReasonVerified {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(c, nil, kind, run.Reason, "Verify", "verification of MySQLBackup %s: %s", run.Backup, run.Message)
}

// verificationStatus is status.backup.verification from the stored one and the pass.
func verificationStatus(old *mysqlv1beta1.VerificationStatus, obs *verifyObservation) *mysqlv1beta1.VerificationStatus {
	if obs == nil {
		return nil
	}
	vs := &mysqlv1beta1.VerificationStatus{Running: obs.running}
	if old != nil {
		vs.Last, vs.LastSucceeded = old.Last, old.LastSucceeded
	}
	if e := obs.ended; e != nil {
		vs.Last = e
		if e.Reason == mysqlv1beta1.ReasonVerified {
			vs.LastSucceeded = e.CompletedAt
		}
	}
	if !obs.next.IsZero() {
		vs.NextScheduled = &metav1.Time{Time: obs.next}
	}
	if !obs.lastScheduled.IsZero() {
		vs.LastScheduleTime = &metav1.Time{Time: obs.lastScheduled}
	}
	return vs
}

// setVerified sets the BackupVerified condition from the newest verification that
// ended; without spec.backup.verify it is absent.
func setVerified(conds *[]metav1.Condition, vs *mysqlv1beta1.VerificationStatus, obs *verifyObservation, gen int64) {
	if vs == nil {
		meta.RemoveStatusCondition(conds, mysqlv1beta1.ConditionBackupVerified)
		return
	}
	cond := metav1.Condition{Type: mysqlv1beta1.ConditionBackupVerified, ObservedGeneration: gen}
	switch last := vs.Last; {
	case last != nil && last.Reason == mysqlv1beta1.ReasonVerified:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, last.Reason, last.Message
	case last != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, last.Reason
		cond.Message = fmt.Sprintf("verification of MySQLBackup %s failed: %s", last.Backup, last.Message)
	case obs.noBackup:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, mysqlv1beta1.ReasonNoBackupToVerify,
			"a verification was due and the cluster has no completed backup"
	case vs.Running != nil:
		cond.Status, cond.Reason = metav1.ConditionUnknown, mysqlv1beta1.ReasonVerificationPending
		cond.Message = fmt.Sprintf("Job %s verifies MySQLBackup %s", vs.Running.Job, vs.Running.Backup)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, mysqlv1beta1.ReasonVerificationPending, "no verification has run yet"
		if vs.NextScheduled != nil {
			cond.Message += "; the first is due at " + vs.NextScheduled.UTC().Format(time.RFC3339)
		}
	}
	meta.SetStatusCondition(conds, cond)
}
