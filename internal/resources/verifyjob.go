package resources

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// DefaultVerifyTimeout bounds a verification whose spec sets no timeout.
const DefaultVerifyTimeout = 2 * time.Hour

// VerifyTimeout is a cluster's verification deadline.
func VerifyTimeout(c *mysqlv1beta1.MySQLCluster) time.Duration {
	if b := c.Spec.Backup; b != nil && b.Verify != nil && b.Verify.Timeout != nil && b.Verify.Timeout.Duration > 0 {
		return b.Verify.Timeout.Duration
	}
	return DefaultVerifyTimeout
}

// VerifyJobName names the verification of a cluster's schedule for a due time.
func VerifyJobName(c *mysqlv1beta1.MySQLCluster, due time.Time) string {
	return c.Name + "-verify-" + due.UTC().Format("20060102-1504")
}

// VerifyJob restores the backup as RestoreJob does, with the same checks, into a
// throwaway volume (an emptyDir, which needs room for the data on the node): nothing of
// the cluster is touched, and the volume goes with the pod. It carries the backup's name
// (LabelBackup) and the due time (AnnotationScheduledAt).
func VerifyJob(r RestoreRun, due time.Time) *batchv1.Job {
	c := r.Cluster
	job := restoreRunJob(r, VerifyJobName(c, due), ComponentVerify,
		corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, VerifyTimeout(c), nil)
	job.Labels[LabelBackup] = r.Backup.Name
	job.Annotations = map[string]string{AnnotationScheduledAt: due.UTC().Format(time.RFC3339)}
	return job
}
