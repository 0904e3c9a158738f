package v1beta1

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// cluster builds a valid, defaulted three-instance cluster named "db"; mutate tweaks it.
func cluster(mutate ...func(*MySQLCluster)) *MySQLCluster {
	c := &MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Spec.Instances = new(int32(3))
	c.Default()
	for _, m := range mutate {
		m(c)
	}
	return c
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// expect checks that errs has exactly the wanted field paths (in any order), each error
// mentioning its fragment.
func expect(t *testing.T, errs field.ErrorList, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] = e.Error()
	}
	for path, fragment := range want {
		msg, ok := got[path]
		if !ok {
			t.Errorf("no error for %s; got %v", path, errs)
			continue
		}
		if !strings.Contains(msg, fragment) {
			t.Errorf("error for %s is %q, want it to mention %q", path, msg, fragment)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d errors, want %d: %v", len(got), len(want), errs)
	}
}

func TestValidateInstances(t *testing.T) {
	for name, tc := range map[string]struct {
		instances *int32
		want      map[string]string
	}{
		"one is enough":      {new(int32(1)), nil},
		"nine is the most":   {new(int32(9)), nil},
		"null is refused":    {nil, map[string]string{"spec.instances": "Required"}},
		"zero is refused":    {new(int32(0)), map[string]string{"spec.instances": "between 1 and 9"}},
		"ten is too many":    {new(int32(10)), map[string]string{"spec.instances": "between 1 and 9"}},
		"negative is absurd": {new(int32(-3)), map[string]string{"spec.instances": "between 1 and 9"}},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, validateInstances(cluster(func(c *MySQLCluster) { c.Spec.Instances = tc.instances })), tc.want)
		})
	}
}

func TestValidateVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		version string
		want    map[string]string
	}{
		"a series":                 {"8.4", nil},
		"a release":                {"9.7.4", nil},
		"empty is defaulted":       {"", nil},
		"an unsupported series":    {"8.0", map[string]string{"spec.mysql.version": "not supported"}},
		"not a version":            {"latest", map[string]string{"spec.mysql.version": "not a version"}},
		"too many parts":           {"8.4.1.2", map[string]string{"spec.mysql.version": "not a version"}},
		"a leading zero":           {"8.04", map[string]string{"spec.mysql.version": "not a number"}},
		"a trailing dot":           {"8.4.", map[string]string{"spec.mysql.version": "not a number"}},
		"a future unsupported LTS": {"10.3", map[string]string{"spec.mysql.version": "supported LTS series are 8.4, 9.7"}},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, validateVersion(cluster(func(c *MySQLCluster) { c.Spec.MySQL.Version = tc.version })), tc.want)
		})
	}
}

func TestValidateVersionChange(t *testing.T) {
	for name, tc := range map[string]struct {
		from, to string
		want     map[string]string
	}{
		"unchanged":                     {"8.4", "8.4", nil},
		"a patch upgrade":               {"8.4.5", "8.4.6", nil},
		"pinning a release":             {"8.4", "8.4.6", nil},
		"to the next LTS":               {"8.4.6", "9.7", nil},
		"a patch downgrade":             {"8.4.6", "8.4.5", map[string]string{"spec.mysql.version": "downgrading"}},
		"a series downgrade":            {"9.7", "8.4", map[string]string{"spec.mysql.version": "downgrading"}},
		"a release downgrade to series": {"9.7.4", "8.4.9", map[string]string{"spec.mysql.version": "downgrading"}},
	} {
		t.Run(name, func(t *testing.T) {
			old := cluster(func(c *MySQLCluster) { c.Spec.MySQL.Version = tc.from })
			expect(t, validateVersionChange(old, cluster(func(c *MySQLCluster) { c.Spec.MySQL.Version = tc.to })), tc.want)
		})
	}
}

func TestUpgradePathsSkipNoLTS(t *testing.T) {
	// With only two supported series no jump can skip one; the table still must refuse a
	// path it does not list. 9.7 has no successor yet.
	from, _ := ParseMySQLVersion("9.7")
	to := MySQLVersion{Major: 11, Minor: 1, Patch: -1}
	if err := from.CanUpgradeTo(to); err == nil || !strings.Contains(err.Error(), "one step") {
		t.Fatalf("9.7 -> 11.1 must be refused as a jump, got %v", err)
	}
}

func TestValidateConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		config map[string]string
		want   map[string]string
	}{
		"tuning is fine":         {map[string]string{"innodb_buffer_pool_size": "1G", "max-connections": "500"}, nil},
		"server_id is ours":      {map[string]string{"server_id": "7"}, map[string]string{"spec.mysql.config[server_id]": "set by the operator"}},
		"dashes are underscores": {map[string]string{"gtid-mode": "OFF"}, map[string]string{"spec.mysql.config[gtid-mode]": "gtid_mode is set by the operator"}},
		"loose_ does not hide":   {map[string]string{"loose-read_only": "OFF"}, map[string]string{"spec.mysql.config[loose-read_only]": "read_only"}},
		"case does not hide":     {map[string]string{"Super_Read_Only": "0"}, map[string]string{"spec.mysql.config[Super_Read_Only]": "super_read_only"}},
		"semi-sync family":       {map[string]string{"rpl_semi_sync_source_timeout": "1"}, map[string]string{"spec.mysql.config[rpl_semi_sync_source_timeout]": "rpl_semi_sync_"}},
		"ssl family":             {map[string]string{"ssl_cert": "/x"}, map[string]string{"spec.mysql.config[ssl_cert]": "ssl_"}},
		"a newline injects":      {map[string]string{"sql_mode": "ANSI\n[client]"}, map[string]string{"spec.mysql.config[sql_mode]": "one line"}},
		"a bad name":             {map[string]string{"a b": "1"}, map[string]string{"spec.mysql.config[a b]": "setting name"}},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, validateConfig(cluster(func(c *MySQLCluster) { c.Spec.MySQL.Config = tc.config })), tc.want)
		})
	}
}

func TestValidateStorage(t *testing.T) {
	expect(t, validateStorage(cluster()), nil)
	expect(t, validateStorage(cluster(func(c *MySQLCluster) { c.Spec.Storage.Size = qty("0") })),
		map[string]string{"spec.storage.size": "greater than zero"})
}

func TestValidateStorageChange(t *testing.T) {
	fast, slow := "fast", "slow"
	for name, tc := range map[string]struct {
		fromSize, toSize   string
		fromClass, toClass *string
		want               map[string]string
	}{
		"grow":                         {"10Gi", "20Gi", nil, nil, nil},
		"same size, written otherwise": {"1Gi", "1024Mi", nil, nil, nil},
		"shrink":                       {"20Gi", "10Gi", nil, nil, map[string]string{"spec.storage.size": "cannot shrink"}},
		"set a class later":            {"10Gi", "10Gi", nil, &fast, nil},
		"keep the class":               {"10Gi", "10Gi", &fast, &fast, nil},
		"change the class":             {"10Gi", "10Gi", &fast, &slow, map[string]string{"spec.storage.storageClassName": "immutable"}},
		"drop the class":               {"10Gi", "10Gi", &fast, nil, map[string]string{"spec.storage.storageClassName": "immutable"}},
	} {
		t.Run(name, func(t *testing.T) {
			old := cluster(func(c *MySQLCluster) {
				c.Spec.Storage.Size, c.Spec.Storage.StorageClassName = qty(tc.fromSize), tc.fromClass
			})
			cur := cluster(func(c *MySQLCluster) {
				c.Spec.Storage.Size, c.Spec.Storage.StorageClassName = qty(tc.toSize), tc.toClass
			})
			expect(t, validateStorageChange(old, cur), tc.want)
		})
	}
}

