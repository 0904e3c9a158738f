package resources

import (
	"fmt"
	"path"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A backup Job's pod: the init container copies the operator's binary (from the
// operator's image) into toolsDir, and the backup container runs it in the cluster's
// MySQL image, beside that image's mysqldump, so client and server versions match.
const (
	toolsDir = "/dolphin"
	workDir  = "/work"
	caDir    = "/etc/dolphin/s3-ca"
	// BackupContainer is the container whose termination message is the backup's result.
	BackupContainer = "backup"
	// DefaultBackupTimeout bounds a backup whose spec sets no timeout.
	DefaultBackupTimeout = time.Hour
	// backupJobGrace is how much longer than the backup's own timer the Job lets it run:
	// the pod reports its DeadlineExceeded itself, before Kubernetes ends it without a word.
	backupJobGrace = time.Minute
)

// Keys of a backup target's credentials Secret.
const (
	KeyS3AccessKeyID     = "AWS_ACCESS_KEY_ID"
	KeyS3SecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// BackupRun is what one backup's Job needs.
type BackupRun struct {
	Backup  *mysqlv1beta1.MySQLBackup
	Cluster *mysqlv1beta1.MySQLCluster
	// Target is where the backup goes (the backup's own, else the cluster's).
	Target *mysqlv1beta1.BackupTarget
	// Source is the instance read from.
	Source string
	// OperatorImage holds the binary the pod runs.
	OperatorImage string
	Images        Images
}

// BackupJobName is the Job of a MySQLBackup.
func BackupJobName(b *mysqlv1beta1.MySQLBackup) string { return b.Name }

// BackupTimeout is a backup's deadline.
func BackupTimeout(b *mysqlv1beta1.MySQLBackup) time.Duration {
	if b.Spec.Timeout != nil && b.Spec.Timeout.Duration > 0 {
		return b.Spec.Timeout.Duration
	}
	return DefaultBackupTimeout
}

// BackupMethod is a backup's method: the one it ran with (its status), else its spec's,
// else Physical. A backup that ran before Physical became the default, with no method in
// its spec (stored without the defaulting webhook), ran as Logical and says so in its
// status, so its data is still found where it is.
func BackupMethod(b *mysqlv1beta1.MySQLBackup) mysqlv1beta1.BackupMethod {
	switch {
	case b.Status.Method != "":
		return b.Status.Method
	case b.Spec.Method != "":
		return b.Spec.Method
	}
	return mysqlv1beta1.BackupMethodPhysical
}

// BackupKey is where a backup's data goes under its target:
// [prefix/]namespace/cluster/base/<created, UTC>-<name>/dump.sql.zst (logical) or
// data.tar.zst (physical). The creation time keeps a backup recreated under an earlier
// one's name from overwriting its data.
func BackupKey(b *mysqlv1beta1.MySQLBackup, t *mysqlv1beta1.BackupTarget) string {
	prefix := ""
	if t.S3 != nil {
		prefix = strings.Trim(t.S3.Prefix, "/")
	}
	file := "dump.sql.zst"
	if BackupMethod(b) == mysqlv1beta1.BackupMethodPhysical {
		file = "data.tar.zst"
	}
	stamp := b.CreationTimestamp.UTC().Format("20060102T150405Z")
	return strings.TrimPrefix(path.Join(prefix, b.Namespace, b.Spec.Cluster, "base", stamp+"-"+b.Name, file), "/")
}

// BackupJob runs one backup; it fails at the first failure (no retries: the next
// scheduled backup is the retry) and is deleted with its MySQLBackup.
func BackupJob(r BackupRun) *batchv1.Job {
	b, c := r.Backup, r.Cluster
	labels := merge(Labels(c, ComponentBackup), map[string]string{LabelBackup: b.Name})
	volumes := []corev1.Volume{
		{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	mounts := []corev1.VolumeMount{{Name: "tools", MountPath: toolsDir, ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}}
	args, env, vols, vmounts := backupTargetArgs(r.Target, c)
	volumes, mounts = append(volumes, vols...), append(mounts, vmounts...)
	if BackupMethod(b) == mysqlv1beta1.BackupMethodPhysical {
		// The copy is made here before it is archived: room for the whole data set.
		volumes = append(volumes, corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "work", MountPath: workDir})
		args = append(args, "--work="+workDir)
	}
	timeout := BackupTimeout(b)
	args = append([]string{toolsDir + "/manager", "backup", "--cluster=" + c.Name, "--name=" + b.Name,
		"--key=" + BackupKey(b, r.Target), "--method=" + string(BackupMethod(b)),
		"--source-instance=" + r.Source, "--source-host=" + InstanceHost(c, r.Source), "--user=" + BackupUser,
		"--timeout=" + timeout.String()}, args...)
	env = append([]corev1.EnvVar{secretEnv("DOLPHIN_BACKUP_PASSWORD", CredentialsSecretName(c), KeyBackupPassword)}, env...)
	pod := toolPod(r.OperatorImage, corev1.Container{
		Name: BackupContainer, Image: r.Images.MySQLImage(c), Command: args, Env: env, VolumeMounts: mounts,
	}, volumes)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: BackupJobName(b), Namespace: b.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          new(int32(0)),
			ActiveDeadlineSeconds: new(int64((timeout + backupJobGrace).Seconds())),
			Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(labels, ComponentBackup)}, Spec: pod},
		},
	}
}

