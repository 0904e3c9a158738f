package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MySQLClusterSpec is the v1alpha1 cluster: a size, a version, a volume size, and
// optional daily backups.
type MySQLClusterSpec struct {
	// Replicas is the number of MySQL servers (v1beta1: spec.instances).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas"`
	// Version is the MySQL series ("8.4", "9.7") or release (v1beta1: spec.mysql.version).
	// +optional
	// +kubebuilder:validation:Pattern=`^(8\.4|9\.7)(\.[0-9]+)?$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MySQL version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Version string `json:"version,omitempty"`
	// StorageSize of each server's volume (v1beta1: spec.storage.size).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volume size"
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`
	// Backup schedules backups (v1beta1: spec.backup).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup"
	Backup *BackupSpec `json:"backup,omitempty"`
}

// BackupSpec is v1alpha1's backup schedule.
type BackupSpec struct {
	// Enabled runs the schedule (v1beta1: spec.backup.suspend is its negation).
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backups enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled"`
	// Schedule in cron format.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule,omitempty"`
	// Retention is how many backups to keep (v1beta1: spec.backup.retention.count).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backups to keep",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	Retention *int32 `json:"retention,omitempty"`
}

// MySQLClusterStatus is v1alpha1's status.
type MySQLClusterStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase string `json:"phase,omitempty"`
	// ReadyReplicas (v1beta1: status.readyInstances).
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Primary (v1beta1: status.currentPrimary).
	// +optional
	Primary string `json:"primary,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MySQLCluster is a MySQL cluster (v1alpha1; prefer v1beta1).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mysqlc,categories=dolphin
// +kubebuilder:deprecatedversion:warning="mysql.dolphin-operator.io/v1alpha1 MySQLCluster is deprecated; use v1beta1"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.primary`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="MySQL Cluster (v1alpha1)",resources={{StatefulSet,v1,""},{Service,v1,""},{Secret,v1,""},{ConfigMap,v1,""},{PodDisruptionBudget,v1,""},{MySQLBackup,v1beta1,""}}
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

// MySQLBackupSpec is v1alpha1's one-off backup.
type MySQLBackupSpec struct {
	// ClusterName of the MySQLCluster to back up (v1beta1: spec.cluster).
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ClusterName string `json:"clusterName"`
}

// MySQLBackupStatus is v1alpha1's backup status.
type MySQLBackupStatus struct {
	// +optional
	Phase string `json:"phase,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// MySQLBackup is one backup of a cluster (v1alpha1; prefer v1beta1).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mysqlbk,categories=dolphin
// +kubebuilder:deprecatedversion:warning="mysql.dolphin-operator.io/v1alpha1 MySQLBackup is deprecated; use v1beta1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="MySQL Backup (v1alpha1)",resources={{Job,v1,""}}
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
