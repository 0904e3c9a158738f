package v1beta1

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var specPath = field.NewPath("spec")

// Validate runs every check that needs only the object itself: the validating webhook on
// create, and the reconciler on every pass, for clusters that reached the API server
// without the webhook (or were stored before a rule existed).
func (c *MySQLCluster) Validate() field.ErrorList {
	var errs field.ErrorList
	for _, check := range []func(*MySQLCluster) field.ErrorList{
		validateInstances, validateVersion, validateConfig, validateStorage, validatePrimary,
		validateReplication, validateTLS, validateBackup, validateBootstrap, validateApplication,
		validateNetworkPolicy,
	} {
		errs = append(errs, check(c)...)
	}
	return errs
}

// ValidateChange is Validate plus the checks that compare with the stored object old.
func (c *MySQLCluster) ValidateChange(old *MySQLCluster) field.ErrorList {
	errs := c.Validate()
	errs = append(errs, validateVersionChange(old, c)...)
	errs = append(errs, validateScaleDown(old, c)...)
	errs = append(errs, validateStorageChange(old, c)...)
	errs = append(errs, validateBootstrapChange(old, c)...)
	errs = append(errs, validateApplicationChange(old, c)...)
	return errs
}

// validateApplication keeps the application's account and database apart from MySQL's and
// the operator's own.
func validateApplication(c *MySQLCluster) field.ErrorList {
	a := c.Spec.Application
	if a == nil {
		return nil
	}
	p := specPath.Child("application")
	var errs field.ErrorList
	switch strings.ToLower(a.Database) {
	case "mysql", "sys", "performance_schema", "information_schema":
		errs = append(errs, field.Invalid(p.Child("database"), a.Database, "is one of MySQL's own schemas"))
	}
	if r := a.PreviousPasswordRetention; r != nil && r.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("previousPasswordRetention"), r.Duration.String(), "must not be negative"))
	}
	user := a.ApplicationUser()
	path := p.Child("user")
	if a.User == "" {
		path = p.Child("database") // the user's name when user is not set
	}
	switch {
	case len(user) > 32:
		errs = append(errs, field.Invalid(path, user, "an account name has at most 32 characters (set spec.application.user)"))
	case strings.EqualFold(user, "root") || strings.HasPrefix(strings.ToLower(user), "dolphin") ||
		strings.HasPrefix(strings.ToLower(user), "mysql"):
		errs = append(errs, field.Invalid(path, user, "root, dolphin* and mysql* accounts are MySQL's or the operator's"))
	}
	return errs
}

func validateBootstrap(c *MySQLCluster) field.ErrorList {
	b := c.Spec.Bootstrap
	if b == nil {
		return nil
	}
	p := specPath.Child("bootstrap")
	if b.FromBackup == nil {
		return field.ErrorList{field.Required(p.Child("fromBackup"), "the backup the cluster is restored from")}
	}
	var errs field.ErrorList
	switch f := b.FromBackup; {
	case f.Name == "" && f.Source == nil:
		errs = append(errs, field.Required(p.Child("fromBackup", "name"),
			"the MySQLBackup the cluster is restored from (or source, the store of a cluster's backups)"))
	case f.Name != "" && f.Source != nil:
		errs = append(errs, field.Forbidden(p.Child("fromBackup", "source"), "at most one of name and source"))
	case f.Source != nil:
		errs = append(errs, validateBackupSource(f.Source, p.Child("fromBackup", "source"))...)
	}
	if t := b.FromBackup.Timeout; t != nil && t.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("fromBackup", "timeout"), t.Duration.String(), "must be positive"))
	}
	if g := b.FromBackup.TargetGTID; g != "" {
		if b.FromBackup.TargetTime != nil {
			errs = append(errs, field.Forbidden(p.Child("fromBackup", "targetGTID"), "at most one of targetTime and targetGTID"))
		}
		if !oneGTID.MatchString(g) {
			errs = append(errs, field.Invalid(p.Child("fromBackup", "targetGTID"), g, "not one transaction: <server uuid>:<number>"))
		}
	}
	return errs
}

