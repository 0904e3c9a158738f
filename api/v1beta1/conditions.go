package v1beta1

// Condition types of a MySQLCluster. Each has exactly one writer: the MySQLCluster
// reconciler's status step.
const (
	// ConditionReady: every instance runs, replication is healthy and the primary accepts writes.
	ConditionReady = "Ready"
	// ConditionProgressing: the operator is changing something (creating, scaling, rolling,
	// switching over) and has not finished.
	ConditionProgressing = "Progressing"
	// ConditionDegraded: the cluster serves but something needs attention (an instance down,
	// replication broken, errant transactions, a failed backup, an invalid setting).
	ConditionDegraded = "Degraded"
	// ConditionReplicationHealthy: every replica replicates from the primary with both
	// threads running.
	ConditionReplicationHealthy = "ReplicationHealthy"
	// ConditionPendingRestart: the instances run a pod template other than the one this
	// operator builds for the spec, held across an operator upgrade
	// (spec.updatePolicy.operatorUpgrade Hold); the message says what a restart would change.
	ConditionPendingRestart = "PendingRestart"
	// ConditionLastBackupSucceeded: the cluster's newest ended backup completed (absent
	// until one has ended).
	ConditionLastBackupSucceeded = "LastBackupSucceeded"
	// ConditionRestored: the data of spec.bootstrap.fromBackup is in place (absent
	// without spec.bootstrap.fromBackup). False while it is being restored, or with the
	// reason it cannot be.
	ConditionRestored = "Restored"
	// ConditionBinlogArchiving: the binary log archiver keeps up (absent without
	// spec.backup.binlogArchive). Judged by when the archiver last found every closed
	// file of the primary stored, as its index in the bucket says.
	ConditionBinlogArchiving = "BinlogArchiving"
	// ConditionBackupVerified: the newest verification (spec.backup.verify) restored its
	// backup and found it as recorded (absent without spec.backup.verify). False with
	// the failure's reason; Unknown before the first one ends.
	ConditionBackupVerified = "BackupVerified"
)

// Condition reasons (CamelCase, as metav1.Condition requires).
const (
	ReasonReconciling       = "Reconciling"
	ReasonReconciled        = "Reconciled"
	ReasonPaused            = "Paused"
	ReasonInstancesNotReady = "InstancesNotReady"
	ReasonAllInstancesReady = "AllInstancesReady"
	ReasonScaling           = "Scaling"
	ReasonRollingUpdate     = "RollingUpdate"
	// ReasonRollPaused: a pod the roll restarted has not become Ready (see status.rollout).
	ReasonRollPaused           = "RollPaused"
	ReasonSwitchover           = "Switchover"
	ReasonFailover             = "Failover"
	ReasonPrimaryUnavailable   = "PrimaryUnavailable"
	ReasonReplicationBroken    = "ReplicationBroken"
	ReasonErrantTransactions   = "ErrantTransactions"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonBackupSucceeded      = "BackupSucceeded"
	ReasonBackupFailed         = "BackupFailed"
	ReasonBackupRunning        = "BackupRunning"
	ReasonBackupPending        = "BackupPending"
	ReasonTopologyNotManaged   = "TopologyNotManaged"
	ReasonReplicationHealthy   = "ReplicationHealthy"
	ReasonDeletionInProgress   = "DeletionInProgress"
	ReasonBackupTargetNotFound = "BackupTargetNotFound"
	// ReasonVolumeExpansionRefused: spec.storage.size is larger than claims whose
	// StorageClass does not allow expansion (or that have none); they keep their size.
	ReasonVolumeExpansionRefused = "VolumeExpansionRefused"
	// ReasonResizingVolumes: claims ask for spec.storage.size and their provisioner has not
	// yet grown the volumes.
	ReasonResizingVolumes = "ResizingVolumes"
	// ReasonTemplateHeld: PendingRestart is True; the instances keep the pod template an
	// earlier operator built.
	ReasonTemplateHeld = "TemplateHeld"
	// ReasonTemplateCurrent: PendingRestart is False; the StatefulSet has the pod template
	// this operator builds.
	ReasonTemplateCurrent = "TemplateCurrent"
)