func TestValidatePrimary(t *testing.T) {
	for name, tc := range map[string]struct {
		primary string
		want    map[string]string
	}{
		"none":               {"", nil},
		"the first":          {"db-0", nil},
		"the last":           {"db-2", nil},
		"past the last":      {"db-3", map[string]string{"spec.primary": "has 3 instances"}},
		"another cluster's":  {"other-1", map[string]string{"spec.primary": "instance of this cluster"}},
		"not an ordinal":     {"db-x", map[string]string{"spec.primary": "instance of this cluster"}},
		"a padded ordinal":   {"db-01", map[string]string{"spec.primary": "instance of this cluster"}},
		"a negative ordinal": {"db--1", map[string]string{"spec.primary": "instance of this cluster"}},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, validatePrimary(cluster(func(c *MySQLCluster) { c.Spec.Primary = tc.primary })), tc.want)
		})
	}
}

func TestValidateReplication(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*MySQLCluster)
		want   map[string]string
	}{
		"defaults": {func(*MySQLCluster) {}, nil},
		"all replicas must ack": {func(c *MySQLCluster) {
			c.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(2))
		}, nil},
		"more acks than replicas": {func(c *MySQLCluster) {
			c.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(3))
		}, map[string]string{"spec.replication.semiSync.waitForReplicaCount": "wait forever"}},
		"more acks, but semi-sync off": {func(c *MySQLCluster) {
			c.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(3))
			c.Spec.Replication.SemiSync.Enabled = new(false)
		}, nil},
		"a single instance has no replicas to wait for": {func(c *MySQLCluster) {
			c.Spec.Instances = new(int32(1))
		}, nil},
		"zero acks": {func(c *MySQLCluster) {
			c.Spec.Replication.SemiSync.WaitForReplicaCount = new(int32(0))
		}, map[string]string{"spec.replication.semiSync.waitForReplicaCount": "at least 1"}},
		"a negative timeout": {func(c *MySQLCluster) {
			c.Spec.Replication.SemiSync.Timeout = &metav1.Duration{Duration: -time.Second}
		}, map[string]string{"spec.replication.semiSync.timeout": "positive"}},
		"no detection delay": {func(c *MySQLCluster) {
			c.Spec.Replication.Failover.DetectionDelay = &metav1.Duration{}
		}, map[string]string{"spec.replication.failover.detectionDelay": "positive"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, validateReplication(cluster(tc.mutate)), tc.want) })
	}
}

func TestValidateTLS(t *testing.T) {
	expect(t, validateTLS(cluster(func(c *MySQLCluster) { c.Spec.TLS.SecretName = "mine" })), nil)
	expect(t, validateTLS(cluster(func(c *MySQLCluster) {
		c.Spec.TLS.SecretName, c.Spec.TLS.Enabled = "mine", new(false)
	})), map[string]string{"spec.tls.secretName": "tls.enabled"})
}

