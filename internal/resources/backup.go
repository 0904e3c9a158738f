package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// BackupDir is where a backup pod mounts a volume target.
const BackupDir = "/backup"

// BackupClaim is the backup volume the operator creates for a cluster whose
// spec.backup.target is a volume of a size: nil without backups, with an existing claim
// named, or with an S3 target.
func BackupClaim(c *mysqlv1beta1.MySQLCluster) *corev1.PersistentVolumeClaim {
	b := c.Spec.Backup
	if b == nil || b.Target == nil || b.Target.PVC == nil || b.Target.PVC.ClaimName != "" {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: BackupClaimName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentBackup)},
		Spec:       claimSpec(*b.Target.PVC.Size, b.Target.PVC.StorageClassName),
	}
}