// Reasons of the topology manager (ReplicationHealthy and Degraded conditions, Events).
const (
	ReasonWaitingForInstances = "WaitingForInstances"
	ReasonBootstrap           = "Bootstrap"
	ReasonInstancesDiverged   = "InstancesDiverged"
	ReasonFailoverDisabled    = "FailoverDisabled"
	ReasonFailoverBlocked     = "FailoverBlocked"
	ReasonNoFailoverCandidate = "NoFailoverCandidate"
	ReasonSwitchoverBlocked   = "SwitchoverBlocked"
	ReasonRogueWriterFenced   = "RogueWriterFenced"
	// ReasonInstanceFenced: an instance is fenced on the user's request (the annotation
	// mysql.dolphin-operator.io/fenced-instances).
	ReasonInstanceFenced = "InstanceFenced"
	// ReasonApplicationAccount: spec.application's account was applied on the primary.
	ReasonApplicationAccount = "ApplicationAccount"
	// ReasonAccountsNarrowed: the accounts an earlier release made were narrowed in place
	// on the primary (no root over TCP, the admin account's privileges cut to what the
	// operator needs).
	ReasonAccountsNarrowed = "AccountsNarrowed"
	// ReasonPasswordRotation: a rotation of the operator's accounts' passwords (the
	// annotation mysql.dolphin-operator.io/rotate-operator-passwords) took a step.
	ReasonPasswordRotation = "PasswordRotation"
	// ReasonFailoverRefused: a manual failover (the annotation
	// mysql.dolphin-operator.io/failover) was refused; the Warning Event says why.
	ReasonFailoverRefused     = "FailoverRefused"
	ReasonCloning             = "Cloning"
	ReasonInstanceUnreachable = "InstanceUnreachable"
	ReasonConfiguring         = "Configuring"
	// ReasonCertificateReloadFailed: an instance refused to load the TLS Secret's files
	// (ALTER INSTANCE RELOAD TLS) and serves its previous certificate (a Warning Event).
	ReasonCertificateReloadFailed = "CertificateReloadFailed"
	// ReasonSettingRefused: an instance refused an online setting's SET GLOBAL and keeps
	// its value until its next restart (a Warning Event).
	ReasonSettingRefused = "SettingRefused"
	// ReasonTopologyFailed: the topology manager could not read what it needs from the
	// API server (the message says what), or a pass failed.
	ReasonTopologyFailed = "TopologyFailed"
)

// Reasons of a MySQLBackup's Complete and Failed conditions (and of the cluster's
// LastBackupSucceeded condition, which repeats its newest ended backup's).
const (
	// ReasonBackupCompleted: the data and its manifest are stored.
	ReasonBackupCompleted = "BackupCompleted"
	// ReasonClusterNotFound: the backup names a cluster that does not exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonNoBackupTarget: neither the backup nor its cluster says where backups go.
	ReasonNoBackupTarget = "NoBackupTarget"
	// ReasonNoBackupSource: no instance of the cluster is fit to be read from.
	ReasonNoBackupSource = "NoBackupSource"
	// ReasonSourceUnreachable: the dump could not connect to its source, or lost it.
	ReasonSourceUnreachable = "SourceUnreachable"
	// ReasonSourceAccessDenied: the source refused the backup account.
	ReasonSourceAccessDenied = "SourceAccessDenied"
	// ReasonDumpFailed: mysqldump failed; the message has its words.
	ReasonDumpFailed = "DumpFailed"
	// ReasonDumpIncomplete: the dump ended without its completion trailer or GTID set.
	ReasonDumpIncomplete = "DumpIncomplete"
	// ReasonStorageUnreachable: the object store could not be reached in time.
	ReasonStorageUnreachable = "StorageUnreachable"
	// ReasonStorageAccessDenied: the object store refused the credentials.
	ReasonStorageAccessDenied = "StorageAccessDenied"
	// ReasonStorageBucketNotFound: the bucket does not exist.
	ReasonStorageBucketNotFound = "StorageBucketNotFound"
	// ReasonStorageFull: the target volume has no space left.
	ReasonStorageFull = "StorageFull"
	// ReasonStorageFailed: the object store answered with another error.
	ReasonStorageFailed = "StorageFailed"
	// ReasonDeadlineExceeded: the run took longer than the backup's timeout.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonBackupDiskFull: the backup pod's work volume (a physical backup's copy) has
	// no space left.
	ReasonBackupDiskFull = "BackupDiskFull"
	// ReasonBackupPodFailed: the backup's pod ended without a report of its own (killed,
	// evicted, out of memory, its node lost) or could not run the dump.
	ReasonBackupPodFailed = "BackupPodFailed"
)