func TestValidateBackup(t *testing.T) {
	backup := func(m func(*BackupSpec)) func(*MySQLCluster) {
		return func(c *MySQLCluster) {
			c.Spec.Backup = &BackupSpec{Schedule: "0 2 * * *"}
			m(c.Spec.Backup)
			c.Default()
		}
	}
	s3 := &BackupTarget{S3: &S3Target{Bucket: "b"}}
	for name, tc := range map[string]struct {
		mutate func(*MySQLCluster)
		want   map[string]string
	}{
		"no backups":               {func(*MySQLCluster) {}, nil},
		"nightly":                  {backup(func(*BackupSpec) {}), nil},
		"a descriptor":             {backup(func(b *BackupSpec) { b.Schedule = "@daily" }), nil},
		"suspended without a time": {backup(func(b *BackupSpec) { b.Schedule, b.Suspend = "", true }), nil},
		"no schedule":              {backup(func(b *BackupSpec) { b.Schedule = "" }), map[string]string{"spec.backup.schedule": "Required"}},
		"not cron":                 {backup(func(b *BackupSpec) { b.Schedule = "every night" }), map[string]string{"spec.backup.schedule": "not a cron schedule"}},
		"six fields":               {backup(func(b *BackupSpec) { b.Schedule = "0 0 2 * * *" }), map[string]string{"spec.backup.schedule": "not a cron schedule"}},
		"an hour out of range":     {backup(func(b *BackupSpec) { b.Schedule = "0 25 * * *" }), map[string]string{"spec.backup.schedule": "not a cron schedule"}},
		"keep none":                {backup(func(b *BackupSpec) { b.Retention.Count = new(int32(0)) }), map[string]string{"spec.backup.retention.count": "at least 1"}},
		"a negative age":           {backup(func(b *BackupSpec) { b.Retention.MaxAge = &metav1.Duration{Duration: -time.Hour} }), map[string]string{"spec.backup.retention.maxAge": "positive"}},
		"verified nightly":         {backup(func(b *BackupSpec) { b.Verify = &BackupVerifySpec{Schedule: "0 4 * * *"} }), nil},
		"verified never": {backup(func(b *BackupSpec) { b.Verify = &BackupVerifySpec{Schedule: "sometimes"} }),
			map[string]string{"spec.backup.verify.schedule": "not a cron schedule"}},
		"verified in no time": {backup(func(b *BackupSpec) {
			b.Verify = &BackupVerifySpec{Schedule: "@daily", Timeout: &metav1.Duration{}}
		}), map[string]string{"spec.backup.verify.timeout": "positive"}},
		"both targets": {backup(func(b *BackupSpec) {
			b.Target = &BackupTarget{PVC: &PVCTarget{ClaimName: "x"}, S3: s3.S3}
		}), map[string]string{"spec.backup.target": "only one"}},
		"an empty target": {backup(func(b *BackupSpec) { b.Target = &BackupTarget{} }), map[string]string{"spec.backup.target": "one of pvc and s3"}},
		"a pvc with nothing": {backup(func(b *BackupSpec) {
			b.Target = &BackupTarget{PVC: &PVCTarget{}}
		}), map[string]string{"spec.backup.target.pvc": "claimName"}},
		"s3 without credentials": {backup(func(b *BackupSpec) { b.Target = s3.DeepCopy() }), map[string]string{"spec.backup.target.s3.credentialsSecret.name": "AWS_ACCESS_KEY_ID"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, validateBackup(cluster(tc.mutate)), tc.want) })
	}
}

func TestBackupValidation(t *testing.T) {
	b := &MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: MySQLBackupSpec{Cluster: "db"}}
	b.Default()
	expect(t, b.Validate(), nil)
	phys := b.DeepCopy()
	phys.Spec.Method = BackupMethodPhysical
	expect(t, phys.Validate(), nil)
	noCluster := b.DeepCopy()
	noCluster.Spec.Cluster = ""
	expect(t, noCluster.Validate(), map[string]string{"spec.cluster": "Required"})
}

