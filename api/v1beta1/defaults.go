package v1beta1

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults a cluster gets for what it leaves out.
const (
	DefaultStorageSize          = "10Gi"
	DefaultSemiSyncReplicaCount = int32(1)
	// DefaultSemiSyncTimeout is long on purpose: a primary that gave up waiting would
	// acknowledge writes that no replica has, and a failover would then lose them.
	DefaultSemiSyncTimeout     = 24 * time.Hour
	DefaultFailoverDetection   = 5 * time.Second
	DefaultBackupRetentionKeep = int32(7)
	// DefaultArchiveTimeout is how often the binary log archive rotates the primary's log.
	DefaultArchiveTimeout = 5 * time.Minute
	// DefaultPreviousPasswordRetention is how long the application account's previous
	// password stays accepted after a rotation.
	DefaultPreviousPasswordRetention = time.Hour
)

// Default fills every field the user left out, and returns the paths it filled, so the
// reconciler can say when it had to (webhooks off, or an object stored before a default
// existed). The mutating webhook calls the same method.
func (c *MySQLCluster) Default() []string {
	var set []string
	mark := func(path string) { set = append(set, path) }
	s := &c.Spec
	if s.MySQL.Version == "" {
		s.MySQL.Version = DefaultMySQLVersion
		mark("spec.mysql.version")
	}
	if s.Storage.Size == nil {
		q := resource.MustParse(DefaultStorageSize)
		s.Storage.Size = &q
		mark("spec.storage.size")
	}
	if s.Storage.WhenScaled == "" {
		s.Storage.WhenScaled = DeletionPolicyRetain
		mark("spec.storage.whenScaled")
	}
	if a := s.Application; a != nil && a.PreviousPasswordRetention == nil {
		a.PreviousPasswordRetention = &metav1.Duration{Duration: DefaultPreviousPasswordRetention}
		mark("spec.application.previousPasswordRetention")
	}
	if s.NetworkPolicy.Enabled == nil {
		s.NetworkPolicy.Enabled = new(true)
		mark("spec.networkPolicy.enabled")
	}
	ss := &s.Replication.SemiSync
	if ss.Enabled == nil {
		ss.Enabled = new(true)
		mark("spec.replication.semiSync.enabled")
	}
	if ss.WaitForReplicaCount == nil {
		ss.WaitForReplicaCount = new(DefaultSemiSyncReplicaCount)
		mark("spec.replication.semiSync.waitForReplicaCount")
	}
	if ss.Timeout == nil {
		ss.Timeout = &metav1.Duration{Duration: DefaultSemiSyncTimeout}
		mark("spec.replication.semiSync.timeout")
	}
	fo := &s.Replication.Failover
	if fo.Enabled == nil {
		fo.Enabled = new(true)
		mark("spec.replication.failover.enabled")
	}
	if fo.DetectionDelay == nil {
		fo.DetectionDelay = &metav1.Duration{Duration: DefaultFailoverDetection}
		mark("spec.replication.failover.detectionDelay")
	}
	if s.TLS.Enabled == nil {
		s.TLS.Enabled = new(true)
		mark("spec.tls.enabled")
	}
	if s.UpdatePolicy.OperatorUpgrade == "" {
		s.UpdatePolicy.OperatorUpgrade = OperatorUpgradeHold
		mark("spec.updatePolicy.operatorUpgrade")
	}
	if s.DeletionPolicy == "" {
		s.DeletionPolicy = DeletionPolicyRetain
		mark("spec.deletionPolicy")
	}
	if s.Backup != nil {
		set = append(set, s.Backup.defaults(s.Storage.Size)...)
	}
	return set
}

func (b *BackupSpec) defaults(dataSize *resource.Quantity) []string {
	var set []string
	if b.Retention.Count == nil && b.Retention.MaxAge == nil {
		b.Retention.Count = new(DefaultBackupRetentionKeep)
		set = append(set, "spec.backup.retention.count")
	}
	if b.Target == nil {
		// A dump is smaller than the data files it comes from; a volume as large as one
		// instance's holds several.
		size := dataSize.DeepCopy()
		b.Target = &BackupTarget{PVC: &PVCTarget{Size: &size}}
		set = append(set, "spec.backup.target")
	}
	if a := b.BinlogArchive; a != nil && a.ArchiveTimeout == nil {
		a.ArchiveTimeout = &metav1.Duration{Duration: DefaultArchiveTimeout}
		set = append(set, "spec.backup.binlogArchive.archiveTimeout")
	}
	return set
}

// Default fills what a backup leaves out and returns the paths it filled.
func (b *MySQLBackup) Default() []string {
	if b.Spec.Method == "" {
		b.Spec.Method = BackupMethodPhysical
		return []string{"spec.method"}
	}
	return nil
}

// InstanceName is the name of the instance (and pod) with the given ordinal.
func (c *MySQLCluster) InstanceName(ordinal int) string {
	return fmt.Sprintf("%s-%d", c.Name, ordinal)
}

// InstanceOrdinal is the ordinal of the instance (or pod) name, ok false when the name is
// not one of this cluster's instances ("<cluster>-<ordinal>", the ordinal without leading
// zeros).
func (c *MySQLCluster) InstanceOrdinal(name string) (int, bool) {
	digits, found := strings.CutPrefix(name, c.Name+"-")
	n, err := strconv.Atoi(digits)
	if !found || err != nil || n < 0 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}
