package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Label keys. The app.kubernetes.io ones follow Kubernetes' recommended labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"
	// LabelRole is "primary", "replica" or "none" on an instance's pod (absent until its
	// first role); the topology manager sets it, and the primary and replicas Services
	// select on it.
	LabelRole = "mysql.dolphin-operator.io/role"
	// AnnotationScheduledAt on a scheduled MySQLBackup is the due time (RFC 3339, UTC)
	// of the cluster's schedule it was created for.
	AnnotationScheduledAt = "mysql.dolphin-operator.io/scheduled-at"
	// LabelBackup names the MySQLBackup a backup Job and its pod run.
	LabelBackup = "mysql.dolphin-operator.io/backup"

	// AnnotationConfigHash on the pod template changes when the effective my.cnf changes,
	// which is what rolls the StatefulSet.
	AnnotationConfigHash = "mysql.dolphin-operator.io/config-hash"
	// AnnotationHandOver on an instance's pod asks the topology manager to switch the
	// primary away from it: the reconciler's roll sets it on the primary's pod once every
	// other instance runs the new template, and restarts the pod once it is a replica.
	AnnotationHandOver = "mysql.dolphin-operator.io/hand-over"

	// ManagedBy is the value of app.kubernetes.io/managed-by on everything the operator makes.
	ManagedBy = "dolphin-operator"
)

// Names of the containers of an instance's pod: mysqld, and mysqld_exporter when the
// cluster has the exporter.
const (
	ContainerMySQL    = "mysqld"
	ContainerExporter = "exporter"
)

// Role is an instance's role label (LabelRole): which Service routes to it. The topology
// manager sets it; the primary and replicas Services select on it.
type Role string

// Roles.
const (
	RolePrimary Role = "primary"
	RoleReplica Role = "replica"
	// RoleNone: in no Service (unreachable, being cloned, isolated, or not yet configured).
	// The topology manager writes it only on a pod that had a role: a pod without the
	// label is in no Service either.
	RoleNone Role = "none"
)

// Component values.
const (
	ComponentDatabase = "database"
	ComponentBackup   = "backup"
	ComponentRestore  = "restore"
	ComponentArchive  = "binlog-archive"
	ComponentVerify   = "verify"
)

// StatefulSetName names the StatefulSet; its pods are <cluster>-0..N-1.
func StatefulSetName(c *mysqlv1beta1.MySQLCluster) string { return c.Name }

// HeadlessServiceName names the Service that gives each instance its DNS name.
func HeadlessServiceName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-instances" }

// PrimaryServiceName names the read-write Service.
func PrimaryServiceName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-primary" }

// ReplicasServiceName names the read-only Service.
func ReplicasServiceName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-replicas" }

// MetricsServiceName names the exporters' Service.
func MetricsServiceName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-metrics" }

// ConfigMapName names the ConfigMap that holds my.cnf.
func ConfigMapName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-config" }

// CredentialsSecretName names the Secret of the cluster's passwords.
func CredentialsSecretName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-credentials" }

// CASecretName names the Secret of the operator-issued CA.
func CASecretName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-ca" }

// TLSSecretName is the server certificate's Secret: the user's when given.
func TLSSecretName(c *mysqlv1beta1.MySQLCluster) string {
	if c.Spec.TLS.SecretName != "" {
		return c.Spec.TLS.SecretName
	}
	return IssuedTLSSecretName(c)
}

// IssuedTLSSecretName names the Secret of the server certificate the operator issues
// (removed when the user brings one).
func IssuedTLSSecretName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-tls" }

// PrimaryLeaseName names the Lease in which the topology manager records the cluster's
// primary.
func PrimaryLeaseName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-primary" }

// PodDisruptionBudgetName names the PodDisruptionBudget.
func PodDisruptionBudgetName(c *mysqlv1beta1.MySQLCluster) string { return c.Name }

// BinlogArchiverName names the Deployment that archives a cluster's binary logs.
func BinlogArchiverName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-binlog-archiver" }

// BackupClaimName names the backup volume the operator creates (and the CronJob that
// release 0.1.0 ran scheduled backups with, which the operator now deletes).
func BackupClaimName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-backup" }

// MonitoringName names the ServiceMonitor and the PrometheusRule.
func MonitoringName(c *mysqlv1beta1.MySQLCluster) string { return c.Name }

// SelectorLabels pick a cluster's instance pods; they never change for a cluster's life
// (a StatefulSet's selector is immutable).
func SelectorLabels(c *mysqlv1beta1.MySQLCluster) map[string]string {
	return map[string]string{LabelName: "mysql", LabelInstance: c.Name, LabelManagedBy: ManagedBy}
}

// Labels are the common labels of every child of a cluster, for the given component.
func Labels(c *mysqlv1beta1.MySQLCluster, component string) map[string]string {
	l := SelectorLabels(c)
	l[LabelPartOf] = "dolphin"
	l[LabelComponent] = component
	return l
}

// MySQLImageOf is the image of the mysqld container among ctrs ("" when there is none).
func MySQLImageOf(ctrs []corev1.Container) string {
	for _, ctr := range ctrs {
		if ctr.Name == ContainerMySQL {
			return ctr.Image
		}
	}
	return ""
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