// validateBackupSource checks where a restore finds a cluster's stored backups.
func validateBackupSource(src *BackupSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Cluster == "" {
		errs = append(errs, field.Required(p.Child("cluster"), "the name of the cluster the backups are of"))
	}
	for _, f := range []struct{ name, value string }{{"cluster", src.Cluster}, {"namespace", src.Namespace}} {
		if f.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Label(f.value) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
		}
	}
	if src.Backup != "" && !storedBackupName.MatchString(src.Backup) {
		errs = append(errs, field.Invalid(p.Child("backup"), src.Backup,
			"not a stored backup's folder: <created, UTC>-<MySQLBackup name>, e.g. 20261201T030000Z-orders-daily"))
	}
	target := BackupTarget{S3: &src.S3}
	return append(errs, validateBackupTarget(&target, p)...)
}

// storedBackupName is a stored backup's folder under base/ (resources.BackupKey).
var storedBackupName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// oneGTID is one transaction's GTID: a server's UUID and a transaction number.
var oneGTID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:[1-9][0-9]*$`)

// validateNetworkPolicy checks the peers spec.networkPolicy admits, as the API server
// would check the NetworkPolicy made of them: each names pods, namespaces or addresses,
// and addresses are CIDRs.
func validateNetworkPolicy(c *MySQLCluster) field.ErrorList {
	var errs field.ErrorList
	np := specPath.Child("networkPolicy")
	for _, list := range []struct {
		name  string
		peers []networkingv1.NetworkPolicyPeer
	}{{"clients", c.Spec.NetworkPolicy.Clients}, {"metrics", c.Spec.NetworkPolicy.Metrics}} {
		for k, peer := range list.peers {
			p := np.Child(list.name).Index(k)
			if peer.PodSelector == nil && peer.NamespaceSelector == nil && peer.IPBlock == nil {
				errs = append(errs, field.Required(p, "one of podSelector, namespaceSelector and ipBlock"))
			}
			if b := peer.IPBlock; b != nil {
				if peer.PodSelector != nil || peer.NamespaceSelector != nil {
					errs = append(errs, field.Forbidden(p.Child("ipBlock"), "not together with podSelector or namespaceSelector"))
				}
				if _, _, err := net.ParseCIDR(b.CIDR); err != nil {
					errs = append(errs, field.Invalid(p.Child("ipBlock", "cidr"), b.CIDR, "not a CIDR"))
				}
				for e, x := range b.Except {
					if _, _, err := net.ParseCIDR(x); err != nil {
						errs = append(errs, field.Invalid(p.Child("ipBlock", "except").Index(e), x, "not a CIDR"))
					}
				}
			}
		}
	}
	return errs
}

// validateApplicationChange keeps spec.application's database as the cluster was created
// with: the operator's users account is granted that database when the accounts are made
// (it may grant only what it holds), and holds no other.
func validateApplicationChange(old, c *MySQLCluster) field.ErrorList {
	p := specPath.Child("application")
	switch o, n := old.Spec.Application, c.Spec.Application; {
	case o == nil && n != nil:
		return field.ErrorList{field.Forbidden(p, "is set when the cluster is created: its database is granted to the "+
			"operator's account for applications then, and to no other later")}
	case o != nil && n != nil && o.Database != n.Database:
		return field.ErrorList{field.Forbidden(p.Child("database"), "cannot change after the cluster is created")}
	}
	return nil
}

// validateBootstrapChange keeps bootstrap as the cluster was created with: it says where
// the data came from.
func validateBootstrapChange(old, c *MySQLCluster) field.ErrorList {
	if equality.Semantic.DeepEqual(old.Spec.Bootstrap, c.Spec.Bootstrap) {
		return nil
	}
	return field.ErrorList{field.Forbidden(specPath.Child("bootstrap"), "bootstrap is set when the cluster is created and never changed")}
}

func validateInstances(c *MySQLCluster) field.ErrorList {
	p := specPath.Child("instances")
	switch {
	case c.Spec.Instances == nil:
		return field.ErrorList{field.Required(p, "the number of instances (1 to 9) is required")}
	case *c.Spec.Instances < 1 || *c.Spec.Instances > 9:
		return field.ErrorList{field.Invalid(p, *c.Spec.Instances, "must be between 1 and 9")}
	}
	return nil
}

func validateVersion(c *MySQLCluster) field.ErrorList {
	if c.Spec.MySQL.Version == "" {
		return nil // defaulted
	}
	if _, err := ParseMySQLVersion(c.Spec.MySQL.Version); err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("mysql", "version"), c.Spec.MySQL.Version, err.Error())}
	}
	return nil
}

// ValidateScaleDownFrom checks a scale-down from the instances that run (have), for the
// reconciler, which has no stored object to compare with.
func (c *MySQLCluster) ValidateScaleDownFrom(have int32) field.ErrorList {
	old := &MySQLCluster{Spec: MySQLClusterSpec{Instances: &have}}
	return validateScaleDown(old, c)
}

// validateScaleDown names spec.instances when a scale-down is what leaves semi-sync
// fewer replicas than it waits for (validateReplication reports the same conflict on
// waitForReplicaCount, which is what a new cluster's author would change).
func validateScaleDown(old, c *MySQLCluster) field.ErrorList {
	ss := c.Spec.Replication.SemiSync
	if old.Spec.Instances == nil || c.Spec.Instances == nil || *c.Spec.Instances >= *old.Spec.Instances ||
		*c.Spec.Instances < 2 || ss.WaitForReplicaCount == nil || (ss.Enabled != nil && !*ss.Enabled) {
		return nil
	}
	if n := *ss.WaitForReplicaCount; n > *c.Spec.Instances-1 {
		return field.ErrorList{field.Forbidden(specPath.Child("instances"), fmt.Sprintf(
			"scaling down to %d instances leaves %d replicas, fewer than the %d that replication.semiSync.waitForReplicaCount makes every commit wait for: lower it first",
			*c.Spec.Instances, *c.Spec.Instances-1, n))}
	}
	return nil
}

func validateVersionChange(old, c *MySQLCluster) field.ErrorList {
	from, errOld := ParseMySQLVersion(old.Spec.MySQL.Version)
	to, errNew := ParseMySQLVersion(c.Spec.MySQL.Version)
	if errOld != nil || errNew != nil {
		return nil // a bad new version is reported by validateVersion; a bad old one cannot be fixed here
	}
	if err := from.CanUpgradeTo(to); err != nil {
		return field.ErrorList{field.Forbidden(specPath.Child("mysql", "version"), err.Error())}
	}
	return nil
}

// ValidateRelease refuses a spec that would run an older MySQL release than the one the
// instances run (status.version): MySQL cannot downgrade in place, and a series ("9.7")
// runs whatever release the operator's image for it is, which can be older than a release
// pinned before ("9.7.4"). to is the release c's spec would run, as the operator resolves
// it; ok false (an image that names no release) leaves only validateVersionChange's
// comparison of the versions as written.
func (c *MySQLCluster) ValidateRelease(old *MySQLCluster, to MySQLVersion, ok bool) field.ErrorList {
	running, err := ParseMySQLVersion(old.Status.Version)
	if !ok || err != nil || running.Patch < 0 || to.Compare(running) >= 0 {
		return nil
	}
	p, value := specPath.Child("mysql", "version"), c.Spec.MySQL.Version
	if c.Spec.MySQL.Image != "" {
		p, value = specPath.Child("mysql", "image"), c.Spec.MySQL.Image
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"%s would run MySQL %s, older than the %s the instances run: MySQL cannot downgrade in place (pin %s or later)",
		value, to, running, running))}
}

// ownedSettings are my.cnf settings the operator sets itself: changing them would break
// replication, failover, TLS or the pod's layout.
var ownedSettings = map[string]bool{
	"server_id": true, "server_uuid": true, "gtid_mode": true, "enforce_gtid_consistency": true,
	"log_bin": true, "log_replica_updates": true, "log_slave_updates": true, "binlog_format": true,
	"relay_log": true, "relay_log_index": true, "skip_replica_start": true, "skip_slave_start": true,
	"read_only": true, "super_read_only": true, "report_host": true, "report_port": true,
	"datadir": true, "socket": true, "port": true, "bind_address": true, "pid_file": true,
	"log_error": true, "secure_file_priv": true, "admin_address": true, "admin_port": true,
	"plugin_load": true, "plugin_load_add": true, "plugin_dir": true, "basedir": true, "user": true,
	"require_secure_transport": true, "clone_valid_donor_list": true, "init_file": true,
	"skip_grant_tables": true, "skip_networking": true,
}

// ownedPrefixes are families of settings the operator owns.
var ownedPrefixes = []string{"rpl_semi_sync_", "ssl_", "mysqlx", "gtid_", "replica_", "slave_", "master_", "source_"}

var settingName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validateConfig(c *MySQLCluster) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("mysql", "config")
	for k, v := range c.Spec.MySQL.Config {
		kp := p.Key(k)
		if !settingName.MatchString(k) {
			errs = append(errs, field.Invalid(kp, k, "a setting name has only letters, digits, '_', '-' and '.'"))
			continue
		}
		if strings.ContainsAny(v, "\n\r") {
			errs = append(errs, field.Invalid(kp, v, "a value must be one line"))
		}
		name := strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(k), "-", "_"), "loose_")
		if ownedSettings[name] {
			errs = append(errs, field.Forbidden(kp, fmt.Sprintf("%s is set by the operator", name)))
			continue
		}
		for _, pre := range ownedPrefixes {
			if strings.HasPrefix(name, pre) {
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("%s* settings are set by the operator", pre)))
				break
			}
		}
		if kind, online := OnlineSettings[SettingName(k)]; online {
			// Applied with SET GLOBAL as well as written to my.cnf: it must parse as MySQL reads it.
			if _, _, err := SettingValue(kind, v); err != nil {
				errs = append(errs, field.Invalid(kp, v, err.Error()))
			}
		}
	}
	return errs
}

func validateStorage(c *MySQLCluster) field.ErrorList {
	if s := c.Spec.Storage.Size; s != nil && s.Sign() <= 0 {
		return field.ErrorList{field.Invalid(specPath.Child("storage", "size"), s.String(), "must be greater than zero")}
	}
	return nil
}

func validateStorageChange(old, c *MySQLCluster) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("storage")
	if o, n := old.Spec.Storage.Size, c.Spec.Storage.Size; o != nil && n != nil && n.Cmp(*o) < 0 {
		errs = append(errs, field.Forbidden(p.Child("size"),
			fmt.Sprintf("volumes cannot shrink (from %s to %s)", o.String(), n.String())))
	}
	o, n := old.Spec.Storage.StorageClassName, c.Spec.Storage.StorageClassName
	if o != nil && (n == nil || *n != *o) {
		errs = append(errs, field.Forbidden(p.Child("storageClassName"), "is immutable"))
	}
	return errs
}

func validatePrimary(c *MySQLCluster) field.ErrorList {
	if c.Spec.Primary == "" || c.Spec.Instances == nil {
		return nil
	}
	p := specPath.Child("primary")
	prefix := c.Name + "-"
	ord, ok := c.InstanceOrdinal(c.Spec.Primary)
	if !ok {
		return field.ErrorList{field.Invalid(p, c.Spec.Primary,
			fmt.Sprintf("must name an instance of this cluster: %s0 to %s%d", prefix, prefix, *c.Spec.Instances-1))}
	}
	if ord >= int(*c.Spec.Instances) {
		return field.ErrorList{field.Invalid(p, c.Spec.Primary,
			fmt.Sprintf("the cluster has %d instances (%s0 to %s%d)", *c.Spec.Instances, prefix, prefix, *c.Spec.Instances-1))}
	}
	return nil
}

func validateReplication(c *MySQLCluster) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("replication")
	ss := c.Spec.Replication.SemiSync
	if n := ss.WaitForReplicaCount; n != nil {
		switch {
		case *n < 1:
			errs = append(errs, field.Invalid(p.Child("semiSync", "waitForReplicaCount"), *n, "must be at least 1"))
		case c.Spec.Instances != nil && *c.Spec.Instances > 1 && *n > *c.Spec.Instances-1 &&
			(ss.Enabled == nil || *ss.Enabled):
			errs = append(errs, field.Invalid(p.Child("semiSync", "waitForReplicaCount"), *n,
				fmt.Sprintf("a cluster of %d instances has %d replicas to acknowledge writes: commits would wait forever",
					*c.Spec.Instances, *c.Spec.Instances-1)))
		}
	}
	if ss.Timeout != nil && ss.Timeout.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("semiSync", "timeout"), ss.Timeout.String(), "must be positive"))
	}
	if d := c.Spec.Replication.Failover.DetectionDelay; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("failover", "detectionDelay"), d.String(), "must be positive"))
	}
	return errs
}

func validateTLS(c *MySQLCluster) field.ErrorList {
	t := c.Spec.TLS
	if t.SecretName != "" && t.Enabled != nil && !*t.Enabled {
		return field.ErrorList{field.Invalid(specPath.Child("tls", "secretName"), t.SecretName,
			"a certificate secret needs tls.enabled: true")}
	}
	return nil
}

// cronParser accepts what a CronJob accepts: five fields or a descriptor such as @daily.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads spec.backup.schedule as validation does.
func ParseSchedule(s string) (cron.Schedule, error) { return cronParser.Parse(s) }

func validateBackup(c *MySQLCluster) field.ErrorList {
	b := c.Spec.Backup
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	p := specPath.Child("backup")
	if b.Schedule == "" {
		if !b.Suspend {
			errs = append(errs, field.Required(p.Child("schedule"), "a cron schedule such as \"0 2 * * *\" (or suspend: true)"))
		}
	} else if _, err := cronParser.Parse(b.Schedule); err != nil {
		errs = append(errs, field.Invalid(p.Child("schedule"), b.Schedule, "not a cron schedule: "+err.Error()))
	}
	if n := b.Retention.Count; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(p.Child("retention", "count"), *n, "must keep at least 1 backup"))
	}
	if a := b.Retention.MaxAge; a != nil && a.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("retention", "maxAge"), a.String(), "must be positive"))
	}
	errs = append(errs, validateBinlogArchive(b, p)...)
	if v := b.Verify; v != nil {
		if _, err := cronParser.Parse(v.Schedule); err != nil {
			errs = append(errs, field.Invalid(p.Child("verify", "schedule"), v.Schedule, "not a cron schedule: "+err.Error()))
		}
		if t := v.Timeout; t != nil && t.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child("verify", "timeout"), t.Duration.String(), "must be positive"))
		}
	}
	return append(errs, validateBackupTarget(b.Target, p.Child("target"))...)
}

// Bounds of spec.backup.binlogArchive.archiveTimeout.
const (
	MinArchiveTimeout = 10 * time.Second
	MaxArchiveTimeout = time.Hour
)

func validateBinlogArchive(b *BackupSpec, p *field.Path) field.ErrorList {
	a := b.BinlogArchive
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if b.Target == nil || b.Target.S3 == nil {
		errs = append(errs, field.Required(p.Child("target", "s3"),
			"binlogArchive keeps the archive in object storage: set an S3 target"))
	}
	if t := a.ArchiveTimeout; t != nil && (t.Duration < MinArchiveTimeout || t.Duration > MaxArchiveTimeout) {
		errs = append(errs, field.Invalid(p.Child("binlogArchive", "archiveTimeout"), t.Duration.String(),
			fmt.Sprintf("must be from %s to %s", MinArchiveTimeout, MaxArchiveTimeout)))
	}
	return errs
}

func validateBackupTarget(t *BackupTarget, p *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case t.PVC == nil && t.S3 == nil:
		return field.ErrorList{field.Required(p, "one of pvc and s3")}
	case t.PVC != nil && t.S3 != nil:
		return field.ErrorList{field.Forbidden(p, "only one of pvc and s3 may be set")}
	case t.PVC != nil:
		if t.PVC.ClaimName == "" && t.PVC.Size == nil {
			errs = append(errs, field.Required(p.Child("pvc"), "claimName of an existing claim, or size of a new one"))
		}
		if t.PVC.Size != nil && t.PVC.Size.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child("pvc", "size"), t.PVC.Size.String(), "must be greater than zero"))
		}
	case t.S3 != nil:
		if t.S3.Bucket == "" {
			errs = append(errs, field.Required(p.Child("s3", "bucket"), ""))
		}
		if t.S3.CredentialsSecret.Name == "" {
			errs = append(errs, field.Required(p.Child("s3", "credentialsSecret", "name"),
				"a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"))
		}
		if e := t.S3.Endpoint; e != "" {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, field.Invalid(p.Child("s3", "endpoint"), e, "must be an http:// or https:// URL with a host"))
			}
		}
		if ca := t.S3.CASecret; ca != nil && (ca.Name == "" || ca.Key == "") {
			errs = append(errs, field.Required(p.Child("s3", "caSecret"), "the name and key of a Secret holding PEM certificates"))
		}
	}
	return errs
}

// Validate checks what a MySQLBackup needs that its CRD's schema cannot say.
func (b *MySQLBackup) Validate() field.ErrorList {
	var errs field.ErrorList
	if b.Spec.Cluster == "" {
		errs = append(errs, field.Required(specPath.Child("cluster"), "the MySQLCluster to back up"))
	}
	if d := b.Spec.Timeout; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("timeout"), d.String(), "must be positive"))
	}
	return append(errs, validateBackupTarget(b.Spec.Target, specPath.Child("target"))...)
}
