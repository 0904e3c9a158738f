package resources

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// BackupDir is where a backup job mounts the backup volume.
const BackupDir = "/backup"

// BackupClaim is the volume scheduled backups go to, when the operator creates it: nil
// without a schedule, with an existing claim named, or with an S3 target.
func BackupClaim(c *mysqlv1beta1.MySQLCluster) *corev1.PersistentVolumeClaim {
	b := c.Spec.Backup
	if b == nil || b.Target == nil || b.Target.PVC == nil || b.Target.PVC.ClaimName != "" {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: BackupCronJobName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentBackup)},
		Spec:       claimSpec(*b.Target.PVC.Size, b.Target.PVC.StorageClassName),
	}
}

func backupClaimName(c *mysqlv1beta1.MySQLCluster) string {
	if n := c.Spec.Backup.Target.PVC.ClaimName; n != "" {
		return n
	}
	return BackupCronJobName(c)
}

// backupScript dumps every database from a replica (the primary when there is none) in
// one consistent snapshot with its GTID set, writes it under a temporary name and
// renames it when complete, then keeps the newest $KEEP dumps.
const backupScript = `set -eu
stamp=$(date -u +%Y%m%dT%H%M%SZ)
host=$REPLICAS_HOST
MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --no-defaults -h "$host" -uroot -e 'SELECT 1' >/dev/null 2>&1 || host=$PRIMARY_HOST
MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysqldump --no-defaults -h "$host" -uroot --all-databases --single-transaction \
  --routines --events --triggers --set-gtid-purged=ON --ssl-mode=PREFERRED | gzip > "` + BackupDir + `/.$stamp.sql.gz.partial"
mv "` + BackupDir + `/.$stamp.sql.gz.partial" "` + BackupDir + `/$stamp.sql.gz"
echo "backup ` + BackupDir + `/$stamp.sql.gz complete"
ls -1t ` + BackupDir + `/*.sql.gz | tail -n +$((KEEP + 1)) | xargs -r rm -f
`

// BackupCronJob runs scheduled backups; nil without a schedule. S3 targets are not
// handled by this job yet: it is built for volume targets only.
func BackupCronJob(c *mysqlv1beta1.MySQLCluster, img Images) *batchv1.CronJob {
	b := c.Spec.Backup
	if b == nil || b.Schedule == "" || b.Target == nil || b.Target.PVC == nil {
		return nil
	}
	keep := int32(7)
	if b.Retention.Count != nil {
		keep = *b.Retention.Count
	}
	svc := func(name string) string { return name + "." + c.Namespace + ".svc" }
	job := batchv1.JobSpec{
		BackoffLimit: new(int32(2)),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: Labels(c, ComponentBackup)},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(mysqlUID),
					RunAsGroup: new(mysqlUID), FSGroup: new(mysqlUID),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "backup", Image: img.MySQLImage(c), Command: []string{"sh", "-c", backupScript},
					Env: []corev1.EnvVar{
						secretEnv("MYSQL_ROOT_PASSWORD", CredentialsSecretName(c), KeyRootPassword),
						{Name: "PRIMARY_HOST", Value: svc(PrimaryServiceName(c))},
						{Name: "REPLICAS_HOST", Value: svc(ReplicasServiceName(c))},
						{Name: "KEEP", Value: fmt.Sprint(keep)},
					},
					VolumeMounts:    []corev1.VolumeMount{{Name: "backup", MountPath: BackupDir}},
					SecurityContext: restrictedContainer(),
				}},
				Volumes: []corev1.Volume{{Name: "backup", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: backupClaimName(c)}}}},
			},
		},
	}
	return &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: BackupCronJobName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentBackup)},
		Spec: batchv1.CronJobSpec{
			Schedule: b.Schedule,
			Suspend:  new(b.Suspend),
			// A backup still running when the next is due finishes first.
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: new(int32(3)),
			FailedJobsHistoryLimit:     new(int32(3)),
			JobTemplate:                batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: Labels(c, ComponentBackup)}, Spec: job},
		},
	}
}