func TestValidateBootstrap(t *testing.T) {
	from := func(name string, timeout time.Duration) func(*MySQLCluster) {
		return func(c *MySQLCluster) {
			c.Spec.Bootstrap = &BootstrapSpec{FromBackup: &BootstrapFromBackup{Name: name}}
			if timeout != 0 {
				c.Spec.Bootstrap.FromBackup.Timeout = &metav1.Duration{Duration: timeout}
			}
		}
	}
	stored := func(change func(*BackupSource)) func(*MySQLCluster) {
		return func(c *MySQLCluster) {
			src := &BackupSource{Cluster: "orders", S3: S3Target{Bucket: "backups",
				CredentialsSecret: corev1.LocalObjectReference{Name: "s3"}}}
			change(src)
			c.Spec.Bootstrap = &BootstrapSpec{FromBackup: &BootstrapFromBackup{Source: src}}
		}
	}
	for name, tc := range map[string]struct {
		c    *MySQLCluster
		want map[string]string
	}{
		"none":               {cluster(), nil},
		"a backup":           {cluster(from("nightly", 0)), nil},
		"with a timeout":     {cluster(from("nightly", time.Hour)), nil},
		"no source":          {cluster(func(c *MySQLCluster) { c.Spec.Bootstrap = &BootstrapSpec{} }), map[string]string{"spec.bootstrap.fromBackup": "Required"}},
		"no name":            {cluster(from("", 0)), map[string]string{"spec.bootstrap.fromBackup.name": "Required"}},
		"a negative timeout": {cluster(from("nightly", -time.Second)), map[string]string{"spec.bootstrap.fromBackup.timeout": "positive"}},
		"stored backups":     {cluster(stored(func(*BackupSource) {})), nil},
		"a stored backup in another namespace": {cluster(stored(func(s *BackupSource) {
			s.Namespace, s.Backup = "shop", "20261201T030000Z-orders-daily-20261201-0300"
		})), nil},
		"both a name and a source": {cluster(stored(func(*BackupSource) {}), func(c *MySQLCluster) {
			c.Spec.Bootstrap.FromBackup.Name = "nightly"
		}), map[string]string{"spec.bootstrap.fromBackup.source": "at most one"}},
		"a source without its cluster": {cluster(stored(func(s *BackupSource) { s.Cluster = "" })),
			map[string]string{"spec.bootstrap.fromBackup.source.cluster": "Required"}},
		"a source with a bad namespace": {cluster(stored(func(s *BackupSource) { s.Namespace = "Shop_1" })),
			map[string]string{"spec.bootstrap.fromBackup.source.namespace": "RFC 1123"}},
		"a source without credentials": {cluster(stored(func(s *BackupSource) { s.S3.CredentialsSecret.Name = "" })),
			map[string]string{"spec.bootstrap.fromBackup.source.s3.credentialsSecret.name": "Required"}},
		"a stored backup that is a path": {cluster(stored(func(s *BackupSource) { s.Backup = "../other/base/x" })),
			map[string]string{"spec.bootstrap.fromBackup.source.backup": "not a stored backup's folder"}},
		"to a transaction": {cluster(from("nightly", 0), func(c *MySQLCluster) {
			c.Spec.Bootstrap.FromBackup.TargetGTID = "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"
		}), nil},
		"to a set": {cluster(from("nightly", 0), func(c *MySQLCluster) {
			c.Spec.Bootstrap.FromBackup.TargetGTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23"
		}), map[string]string{"spec.bootstrap.fromBackup.targetGTID": "not one transaction"}},
		"to a time and a transaction": {cluster(from("nightly", 0), func(c *MySQLCluster) {
			c.Spec.Bootstrap.FromBackup.TargetGTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"
			c.Spec.Bootstrap.FromBackup.TargetTime = &metav1.Time{Time: time.Now()}
		}), map[string]string{"spec.bootstrap.fromBackup.targetGTID": "at most one"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, validateBootstrap(tc.c), tc.want) })
	}
	withBackup := func(name string) func(*MySQLCluster) { return from(name, 0) }
	for name, tc := range map[string]struct {
		old, c *MySQLCluster
		want   map[string]string
	}{
		"unchanged":      {cluster(withBackup("a")), cluster(withBackup("a")), nil},
		"another backup": {cluster(withBackup("a")), cluster(withBackup("b")), map[string]string{"spec.bootstrap": "never changed"}},
		"added later":    {cluster(), cluster(withBackup("a")), map[string]string{"spec.bootstrap": "never changed"}},
		"removed":        {cluster(withBackup("a")), cluster(), map[string]string{"spec.bootstrap": "never changed"}},
		"never had any":  {cluster(), cluster(), nil},
	} {
		t.Run("change/"+name, func(t *testing.T) { expect(t, validateBootstrapChange(tc.old, tc.c), tc.want) })
	}
}

