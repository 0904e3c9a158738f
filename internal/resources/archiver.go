package resources

import (
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// ArchiveContainer is the archiver's container.
const ArchiveContainer = "binlog-archive"

// BinlogPrefix is where a cluster's binary log archive is under its S3 target:
// [prefix/]namespace/cluster/binlog, beside the cluster's base backups.
func BinlogPrefix(c *mysqlv1beta1.MySQLCluster, t *mysqlv1beta1.S3Target) string {
	return strings.TrimPrefix(path.Join(strings.Trim(t.Prefix, "/"), c.Namespace, c.Name, "binlog"), "/")
}

// ArchiveTimeout is how often a cluster's archiver rotates the primary's log.
func ArchiveTimeout(c *mysqlv1beta1.MySQLCluster) (d metav1.Duration) {
	d.Duration = mysqlv1beta1.DefaultArchiveTimeout
	if b := c.Spec.Backup; b != nil && b.BinlogArchive != nil && b.BinlogArchive.ArchiveTimeout != nil {
		d = *b.BinlogArchive.ArchiveTimeout
	}
	return d
}

// BinlogArchiver is the Deployment that archives a cluster's binary logs, or nil when
// the cluster has no archive (or no S3 target, which validation refuses). One pod, and
// never two at once (Recreate): the archive's index has one writer. The pod runs the
// operator's binary in the cluster's MySQL image, beside its mysqlbinlog; it reads the
// primary through its Service and then by its instance name, as dolphin-backup (to list
// and rotate the logs) and dolphin-repl (to copy them). Its pod carries credentials, the
// last rotation of those passwords (StatefulSetInput.Credentials): a new one restarts it.
func BinlogArchiver(c *mysqlv1beta1.MySQLCluster, operatorImage string, images Images, credentials string) *appsv1.Deployment {
	b := c.Spec.Backup
	if b == nil || b.BinlogArchive == nil || b.Target == nil || b.Target.S3 == nil {
		return nil
	}
	labels := Labels(c, ComponentArchive)
	args, env, volumes, mounts := backupTargetArgs(b.Target, c)
	volumes = append(volumes,
		corev1.Volume{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts = append(mounts, corev1.VolumeMount{Name: "tools", MountPath: toolsDir, ReadOnly: true},
		corev1.VolumeMount{Name: "work", MountPath: workDir})
	args = append([]string{toolsDir + "/manager", "binlog-archive",
		"--primary-host=" + fmt.Sprintf("%s.%s.svc", PrimaryServiceName(c), c.Namespace),
		"--instance-domain=" + fmt.Sprintf("%s.%s.svc", HeadlessServiceName(c), c.Namespace),
		"--prefix=" + BinlogPrefix(c, b.Target.S3), "--admin-user=" + BackupUser, "--reader-user=" + ReplicationUser,
		"--flush=" + ArchiveTimeout(c).Duration.String(), "--tmp=" + workDir}, args...)
	env = append([]corev1.EnvVar{
		secretEnv("DOLPHIN_BACKUP_PASSWORD", CredentialsSecretName(c), KeyBackupPassword),
		secretEnv("DOLPHIN_REPLICATION_PASSWORD", CredentialsSecretName(c), KeyReplicationPassword)}, env...)
	pod := toolPod(operatorImage, corev1.Container{
		Name: ArchiveContainer, Image: images.MySQLImage(c), Command: args, Env: env, VolumeMounts: mounts,
	}, volumes)
	pod.RestartPolicy = corev1.RestartPolicyAlways
	podLabels := jobPodLabels(labels, ComponentArchive)
	var podAnnotations map[string]string
	if credentials != "" {
		podAnnotations = map[string]string{AnnotationCredentials: credentials}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: BinlogArchiverName(c), Namespace: c.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations}, Spec: pod},
		},
	}
}
