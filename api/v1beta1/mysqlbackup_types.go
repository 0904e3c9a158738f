package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupMethod is how a backup is taken.
// +kubebuilder:validation:Enum=Logical;Physical
type BackupMethod string

const (
	// BackupMethodLogical dumps SQL with mysqldump (consistent, portable, slower to
	// restore).
	BackupMethodLogical BackupMethod = "Logical"
	// BackupMethodPhysical copies the InnoDB data with CLONE into the backup pod and
	// stores it as an archive (restores as fast as files unpack).
	BackupMethodPhysical BackupMethod = "Physical"
)

// MySQLBackupSpec asks for one backup of a cluster.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a backup's spec is immutable"
type MySQLBackupSpec struct {
	// Cluster is the MySQLCluster to back up, in the backup's namespace.
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:mysql.dolphin-operator.io:v1beta1:MySQLCluster"}
	Cluster string `json:"cluster"`
	// Method of the backup. Default: Physical (a clone of a replica: restores as fast as
	// files unpack); Logical for a portable SQL dump.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Method",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Logical","urn:alm:descriptor:com.tectonic.ui:select:Physical"}
	Method BackupMethod `json:"method,omitempty"`
	// Target overrides the cluster's backup target for this backup.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target"
	Target *BackupTarget `json:"target,omitempty"`
	// Timeout bounds the run: past it the backup is Failed (DeadlineExceeded). Default: 1h.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// MySQLBackupStatus reports the backup.
type MySQLBackupStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase of the backup.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase BackupPhase `json:"phase,omitempty"`
	// StartedAt is when the backup began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the backup finished.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Completed at"
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Size of the backup data.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Size"
	Size *resource.Quantity `json:"size,omitempty"`
	// Location of the backup data (a volume path or an s3:// URL).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Location",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Location string `json:"location,omitempty"`
	// SHA256 of the stored backup object, hex.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Method the backup was taken with.
	// +optional
	Method BackupMethod `json:"method,omitempty"`
	// Source is the instance the backup was read from.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Source instance",xDescriptors={"urn:alm:descriptor:io.kubernetes:Pod"}
	Source string `json:"source,omitempty"`
	// GTIDSet is what the backup holds: the source's gtid_executed at the backup point.
	// +optional
	GTIDSet string `json:"gtidSet,omitempty"`
	// BinlogFile and BinlogPosition are the source's binary log coordinates at the backup
	// point.
	// +optional
	BinlogFile string `json:"binlogFile,omitempty"`
	// +optional
	BinlogPosition int64 `json:"binlogPosition,omitempty"`
	// MySQLVersion of the source.
	// +optional
	MySQLVersion string `json:"mysqlVersion,omitempty"`
	// Job runs the backup.
	// +optional
	Job string `json:"job,omitempty"`
	// Target is where the backup went (spec.target, else the cluster's at the start):
	// where its data is deleted from with the MySQLBackup.
	// +optional
	Target *BackupTarget `json:"target,omitempty"`
	// Conditions: Complete, Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MySQLBackup is one backup of a MySQLCluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=mysqlbk,categories=dolphin
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Method",type=string,JSONPath=`.spec.method`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completedAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="MySQL Backup",resources={{Job,v1,""}}
type MySQLBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MySQLBackupSpec   `json:"spec"`
	Status MySQLBackupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MySQLBackupList is a list of MySQLBackup.
type MySQLBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MySQLBackup `json:"items"`
}

// Hub marks v1beta1 as the version every other converts to and from.
func (*MySQLCluster) Hub() {}

// Hub marks v1beta1 as the version every other converts to and from.
func (*MySQLBackup) Hub() {}
