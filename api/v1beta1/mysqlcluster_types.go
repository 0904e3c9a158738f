package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterFinalizer lets the operator finish its pre-delete work (keeping retained data,
// telling the topology manager) before a cluster disappears. The defaulting webhook sets it
// on a cluster's create, and the reconciler on its first pass when the webhook did not.
const ClusterFinalizer = "mysql.dolphin-operator.io/finalizer"

// MySQLClusterSpec is the desired state of a MySQL cluster: one primary and
// instances-1 replicas.
// +kubebuilder:validation:XValidation:rule="!has(self.primary) || self.primary.matches('^.+-[0-9]+$')",message="primary must name an instance (<cluster>-<ordinal>)"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="bootstrap is set when the cluster is created: it cannot be added or removed later"
type MySQLClusterSpec struct {
	// Instances is the number of MySQL servers: one primary and the rest replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Instances",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Instances *int32 `json:"instances"`

	// MySQL selects the server version, image and configuration.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MySQL"
	MySQL MySQLSpec `json:"mysql,omitempty"`

	// Storage is each instance's data volume.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage StorageSpec `json:"storage,omitempty"`

	// Resources are the mysqld container's requests and limits.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Replication tunes semi-synchronous replication and automatic failover.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replication"
	Replication ReplicationSpec `json:"replication,omitempty"`

	// Primary names the instance that should be primary (e.g. "mycluster-1"). Changing it
	// asks for a planned switchover. After a failover away from it, the operator switches
	// back once it has rejoined as a healthy replica. Empty: the operator picks, and keeps
	// its choice.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Desired primary",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Primary string `json:"primary,omitempty"`

	// TLS for client and replication connections.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS"
	TLS TLSSpec `json:"tls,omitempty"`

	// Backup schedules backups of the cluster. Absent: no scheduled backups.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup"
	Backup *BackupSpec `json:"backup,omitempty"`

	// Monitoring adds a metrics exporter and Prometheus objects.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Monitoring"
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// PodTemplate adds scheduling constraints and metadata to the instances' pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod template"
	PodTemplate PodTemplateSpec `json:"podTemplate,omitempty"`

	// UpdatePolicy says when the operator restarts the instances onto a pod template it
	// builds differently from the one they run.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Update policy"
	UpdatePolicy UpdatePolicySpec `json:"updatePolicy,omitempty"`

	// DeletionPolicy says what happens to data when the cluster is deleted: Delete removes
	// the volumes and secrets, Retain (the default) keeps them.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Retain
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Deletion policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Delete","urn:alm:descriptor:com.tectonic.ui:select:Retain"}
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Paused stops the operator from changing anything of this cluster (status is still
	// reported). For maintenance by hand.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Paused bool `json:"paused,omitempty"`

	// Bootstrap fills a new cluster with data from a backup. It is set when the cluster
	// is created and never changed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bootstrap cannot change after the cluster is created"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Bootstrap"
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Application is a database and an account for applications, so that they need neither
	// root nor the operator's accounts: the operator creates both on the primary and keeps
	// the account's password in the Secret <cluster>-app, with the connection details. Set
	// when the cluster is created (the operator's account for applications is granted that
	// database then); its database cannot change afterwards.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Application"
	Application *ApplicationSpec `json:"application,omitempty"`

	// NetworkPolicy says who may reach the instances' ports: the operator makes a
	// NetworkPolicy for them unless it is disabled. It takes effect where the cluster's
	// network plugin enforces NetworkPolicies.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Network policy"
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`
}

// NetworkPolicySpec is the instances' NetworkPolicy: MySQL's port admits the operator's
// pods, the cluster's own pods (instances replicating and cloning, backup and restore
// Jobs) and Clients; the exporter's port admits Metrics.
type NetworkPolicySpec struct {
	// Enabled makes the NetworkPolicy (default true); false deletes it.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Clients may reach MySQL's port, beside the operator and the cluster's own pods.
	// Unset: every pod of the cluster's namespace.
	// +optional
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`
	// Metrics may reach the exporter's port. Unset: anyone.
	// +optional
	Metrics []networkingv1.NetworkPolicyPeer `json:"metrics,omitempty"`
}

// ApplicationSpec names the application's database and account.
type ApplicationSpec struct {
	// Database is created if it does not exist (never dropped); the account has every
	// privilege on it, and none elsewhere.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]{1,64}$`
	Database string `json:"database"`
	// User is the account's name (default: the database's name), connecting from any host.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]{1,32}$`
	User string `json:"user,omitempty"`
	// PreviousPasswordRetention is how long the password a rotation replaced stays
	// accepted (MySQL's dual passwords), for every client to take up the new one (default
	// 1h). A rotation is asked for with the annotation
	// mysql.dolphin-operator.io/rotate-application-password.
	// +optional
	PreviousPasswordRetention *metav1.Duration `json:"previousPasswordRetention,omitempty"`
}

// ApplicationUser is the application account's name.
func (a *ApplicationSpec) ApplicationUser() string {
	if a.User != "" {
		return a.User
	}
	return a.Database
}

// DeletionPolicy is what happens to a cluster's data when the cluster is deleted.
type DeletionPolicy string

const (
	// DeletionPolicyDelete removes volumes and secrets with the cluster.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain keeps volumes and secrets after the cluster is gone.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// UpdatePolicySpec says when the instances restart onto a new pod template.
type UpdatePolicySpec struct {
	// OperatorUpgrade is what an operator upgrade does to running instances whose pod
	// template the new operator builds differently (another default image, probe, script
	// or my.cnf setting read at start). Hold (the default) keeps the template they run and
	// reports what a restart would change in the PendingRestart condition; a change of this
	// cluster's spec that restarts the instances anyway brings them onto the new template.
	// Roll restarts them onto it at once, replicas first and the primary last.
	// +optional
	// +kubebuilder:validation:Enum=Hold;Roll
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="On operator upgrade",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Hold","urn:alm:descriptor:com.tectonic.ui:select:Roll"}
	OperatorUpgrade OperatorUpgradePolicy `json:"operatorUpgrade,omitempty"`
}

// OperatorUpgradePolicy is what an operator upgrade does to running instances.
type OperatorUpgradePolicy string

const (
	// OperatorUpgradeHold keeps the pod template the instances run.
	OperatorUpgradeHold OperatorUpgradePolicy = "Hold"
	// OperatorUpgradeRoll restarts the instances onto the new operator's pod template.
	OperatorUpgradeRoll OperatorUpgradePolicy = "Roll"
)

// MySQLSpec selects the server.
type MySQLSpec struct {
	// Version is an LTS series ("8.4", "9.7") or an exact release in one ("8.4.6").
	// A series means the release the operator ships for it. Downgrades are refused, and
	// upgrades only go from one LTS series to the next.
	// +optional
	// +kubebuilder:validation:Pattern=`^(8\.4|9\.7)(\.[0-9]+)?$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MySQL version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Version string `json:"version,omitempty"`

	// Image overrides the server image that the operator picks for Version.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MySQL image",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Image string `json:"image,omitempty"`

	// Config adds my.cnf settings ([mysqld] section). Settings the operator owns (server_id,
	// gtid_mode, read_only, ports, paths, replication and TLS plumbing) are refused.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="my.cnf settings",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Config map[string]string `json:"config,omitempty"`
}

// StorageSpec is each instance's data volume.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.storageClassName) || (has(self.storageClassName) && self.storageClassName == oldSelf.storageClassName)",message="storageClassName is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || (has(self.size) && quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0)",message="size may grow but never shrink"
type StorageSpec struct {
	// Size of each instance's volume; it may grow, never shrink.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volume size"
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the volumes; empty means the cluster's default. Immutable.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage class",xDescriptors={"urn:alm:descriptor:io.kubernetes:StorageClass"}
	StorageClassName *string `json:"storageClassName,omitempty"`

	// WhenScaled says what happens to the volume of an instance a scale-down removes:
	// Retain (the default) keeps it, and a scale-up back reuses its data; Delete removes it
	// with the instance's pod (the StatefulSet's claim retention policy).
	// +optional
	// +kubebuilder:validation:Enum=Delete;Retain
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volumes of removed instances",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Delete","urn:alm:descriptor:com.tectonic.ui:select:Retain"}
	WhenScaled DeletionPolicy `json:"whenScaled,omitempty"`
}

// ReplicationSpec tunes replication.
type ReplicationSpec struct {
	// SemiSync makes the primary wait for replicas to acknowledge each transaction.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Semi-synchronous replication"
	SemiSync SemiSyncSpec `json:"semiSync,omitempty"`
	// Failover replaces an unreachable primary automatically.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Automatic failover"
	Failover FailoverSpec `json:"failover,omitempty"`
}

// SemiSyncSpec configures lossless (AFTER_SYNC) semi-synchronous replication.
type SemiSyncSpec struct {
	// Enabled turns semi-sync on when the cluster has replicas. Default: true.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`
	// WaitForReplicaCount is how many replicas must acknowledge a commit. Default: 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Acknowledging replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	WaitForReplicaCount *int32 `json:"waitForReplicaCount,omitempty"`
	// Timeout after which the primary stops waiting for acknowledgements. Default: a very
	// long time, so that an acknowledged write is on a replica (lossless) rather than
	// silently falling back to asynchronous replication.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Semi-sync timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// FailoverSpec configures automatic failover.
type FailoverSpec struct {
	// Enabled lets the operator promote a replica when the primary is lost. Default: true.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`
	// DetectionDelay is how long the primary must be unreachable before a failover. Default: 5s.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failure detection delay",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	DetectionDelay *metav1.Duration `json:"detectionDelay,omitempty"`
}

// TLSSpec configures TLS.
type TLSSpec struct {
	// Enabled requires TLS for client and replication connections. Default: true.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`
	// SecretName names a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) to use instead
	// of the certificates the operator issues and rotates. Its certificate must name each
	// instance as <pod>.<cluster>-instances.<namespace>.svc (replicas verify it); changes to
	// the Secret are loaded by mysqld without a restart.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	SecretName string `json:"secretName,omitempty"`
}

// BackupSpec schedules backups.
// +kubebuilder:validation:XValidation:rule="(has(self.suspend) && self.suspend) || (has(self.schedule) && size(self.schedule) > 0)",message="schedule is required unless backups are suspended"
type BackupSpec struct {
	// Schedule in cron format (five fields, as a CronJob; due times in UTC). Required
	// unless Suspend.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule,omitempty"`
	// Method of the scheduled backups. Default: Physical.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup method",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Logical","urn:alm:descriptor:com.tectonic.ui:select:Physical"}
	Method BackupMethod `json:"method,omitempty"`
	// Retention says which backups to keep.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup retention"
	Retention BackupRetention `json:"retention,omitempty"`
	// Target is where backups go. Default: a volume the size of an instance's.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup target"
	Target *BackupTarget `json:"target,omitempty"`
	// Suspend stops scheduling new backups; existing ones are kept.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend backups",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Suspend bool `json:"suspend,omitempty"`
	// BinlogArchive configures the archive of the primary's binary logs in Target, for
	// point-in-time recovery. It needs an S3 target. The operator runs one archiver pod
	// per cluster (a Deployment) that copies the primary's closed files to
	// [prefix/]namespace/cluster/binlog with an index, and reports on it in
	// status.backup and the BinlogArchiving condition.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Binary log archive"
	BinlogArchive *BinlogArchiveSpec `json:"binlogArchive,omitempty"`
	// Verify restores the newest completed backup into a throwaway server on a schedule
	// and checks it; status.backup.verification and the BackupVerified condition report
	// the outcome.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Restore verification"
	Verify *BackupVerifySpec `json:"verify,omitempty"`
}

// BinlogArchiveSpec configures the binary log archive.
type BinlogArchiveSpec struct {
	// ArchiveTimeout is how often the primary's binary log is rotated and its closed
	// files archived: the most a recovery's reach lags behind the primary. Default: 5m;
	// from 10s to 1h.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Archive timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ArchiveTimeout *metav1.Duration `json:"archiveTimeout,omitempty"`
}

// BackupRetention keeps the newest Count backups and drops backups older than MaxAge;
// with both, a backup goes when either says so.
type BackupRetention struct {
	// Count of backups to keep. Default: 7 when MaxAge is not set.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backups to keep",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	Count *int32 `json:"count,omitempty"`
	// MaxAge of a backup, e.g. "720h".
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Maximum backup age",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupTarget is where backups are written: exactly one of PVC and S3.
// +kubebuilder:validation:XValidation:rule="has(self.pvc) != has(self.s3)",message="exactly one of pvc and s3 must be set"
type BackupTarget struct {
	// PVC stores backups on a volume in the cluster's namespace.
	// +optional
	PVC *PVCTarget `json:"pvc,omitempty"`
	// S3 stores backups in an S3-compatible bucket.
	// +optional
	S3 *S3Target `json:"s3,omitempty"`
}

// PVCTarget is a backup volume. With ClaimName it uses an existing claim; otherwise the
// operator creates one of Size.
type PVCTarget struct {
	// ClaimName of an existing PersistentVolumeClaim.
	// +optional
	ClaimName string `json:"claimName,omitempty"`
	// Size of the claim the operator creates.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of the claim the operator creates.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// S3Target is an S3-compatible bucket.
type S3Target struct {
	// Bucket name.
	// +kubebuilder:validation:MinLength=1
	Bucket string `json:"bucket"`
	// Prefix of the objects' keys.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Endpoint URL for S3-compatible stores; empty means AWS.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Region of the bucket.
	// +optional
	Region string `json:"region,omitempty"`
	// ForcePathStyle addresses the bucket in the URL's path (endpoint/bucket/key) rather
	// than as a host name, as most S3-compatible servers want.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// CredentialsSecret names a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	CredentialsSecret corev1.LocalObjectReference `json:"credentialsSecret"`
	// CASecret is a Secret key holding the PEM certificates the endpoint's certificate is
	// checked against, instead of the system's.
	// +optional
	CASecret *corev1.SecretKeySelector `json:"caSecret,omitempty"`
}

// MonitoringSpec adds metrics.
type MonitoringSpec struct {
	// Exporter runs mysqld_exporter next to each instance.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Metrics exporter"
	Exporter ExporterSpec `json:"exporter,omitempty"`
	// ServiceMonitor creates a Prometheus Operator ServiceMonitor (when that CRD exists).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="ServiceMonitor"
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
	// PrometheusRule creates Dolphin's alerting rules (when that CRD exists).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="PrometheusRule"
	PrometheusRule PrometheusRuleSpec `json:"prometheusRule,omitempty"`
}

// ExporterSpec configures the metrics exporter sidecar.
type ExporterSpec struct {
	// Enabled adds the exporter sidecar.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
	// Image overrides the exporter image.
	// +optional
	Image string `json:"image,omitempty"`
	// Resources of the exporter container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled creates the ServiceMonitor.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
	// Interval between scrapes. Default: Prometheus's.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Labels added to the ServiceMonitor, for a Prometheus's selector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PrometheusRuleSpec configures the PrometheusRule.
type PrometheusRuleSpec struct {
	// Enabled creates the PrometheusRule.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
	// Labels added to the PrometheusRule, for a Prometheus's rule selector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PodTemplateSpec is what users may add to the instances' pods.
type PodTemplateSpec struct {
	// Metadata added to each pod.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`
	// Affinity replaces the operator's default anti-affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// TopologySpreadConstraints replace the operator's default spread over zones and nodes.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// NodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// PriorityClassName of the pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// PodMetadata is labels and annotations for pods.
type PodMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MySQLClusterStatus is what the operator observed.
type MySQLClusterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the conditions in one word.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase ClusterPhase `json:"phase,omitempty"`
	// Conditions: Ready, Progressing, Degraded, ReplicationHealthy, PendingRestart,
	// LastBackupSucceeded, Restored, BinlogArchiving, BackupVerified.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Instances that exist.
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// ReadyInstances that serve.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready instances",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	ReadyInstances int32 `json:"readyInstances,omitempty"`
	// CurrentPrimary is the instance that accepts writes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Current primary",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	CurrentPrimary string `json:"currentPrimary,omitempty"`
	// FencedInstances are the instances the operator holds fenced, as the annotation
	// mysql.dolphin-operator.io/fenced-instances asks: read-only, replication stopped, out of
	// both Services. One that does not answer is listed too: it is out of the Services, and
	// fenced before anything else once it answers.
	// +optional
	// +listType=set
	FencedInstances []string `json:"fencedInstances,omitempty"`
	// Endpoints are the Services clients connect to.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Endpoints"
	Endpoints ClusterEndpoints `json:"endpoints,omitempty"`
	// Version is the MySQL release the instances run, as the rolled-out image's tag names it
	// (a series in spec.mysql.version is recorded as its release); the spec's version when
	// the image names none (a digest).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Version string `json:"version,omitempty"`
	// Rollout reports a roll of the instances onto a changed pod template (absent when every
	// instance runs the current one).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rollout"
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Backup reports scheduled backups.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Backup"
	Backup BackupStatus `json:"backup,omitempty"`
	// Restore reports the restore of spec.bootstrap.fromBackup.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Restore"
	Restore *RestoreStatus `json:"restore,omitempty"`
	// History is what the operator did to the instances, newest last: the last
	// HistoryLength elections, promotions, failovers, switchovers, fences, isolations,
	// clones and evictions (each also an Event).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	History []HistoryEntry `json:"history,omitempty"`
}

// HistoryLength is how many entries status.history keeps.
const HistoryLength = 20

// HistoryEntry is one action of the operator on an instance.
type HistoryEntry struct {
	// Time is when the action was carried out.
	Time metav1.Time `json:"time"`
	// Action: Bootstrap, Promote, Failover, Switchover, Fence, Isolate, Clone, Evict, or a
	// rotation of the operator's passwords' RetainPasswords and DiscardOldPasswords.
	Action string `json:"action"`
	// Instance is the instance acted on (the new primary of a promotion, failover or
	// switchover).
	Instance string `json:"instance"`
	// From is the former primary (Failover, Switchover) or the donor (Clone).
	// +optional
	From string `json:"from,omitempty"`
	// Reason is the topology state's reason when it was decided (PasswordRotation for a
	// rotation's steps).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RolloutStatus is how far a roll got: replicas restart first, one at a time, each Ready and
// caught up before the next; then the primary hands over to an updated replica and restarts.
type RolloutStatus struct {
	// Revision is the StatefulSet revision the instances roll onto.
	Revision string `json:"revision"`
	// Updated is how many of the Total instances run it.
	Updated int32 `json:"updated"`
	Total   int32 `json:"total"`
	// Step says what the roll does or waits for now.
	Step string `json:"step"`
}

// ClusterEndpoints are host:port addresses of the cluster's Services.
type ClusterEndpoints struct {
	// Primary is read-write.
	// +optional
	Primary string `json:"primary,omitempty"`
	// Replicas is read-only, balanced over the replicas.
	// +optional
	Replicas string `json:"replicas,omitempty"`
}

// BackupStatus reports scheduled backups.
type BackupStatus struct {
	// LastSuccessful is when the newest successful backup completed.
	// +optional
	LastSuccessful *metav1.Time `json:"lastSuccessful,omitempty"`
	// LastFailure is when the newest failed backup failed.
	// +optional
	LastFailure *metav1.Time `json:"lastFailure,omitempty"`
	// NextScheduled is when the next backup starts.
	// +optional
	NextScheduled *metav1.Time `json:"nextScheduled,omitempty"`
	// LastScheduleTime is the last due time the schedule reached: a backup was created
	// for it, or it passed while backups were suspended. Due times before it are not run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// FirstRecoverableTime and LastRecoverableTime bound the times the binary log archive
	// and the completed backups reach: from the completion of the oldest backup the
	// archive continues without a gap, to the newest archived event. Absent while there
	// is no such backup.
	// +optional
	FirstRecoverableTime *metav1.Time `json:"firstRecoverableTime,omitempty"`
	// +optional
	LastRecoverableTime *metav1.Time `json:"lastRecoverableTime,omitempty"`
	// LastArchivedBinlog names the newest archived binary log file ("<server
	// uuid>/<file>").
	// +optional
	LastArchivedBinlog string `json:"lastArchivedBinlog,omitempty"`
	// Verification reports restore verification (spec.backup.verify).
	// +optional
	Verification *VerificationStatus `json:"verification,omitempty"`
}

// MySQLCluster is a MySQL cluster with one primary and replicas kept in sync with GTID
// semi-synchronous replication.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=mysqlc,categories=dolphin
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Instances",type=integer,JSONPath=`.spec.instances`
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.currentPrimary`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="MySQL Cluster",resources={{StatefulSet,v1,""},{Service,v1,""},{Secret,v1,""},{ConfigMap,v1,""},{PodDisruptionBudget,v1,""},{MySQLBackup,v1beta1,""}}
type MySQLCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MySQLClusterSpec   `json:"spec"`
	Status MySQLClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MySQLClusterList is a list of MySQLCluster.
type MySQLClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MySQLCluster `json:"items"`
}
