package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapSpec says where a new cluster's data comes from. It is read only while the
// cluster's instances are first created.
type BootstrapSpec struct {
	// FromBackup restores the first instance from a completed backup before any instance
	// starts; the others are then cloned from it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="From backup"
	FromBackup *BootstrapFromBackup `json:"fromBackup,omitempty"`
}

// BootstrapFromBackup names the backup a cluster is restored from: a MySQLBackup (name),
// or a store holding a cluster's backups (source), exactly one of the two.
type BootstrapFromBackup struct {
	// Name of a MySQLBackup in the cluster's namespace. Its data is read from where its
	// status says it is stored, and checked against its SHA-256 and GTID set.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup",xDescriptors={"urn:alm:descriptor:io.kubernetes:mysql.dolphin-operator.io:v1beta1:MySQLBackup"}
	Name string `json:"name,omitempty"`
	// Source restores from the backups a cluster stored in S3, without their MySQLBackup
	// objects (another Kubernetes cluster's, or ones deleted since): the operator reads
	// the manifests stored beside the backups' data and restores the one Source.Backup
	// names, or else the newest that reaches the recovery target (the newest of all
	// without a target). Its data is checked against its manifest's SHA-256 and GTID set.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Stored backups"
	Source *BackupSource `json:"source,omitempty"`
	// Timeout bounds the restore: a restore not done by then is Failed. Default 2h.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// TargetTime recovers to a point in time: after the backup, the transactions of the
	// backup cluster's binary log archive whose events are from before this second are
	// replayed, and none from it on. The backup must be stored in S3, where its cluster
	// archives its binary logs (spec.backup.binlogArchive), and have completed before
	// TargetTime; the archive must reach it without a gap.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target time",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	TargetTime *metav1.Time `json:"targetTime,omitempty"`
	// TargetGTID recovers to a transaction instead ("<server uuid>:<number>"): after the
	// backup, the archive's transactions up to and including it, in the archive's order.
	// The backup must not hold it already. At most one of TargetTime and TargetGTID.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target GTID",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	TargetGTID string `json:"targetGTID,omitempty"`
}

// BackupSource is where a cluster's backups are stored: under
// [prefix/]<namespace>/<cluster>/base/ in the bucket, as Dolphin stores them.
type BackupSource struct {
	// Cluster is the name of the cluster the backups are of.
	// +kubebuilder:validation:MinLength=1
	Cluster string `json:"cluster"`
	// Namespace the backups' cluster ran in. Default: this cluster's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// S3 is the bucket, as the backups' cluster wrote to it; its Secrets are read from
	// this cluster's namespace.
	S3 S3Target `json:"s3"`
	// Backup is the stored backup to restore: its folder under base/
	// (<created, UTC>-<MySQLBackup name>, e.g. 20261201T030000Z-orders-daily-20261201-0300).
	// Default: chosen by the recovery target, as above.
	// +optional
	Backup string `json:"backup,omitempty"`
}

// RestoreStatus reports the restore a cluster was bootstrapped with.
type RestoreStatus struct {
	// Backup is the MySQLBackup restored, or with fromBackup.source the stored backup
	// (its folder under base/).
	// +optional
	Backup string `json:"backup,omitempty"`
	// Location is where its data was read from.
	// +optional
	Location string `json:"location,omitempty"`
	// Method of the backup restored.
	// +optional
	Method BackupMethod `json:"method,omitempty"`
	// Job is the Job that restores the data.
	// +optional
	Job string `json:"job,omitempty"`
	// StartedAt is when the restore's Job was created.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the restored data was in place (absent until then).
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// GTIDSet is the restored instance's gtid_executed, checked equal to the backup's
	// (with, for a point-in-time recovery, the transactions replayed).
	// +optional
	GTIDSet string `json:"gtidSet,omitempty"`
	// TargetTime or TargetGTID is what was recovered to (spec.bootstrap.fromBackup).
	// +optional
	TargetTime *metav1.Time `json:"targetTime,omitempty"`
	// +optional
	TargetGTID string `json:"targetGTID,omitempty"`
	// BinlogFiles is how many archived binary log files were replayed.
	// +optional
	BinlogFiles int32 `json:"binlogFiles,omitempty"`
}
