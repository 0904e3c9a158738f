package controllers

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// observe reads a running backup's Job: its end, and then its pod's report.
func (r *MySQLBackupReconciler) observe(ctx context.Context, b *mysqlv1beta1.MySQLBackup, st mysqlv1beta1.MySQLBackupStatus, job *batchv1.Job) (outcome, error) {
	if st.Phase == mysqlv1beta1.BackupPhasePending {
		// A Job made by a pass whose status write was lost.
		st.Phase, st.Job = mysqlv1beta1.BackupPhaseRunning, job.Name
	}
	cond := jobEnd(job)
	if cond == nil {
		return outcome{status: st}, nil // the Job's own events bring us back
	}
	now := r.now()
	res, err := jobReport(ctx, r.Client, job, resources.BackupContainer)
	switch {
	case err == nil && res.Manifest != nil && cond.Type == batchv1.JobComplete:
		return outcome{status: completed(st, now, res.Manifest)}, nil
	case err == nil && res.Reason != "":
		return outcome{status: failed(st, now, res.Reason, res.Message)}, nil
	case cond.Reason == batchv1.JobReasonDeadlineExceeded:
		return outcome{status: failed(st, now, mysqlv1beta1.ReasonDeadlineExceeded,
			fmt.Sprintf("not done within %s; its pod was stopped", resources.BackupTimeout(b)))}, nil
	case err != nil && !errors.Is(err, errNoReport):
		return outcome{}, err
	}
	msg := cond.Message
	if res.Message != "" {
		msg = res.Message
	}
	return outcome{status: failed(st, now, mysqlv1beta1.ReasonBackupPodFailed,
		fmt.Sprintf("Job %s ended (%s) without a report: %s", job.Name, cond.Reason, msg))}, nil
}

// jobEnd is the Job's Complete or Failed condition once true, else nil.
func jobEnd(job *batchv1.Job) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// jobReport is the result a backup's or restore's Job pod left in its container's
// termination message; errNoReport (with what the kubelet said, if anything) when there
// is none.
func jobReport(ctx context.Context, r client.Reader, job *batchv1.Job, container string) (backup.Result, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return backup.Result{}, fmt.Errorf("while listing Job %s's pods: %w", job.Name, err)
	}
	said := ""
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != container || t == nil {
				continue
			}
			if res, err := backup.DecodeResult(t.Message); err == nil {
				return res, nil
			}
			said = fmt.Sprintf("container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return backup.Result{Message: said}, errNoReport
}

// announce records the backup's step as an Event.
func (r *MySQLBackupReconciler) announce(old, b *mysqlv1beta1.MySQLBackup) {
	if old.Status.Phase == b.Status.Phase {
		return
	}
	switch b.Status.Phase {
	case mysqlv1beta1.BackupPhaseRunning:
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonBackupRunning, "Backup", "reading %s (Job %s)", b.Status.Source, b.Status.Job)
	case mysqlv1beta1.BackupPhaseCompleted:
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonBackupCompleted, "Backup", "%s stored at %s", b.Status.Size, b.Status.Location)
	case mysqlv1beta1.BackupPhaseFailed:
		c := failedCondition(b)
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, c.Reason, "Backup", "%s", c.Message)
	}
}

// failedCondition is a failed backup's Failed condition (failed() always sets one).
func failedCondition(b *mysqlv1beta1.MySQLBackup) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, mysqlv1beta1.BackupConditionFailed); c != nil {
		return *c
	}
	return metav1.Condition{Reason: mysqlv1beta1.ReasonBackupFailed, Message: "failed"}
}

// SetupWithManager watches backups and the Jobs they own.
func (r *MySQLBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&mysqlv1beta1.MySQLBackup{}).
		Owns(&batchv1.Job{}).
		Named("mysqlbackup").
		Complete(r)
}