// Reasons of a MySQLCluster's Restored condition (with the storage reasons above, and
// DeadlineExceeded, when reading the backup failed for that reason).
const (
	// ReasonRestoreCompleted: the backup's data is in place with the backup's GTID set.
	ReasonRestoreCompleted = "RestoreCompleted"
	// ReasonRestoring: the restore's Job runs.
	ReasonRestoring = "Restoring"
	// ReasonBackupNotFound: the MySQLBackup named does not exist (yet).
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonBackupNotCompleted: the MySQLBackup named has not completed: it is still
	// pending or running (the restore waits), or it failed (the restore cannot happen).
	ReasonBackupNotCompleted = "BackupNotCompleted"
	// ReasonBackupCorrupted: the stored data is not what the backup's status says (its
	// SHA-256 or size differ, or it does not decompress).
	ReasonBackupCorrupted = "BackupCorrupted"
	// ReasonBackupDataMissing: nothing is stored where the backup's status says its data is.
	ReasonBackupDataMissing = "BackupDataMissing"
	// ReasonRestoreFailed: the data could not be restored: the temporary server did not
	// start on it, the dump or the binary logs did not replay, or the GTID set restored
	// is not the backup's (with the replayed transactions).
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonDataVolumeFull: the first instance's volume has no room for the data.
	ReasonDataVolumeFull = "DataVolumeFull"
	// ReasonRestorePodFailed: the restore's pod ended without a report of its own.
	ReasonRestorePodFailed = "RestorePodFailed"
	// ReasonTargetNotRecoverable: a point-in-time recovery's target is outside what the
	// backup and the binary log archive reach: a time before the backup completed, after
	// the archive's newest event, or across a gap in the archive; a transaction the
	// backup holds already or no archived file holds (or the backup is not stored in S3
	// beside the archive).
	ReasonTargetNotRecoverable = "TargetNotRecoverable"
	// ReasonNoOperatorImage: the operator does not know its own image, which restore and
	// backup pods run.
	ReasonNoOperatorImage = "NoOperatorImage"
)

// Reasons of a MySQLCluster's BackupVerified condition (with a restore's reasons, when a
// verification failed for one).
const (
	// ReasonVerified: the verification restored the backup and it is as recorded.
	ReasonVerified = "Verified"
	// ReasonVerificationPending: no verification has ended yet (Unknown).
	ReasonVerificationPending = "VerificationPending"
	// ReasonNoBackupToVerify: the cluster has no completed backup to verify (Unknown).
	ReasonNoBackupToVerify = "NoBackupToVerify"
)

// Reasons of a MySQLCluster's BinlogArchiving condition (with the storage reasons above,
// when the archive's index could not be read, and NoOperatorImage).
const (
	// ReasonArchiving: the archiver stored every closed file of the primary lately.
	ReasonArchiving = "Archiving"
	// ReasonArchivePending: the archiver has not yet ended a round (Unknown).
	ReasonArchivePending = "ArchivePending"
	// ReasonArchiveStalled: the archiver's last complete round is older than twice the
	// archive timeout (and half a minute): recoveries reach less and less far.
	ReasonArchiveStalled = "ArchiveStalled"
	// ReasonArchiveIndexInvalid: the index in the bucket cannot be read as one.
	ReasonArchiveIndexInvalid = "ArchiveIndexInvalid"
)

// ClusterPhase is a one-word summary of a MySQLCluster for humans and printer columns;
// automation should read the conditions.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Updating;Degraded;Failed;Paused;Deleting
type ClusterPhase string

// The phases of a MySQLCluster.
const (
	PhasePending      ClusterPhase = "Pending"
	PhaseProvisioning ClusterPhase = "Provisioning"
	PhaseReady        ClusterPhase = "Ready"
	PhaseUpdating     ClusterPhase = "Updating"
	PhaseDegraded     ClusterPhase = "Degraded"
	PhaseFailed       ClusterPhase = "Failed"
	PhasePaused       ClusterPhase = "Paused"
	PhaseDeleting     ClusterPhase = "Deleting"
)

// ClusterPhases are every phase, in the order of the enum above.
var ClusterPhases = []ClusterPhase{PhasePending, PhaseProvisioning, PhaseReady, PhaseUpdating, PhaseDegraded,
	PhaseFailed, PhasePaused, PhaseDeleting}

// BackupPhase is where a MySQLBackup is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

// The phases of a MySQLBackup.
const (
	BackupPhasePending   BackupPhase = "Pending"
	BackupPhaseRunning   BackupPhase = "Running"
	BackupPhaseCompleted BackupPhase = "Completed"
	BackupPhaseFailed    BackupPhase = "Failed"
)

// Condition types of a MySQLBackup.
const (
	// BackupConditionComplete: the backup finished and its data is at its location.
	BackupConditionComplete = "Complete"
	// BackupConditionFailed: the backup failed; the message says why.
	BackupConditionFailed = "Failed"
)