// toolPod is the pod of a backup's or restore's Job: an init container copies the
// operator's binary from its image into toolsDir, and main runs it (in the cluster's
// MySQL image), reporting in its termination message. No retries, no API token, the
// instances' user.
func toolPod(operatorImage string, main corev1.Container, volumes []corev1.Volume) corev1.PodSpec {
	main.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	main.SecurityContext = restrictedContainer()
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  new(false),
		TerminationGracePeriodSeconds: new(int64(30)),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(mysqlUID),
			RunAsGroup: new(mysqlUID), FSGroup: new(mysqlUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		InitContainers: []corev1.Container{{
			Name: "install", Image: operatorImage, Command: []string{"/manager", "install", toolsDir},
			VolumeMounts:    []corev1.VolumeMount{{Name: "tools", MountPath: toolsDir}},
			SecurityContext: restrictedContainer(),
		}},
		Containers: []corev1.Container{main},
		Volumes:    volumes,
	}
}

// jobPodLabels are the labels of a backup's or restore's pod: the Job's, but for a name
// of its own, so that no selector of the instances' (the StatefulSet's, the Services',
// the PodDisruptionBudget's, which would then fail to count a Job's pod) picks it.
func jobPodLabels(labels map[string]string, component string) map[string]string {
	return merge(labels, map[string]string{LabelName: "dolphin-" + component})
}

// backupTargetArgs are the backup command's target flags, with the environment and
// volumes they need.
func backupTargetArgs(t *mysqlv1beta1.BackupTarget, c *mysqlv1beta1.MySQLCluster) ([]string, []corev1.EnvVar, []corev1.Volume, []corev1.VolumeMount) {
	if t.PVC != nil {
		claim := t.PVC.ClaimName
		if claim == "" {
			claim = BackupClaimName(c)
		}
		return []string{"--dir=" + BackupDir, "--claim=" + claim}, nil,
			[]corev1.Volume{{Name: "backup", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			[]corev1.VolumeMount{{Name: "backup", MountPath: BackupDir}}
	}
	s := t.S3
	args := []string{"--s3-bucket=" + s.Bucket}
	if s.Endpoint != "" {
		args = append(args, "--s3-endpoint="+s.Endpoint)
	}
	if s.Region != "" {
		args = append(args, "--s3-region="+s.Region)
	}
	if s.ForcePathStyle {
		args = append(args, "--s3-path-style")
	}
	env := []corev1.EnvVar{secretEnv("AWS_ACCESS_KEY_ID", s.CredentialsSecret.Name, KeyS3AccessKeyID),
		secretEnv("AWS_SECRET_ACCESS_KEY", s.CredentialsSecret.Name, KeyS3SecretAccessKey)}
	if s.CASecret == nil {
		return args, env, nil, nil
	}
	args = append(args, "--s3-ca-file="+path.Join(caDir, "ca.crt"))
	return args, env,
		[]corev1.Volume{{Name: "s3-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s.CASecret.Name, Items: []corev1.KeyToPath{{Key: s.CASecret.Key, Path: "ca.crt"}}}}}},
		[]corev1.VolumeMount{{Name: "s3-ca", MountPath: caDir, ReadOnly: true}}
}

// InstanceHost is an instance's stable DNS name, through the headless Service.
func InstanceHost(c *mysqlv1beta1.MySQLCluster, instance string) string {
	return fmt.Sprintf("%s.%s.%s.svc", instance, HeadlessServiceName(c), c.Namespace)
}

// ScheduledBackup is the MySQLBackup of a cluster's schedule for the due time: named
// after it, so that creating it twice creates one, and carrying it in
// AnnotationScheduledAt. It has no owner: a backup outlives its cluster.
func ScheduledBackup(c *mysqlv1beta1.MySQLCluster, due time.Time) *mysqlv1beta1.MySQLBackup {
	return &mysqlv1beta1.MySQLBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name + "-" + due.UTC().Format("20060102-1504"),
			Labels:      Labels(c, ComponentBackup),
			Annotations: map[string]string{AnnotationScheduledAt: due.UTC().Format(time.RFC3339)}},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: c.Name, Method: c.Spec.Backup.Method},
	}
}
