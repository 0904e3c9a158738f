package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupVerifySpec schedules restore verification: the newest completed backup is
// restored into a throwaway server and checked as a restore checks it (its SHA-256, its
// GTID set, and for a physical backup every table's row count and CHECKSUM TABLE against
// those recorded when it was taken).
type BackupVerifySpec struct {
	// Schedule in cron format (five fields, as a CronJob; due times in UTC).
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Verification schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule"`
	// Timeout bounds one verification. Default 2h.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// BackupVerification is one verification run.
type BackupVerification struct {
	// Backup is the MySQLBackup restored; Job the Job that restored it.
	Backup string `json:"backup"`
	// +optional
	Job string `json:"job,omitempty"`
	// DueTime is the schedule's due time the run was for.
	// +optional
	DueTime *metav1.Time `json:"dueTime,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when it ended (absent while it runs).
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Reason is Verified, or why the verification failed (a restore's reasons); Message
	// says more.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Tables is how many tables were checked against the backup's record.
	// +optional
	Tables int32 `json:"tables,omitempty"`
}

// VerificationStatus reports restore verification.
type VerificationStatus struct {
	// Running is the verification in progress.
	// +optional
	Running *BackupVerification `json:"running,omitempty"`
	// Last is the newest verification that ended.
	// +optional
	Last *BackupVerification `json:"last,omitempty"`
	// LastSucceeded is when a verification last succeeded.
	// +optional
	LastSucceeded *metav1.Time `json:"lastSucceeded,omitempty"`
	// NextScheduled is the next due time.
	// +optional
	NextScheduled *metav1.Time `json:"nextScheduled,omitempty"`
	// LastScheduleTime is the last due time the schedule reached; due times before it
	// are not run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}