func TestAChangeThatWouldRunAnOlderReleaseIsRefused(t *testing.T) {
	v := func(s string) MySQLVersion {
		parsed, err := ParseMySQLVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	for name, tc := range map[string]struct {
		running string // status.version
		image   string
		to      MySQLVersion
		known   bool
		want    map[string]string
	}{
		"a series that resolves older than the pinned release": {"9.7.4", "", v("9.7.3"), true,
			map[string]string{"spec.mysql.version": "would run MySQL 9.7.3, older than the 9.7.4"}},
		"a series that resolves to the running release": {"9.7.4", "", v("9.7.4"), true, nil},
		"a newer release":                                {"9.7.4", "", v("9.7.5"), true, nil},
		"an image that names no release":                 {"9.7.4", "", v("9.7"), false, nil},
		"no release recorded yet":                        {"", "", v("9.7.3"), true, nil},
		"a series recorded by a release before this one": {"9.7", "", v("9.7.3"), true, nil},
		"a custom image's older release": {"9.7.4", "mine/mysql:9.7.2", v("9.7.2"), true,
			map[string]string{"spec.mysql.image": "mine/mysql:9.7.2 would run MySQL 9.7.2"}},
	} {
		t.Run(name, func(t *testing.T) {
			old := cluster(func(c *MySQLCluster) { c.Spec.MySQL.Version, c.Status.Version = "9.7.4", tc.running })
			c := cluster(func(c *MySQLCluster) { c.Spec.MySQL.Version, c.Spec.MySQL.Image = "9.7", tc.image })
			expect(t, c.ValidateRelease(old, tc.to, tc.known), tc.want)
		})
	}
}

func TestAScaleDownBelowTheSemiSyncMinimumNamesInstances(t *testing.T) {
	for name, tc := range map[string]struct {
		from, to, wait int32
		semiSync       bool
		want           map[string]string
	}{
		"to the minimum":              {5, 3, 2, true, nil},
		"below the minimum":           {5, 2, 2, true, map[string]string{"spec.instances": "fewer than the 2", "spec.replication.semiSync.waitForReplicaCount": "wait forever"}},
		"to a single instance":        {3, 1, 1, true, nil},
		"semi-sync off":               {5, 2, 2, false, nil},
		"unchanged: left to Validate": {2, 2, 2, true, map[string]string{"spec.replication.semiSync.waitForReplicaCount": "wait forever"}},
	} {
		t.Run(name, func(t *testing.T) {
			mk := func(n int32) *MySQLCluster {
				return cluster(func(c *MySQLCluster) {
					c.Spec.Instances = new(n)
					c.Spec.Replication.SemiSync.WaitForReplicaCount = new(tc.wait)
					c.Spec.Replication.SemiSync.Enabled = new(tc.semiSync)
				})
			}
			expect(t, mk(tc.to).ValidateChange(mk(tc.from)), tc.want)
		})
	}
}

func TestValidateApplicationChange(t *testing.T) {
	app := func(db, user string) func(*MySQLCluster) {
		return func(c *MySQLCluster) { c.Spec.Application = &ApplicationSpec{Database: db, User: user} }
	}
	for name, tc := range map[string]struct {
		old, c *MySQLCluster
		want   map[string]string
	}{
		"unchanged":            {cluster(app("shop", "")), cluster(app("shop", "")), nil},
		"another account name": {cluster(app("shop", "")), cluster(app("shop", "web")), nil},
		"removed":              {cluster(app("shop", "")), cluster(), nil},
		"another database":     {cluster(app("shop", "")), cluster(app("store", "")), map[string]string{"spec.application.database": "cannot change"}},
		"added later":          {cluster(), cluster(app("shop", "")), map[string]string{"spec.application": "is set when the cluster is created"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, tc.c.ValidateChange(tc.old), tc.want) })
	}
}

func TestValidateNetworkPolicy(t *testing.T) {
	peers := func(p ...networkingv1.NetworkPolicyPeer) func(*MySQLCluster) {
		return func(c *MySQLCluster) { c.Spec.NetworkPolicy.Clients = p }
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}
	for name, tc := range map[string]struct {
		c    *MySQLCluster
		want map[string]string
	}{
		"pods":         {cluster(peers(networkingv1.NetworkPolicyPeer{PodSelector: sel})), nil},
		"addresses":    {cluster(peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}})), nil},
		"nothing":      {cluster(peers(networkingv1.NetworkPolicyPeer{})), map[string]string{"spec.networkPolicy.clients[0]": "one of podSelector"}},
		"not a CIDR":   {cluster(peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1"}})), map[string]string{"spec.networkPolicy.clients[0].ipBlock.cidr": "not a CIDR"}},
		"a bad except": {cluster(peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"x"}}})), map[string]string{"spec.networkPolicy.clients[0].ipBlock.except[0]": "not a CIDR"}},
		"both":         {cluster(peers(networkingv1.NetworkPolicyPeer{PodSelector: sel, IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}})), map[string]string{"spec.networkPolicy.clients[0].ipBlock": "not together"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, validateNetworkPolicy(tc.c), tc.want) })
	}
}
