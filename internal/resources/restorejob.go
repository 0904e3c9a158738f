package resources

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A restore: the operator makes the first instance's claim before the StatefulSet
// exists (the StatefulSet then uses it, by its name), and a Job fills it from the backup
// (the manager's "restore" command, beside the MySQL image's mysqld and mysql). Only
// then are the instances created: the first starts on the restored data, the others
// start empty and are cloned from it.
const (
	// RestoreContainer is the container whose termination message is the restore's result.
	RestoreContainer = "restore"
	// DefaultRestoreTimeout bounds a restore whose spec sets no timeout.
	DefaultRestoreTimeout = 2 * time.Hour
)

// RestoreRun is what a cluster's restore Job needs.
type RestoreRun struct {
	Cluster *mysqlv1beta1.MySQLCluster
	// Backup is the completed backup restored: where its data is and what it is.
	Backup        RestoreSource
	OperatorImage string
	Images        Images
}

// RestoreSource is a completed backup as a restore reads it: from a MySQLBackup's status
// (SourceOfBackup) or from the manifest stored beside its data.
type RestoreSource struct {
	// Name is the MySQLBackup's, or the stored backup's folder under base/.
	Name string
	// Namespace and Cluster are those of the cluster the backup is of: its binary log
	// archive (and its backup volume) are named after them.
	Namespace, Cluster string
	Target             *mysqlv1beta1.BackupTarget
	// Key is where the data is under Target; Location its URL.
	Key, Location string
	Method        mysqlv1beta1.BackupMethod
	SHA256        string
	Size          int64
	GTIDSet       string
	CompletedAt   *metav1.Time
}

// SourceOfBackup is a completed MySQLBackup as a restore reads it.
func SourceOfBackup(b *mysqlv1beta1.MySQLBackup) RestoreSource {
	s := RestoreSource{Name: b.Name, Namespace: b.Namespace, Cluster: b.Spec.Cluster, Target: b.Status.Target,
		Location: b.Status.Location, Method: b.Status.Method, SHA256: b.Status.SHA256, GTIDSet: b.Status.GTIDSet,
		CompletedAt: b.Status.CompletedAt}
	if b.Status.Target != nil {
		s.Key = RestoreKey(b)
	}
	if b.Status.Size != nil {
		s.Size = b.Status.Size.Value()
	}
	return s
}

// RestoreJobName names a cluster's restore Job.
func RestoreJobName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-restore" }

// RestoreTimeout is a restore's deadline.
func RestoreTimeout(c *mysqlv1beta1.MySQLCluster) time.Duration {
	if b := c.Spec.Bootstrap; b != nil && b.FromBackup != nil && b.FromBackup.Timeout != nil && b.FromBackup.Timeout.Duration > 0 {
		return b.FromBackup.Timeout.Duration
	}
	return DefaultRestoreTimeout
}

// Recovers says the cluster's restore recovers to a point in time (targetTime or
// targetGTID) with the backup cluster's binary log archive.
func Recovers(c *mysqlv1beta1.MySQLCluster) bool {
	b := c.Spec.Bootstrap
	return b != nil && b.FromBackup != nil && (b.FromBackup.TargetTime != nil || b.FromBackup.TargetGTID != "")
}

// DataClaimName is the name the StatefulSet gives an instance's data claim.
func DataClaimName(c *mysqlv1beta1.MySQLCluster, ordinal int) string {
	return fmt.Sprintf("data-%s-%d", StatefulSetName(c), ordinal)
}

// FirstDataClaim is the first instance's data claim as the StatefulSet would make it,
// made by the operator so that a restore can fill it first.
func FirstDataClaim(c *mysqlv1beta1.MySQLCluster) *corev1.PersistentVolumeClaim {
	t := dataClaimTemplate(c)
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: DataClaimName(c, 0), Namespace: c.Namespace, Labels: t.Labels},
		Spec:       t.Spec,
	}
}

// RestoreKey is where a completed backup's data is: under the target and by the method
// its status records.
func RestoreKey(b *mysqlv1beta1.MySQLBackup) string {
	as := b.DeepCopy()
	as.Spec.Method = b.Status.Method
	return BackupKey(as, b.Status.Target)
}

// RestoreJob restores the backup into the first instance's claim; it fails at the first
// failure and is deleted with its cluster.
func RestoreJob(r RestoreRun) *batchv1.Job {
	c, b := r.Cluster, r.Backup
	var recovery []string
	if f := c.Spec.Bootstrap.FromBackup; Recovers(c) && b.Target.S3 != nil {
		// The archive of the backup's cluster, beside the backup in the same store.
		source := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Cluster}}
		recovery = []string{"--binlog-prefix=" + BinlogPrefix(source, b.Target.S3)}
		if f.TargetGTID != "" {
			recovery = append(recovery, "--target-gtid="+f.TargetGTID)
		} else {
			recovery = append(recovery, "--target-time="+f.TargetTime.UTC().Format(time.RFC3339))
		}
	}
	data := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: DataClaimName(c, 0)}}
	return restoreRunJob(r, RestoreJobName(c), ComponentRestore, data, RestoreTimeout(c), recovery)
}

// restoreRunJob is a Job whose one pod restores the backup into the data volume, for
// the component: run once, within its timeout.
func restoreRunJob(r RestoreRun, name, component string, data corev1.VolumeSource, timeout time.Duration, extra []string) *batchv1.Job {
	c, b := r.Cluster, r.Backup
	target := b.Target.DeepCopy()
	if target.PVC != nil && target.PVC.ClaimName == "" {
		// The backup cluster's own backup volume.
		target.PVC.ClaimName = BackupClaimName(&mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: b.Cluster}})
	}
	labels := Labels(c, component)
	volumes := []corev1.Volume{
		{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: data},
	}
	mounts := []corev1.VolumeMount{{Name: "tools", MountPath: toolsDir, ReadOnly: true},
		{Name: "work", MountPath: workDir}, {Name: "tmp", MountPath: "/tmp"}, {Name: "data", MountPath: DataDir}}
	targetArgs, env, vols, vmounts := backupTargetArgs(target, c)
	volumes, mounts = append(volumes, vols...), append(mounts, vmounts...)
	args := append([]string{toolsDir + "/manager", "restore", "--key=" + b.Key, "--method=" + string(b.Method),
		"--sha256=" + b.SHA256, "--size=" + strconv.FormatInt(b.Size, 10), "--gtid-set=" + b.GTIDSet,
		"--data=" + DataDir, "--work=" + workDir, "--timeout=" + timeout.String()}, targetArgs...)
	args = append(args, extra...)
	env = append(append([]corev1.EnvVar{secretEnv("MYSQL_ROOT_PASSWORD", CredentialsSecretName(c), KeyRootPassword)},
		accountEnv(c)...), env...)
	pod := toolPod(r.OperatorImage, corev1.Container{
		Name: RestoreContainer, Image: r.Images.MySQLImage(c), Command: args, Env: env, VolumeMounts: mounts,
		Resources: c.Spec.Resources,
	}, volumes)
	// Where the instances may run, the restore may (the volume it binds stays there).
	pt := c.Spec.PodTemplate
	pod.Affinity, pod.Tolerations, pod.NodeSelector, pod.PriorityClassName = pt.Affinity, pt.Tolerations, pt.NodeSelector, pt.PriorityClassName
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          new(int32(0)),
			ActiveDeadlineSeconds: new(int64((timeout + backupJobGrace).Seconds())),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(labels, component)},
				Spec: pod},
		},
	}
}
