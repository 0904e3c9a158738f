package v1beta1

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDefaultFillsEveryOptionalSettingOnceAndSaysWhich(t *testing.T) {
	c := &MySQLCluster{Spec: MySQLClusterSpec{Instances: new(int32(3)), Backup: &BackupSpec{Schedule: "@daily"}}}
	set := c.Default()
	for _, path := range []string{"spec.mysql.version", "spec.storage.size", "spec.replication.semiSync.enabled",
		"spec.replication.failover.detectionDelay", "spec.tls.enabled", "spec.deletionPolicy",
		"spec.backup.retention.count", "spec.backup.target"} {
		if !slices.Contains(set, path) {
			t.Errorf("Default did not report %s; reported %v", path, set)
		}
	}
	if c.Spec.MySQL.Version != "8.4" || c.Spec.DeletionPolicy != DeletionPolicyRetain || !*c.Spec.TLS.Enabled ||
		!*c.Spec.Replication.SemiSync.Enabled || *c.Spec.Backup.Retention.Count != 7 {
		t.Errorf("unexpected defaults: %+v", c.Spec)
	}
	if c.Spec.Backup.Target.PVC.Size.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("the backup volume should default to the data volume's size, got %s", c.Spec.Backup.Target.PVC.Size)
	}
	again := c.DeepCopy()
	if set := again.Default(); len(set) != 0 || !equality.Semantic.DeepEqual(again, c) {
		t.Errorf("a second Default changed %v", set)
	}
}

func TestDefaultKeepsWhatTheUserSet(t *testing.T) {
	c := &MySQLCluster{Spec: MySQLClusterSpec{
		Instances:      new(int32(1)),
		MySQL:          MySQLSpec{Version: "9.7"},
		TLS:            TLSSpec{Enabled: new(false)},
		DeletionPolicy: DeletionPolicyDelete,
		Backup:         &BackupSpec{Schedule: "@daily", Retention: BackupRetention{MaxAge: nil, Count: new(int32(2))}},
	}}
	c.Default()
	if c.Spec.MySQL.Version != "9.7" || *c.Spec.TLS.Enabled || c.Spec.DeletionPolicy != DeletionPolicyDelete ||
		*c.Spec.Backup.Retention.Count != 2 {
		t.Errorf("Default overwrote a user setting: %+v", c.Spec)
	}
}

func TestParseMySQLVersion(t *testing.T) {
	for in, want := range map[string]string{"8.4": "8.4", "8.4.6": "8.4.6", "9.7.0": "9.7.0"} {
		v, err := ParseMySQLVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseMySQLVersion(%q) = %v, %v", in, v, err)
		}
	}
	for _, in := range []string{"", "8", "8.0", "9.7.x", "v8.4", "8.4.-1", "08.4"} {
		if _, err := ParseMySQLVersion(in); err == nil {
			t.Errorf("ParseMySQLVersion(%q) accepted it", in)
		}
	}
}

func TestBackupDefaults(t *testing.T) {
	b := &MySQLBackup{}
	if set := b.Default(); !slices.Equal(set, []string{"spec.method"}) || b.Spec.Method != BackupMethodPhysical {
		t.Errorf("got %v %q", set, b.Spec.Method)
	}
}
