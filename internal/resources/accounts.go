package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// MySQL accounts every instance has from its first start. They are created while the data
// folder is initialised, outside the binary log, so they are no transaction any instance
// would lack; CLONE copies them with the rest of the data.
const (
	// AdminUser is the operator's own account: it configures replication and fences.
	AdminUser = "dolphin-admin"
	// ReplicationUser is what replicas (and clone recipients) connect to their source as.
	ReplicationUser = "dolphin-repl"
	// ExporterUser is the metrics exporter's account: the status statements its default
	// collectors run (PROCESS for InnoDB's tables, REPLICATION CLIENT for SHOW REPLICA
	// STATUS) and performance_schema, never application data.
	ExporterUser = "dolphin-exporter"
	// BackupUser takes logical backups.
	BackupUser = "dolphin-backup"
	// UsersUser is the account the operator manages spec.application's account with.
	UsersUser = "dolphin-users"
	// ProbeUser is the readiness probe's: on the local socket only ('localhost'), with no
	// privilege (SELECT @@super_read_only needs none).
	ProbeUser = "dolphin-probe"
)

// adminGrants are the operator's privileges on *.*, each with the statements that need
// it. Nothing here reads or writes application data, there is no GRANT OPTION, and no
// account management: that is UsersUser's, so that neither account alone can turn itself
// or another into a superuser (SYSTEM_USER with CREATE USER could rename root to '%').
//
//   - SYSTEM_VARIABLES_ADMIN: SET GLOBAL read_only, super_read_only, rpl_semi_sync_*,
//     clone_valid_donor_list, clone_ssl_ca and spec.config's dynamic settings; SET SESSION
//     sql_log_bin.
//   - REPLICATION_SLAVE_ADMIN: CHANGE REPLICATION SOURCE, START/STOP REPLICA, RESET REPLICA ALL.
//   - RELOAD: RESET REPLICA ALL (MySQL asks for it beside REPLICATION_SLAVE_ADMIN).
//   - CONNECTION_ADMIN: KILL CONNECTION of clients' sessions when fencing; ALTER INSTANCE
//     RELOAD TLS.
//   - SYSTEM_USER: KILL of the replica applier's coordinator (a system thread) when STOP
//     REPLICA cannot end a half-received transaction, and of root's sessions when fencing.
//   - CLONE_ADMIN: CLONE INSTANCE FROM on the recipient (which restarts it).
//   - PROCESS: information_schema.PROCESSLIST's other sessions (whom a fence ends, the
//     applier's coordinator a stop kills).
//   - REPLICATION CLIENT: SHOW REPLICA STATUS and SHOW BINARY LOG STATUS, for reading by hand.
//   - APPLICATION_PASSWORD_ADMIN: ALTER USER CURRENT_USER() ... RETAIN CURRENT PASSWORD and
//     DISCARD OLD PASSWORD, when a rotation changes this account's own password (UsersUser
//     cannot: this account has SYSTEM_USER).
//
// At other levels: SELECT on performance_schema (replication, clone, status and variables
// tables); INSERT on mysql.plugin (INSTALL PLUGIN of the semi-sync and clone plugins on
// data folders whose my.cnf did not load them).
const adminGrants = "SYSTEM_VARIABLES_ADMIN, REPLICATION_SLAVE_ADMIN, RELOAD, CONNECTION_ADMIN, SYSTEM_USER, " +
	"CLONE_ADMIN, PROCESS, REPLICATION CLIENT, APPLICATION_PASSWORD_ADMIN"

// adminGrantSQL grants the admin account its privileges (adminGrants).
const adminGrantSQL = "GRANT " + adminGrants + " ON *.* TO '" + AdminUser + "'@'%';\n" +
	"GRANT SELECT ON performance_schema.* TO '" + AdminUser + "'@'%';\n" +
	"GRANT INSERT ON mysql.plugin TO '" + AdminUser + "'@'%';\n"

// usersGrantSQL grants UsersUser CREATE USER: CREATE USER and ALTER USER ... RETAIN/DISCARD
// OLD PASSWORD of spec.application's account, and of the operator's accounts without
// SYSTEM_USER when their passwords are rotated (its own too). Without SYSTEM_USER it cannot
// alter, rename or drop root, nor the admin account.
const usersGrantSQL = "GRANT CREATE USER ON *.* TO '" + UsersUser + "'@'%';\n"

// AdminGrantStatements are adminGrantSQL's statements, as the operator narrows an admin
// account of an earlier release in place (mysql.Instance.NarrowAccount).
func AdminGrantStatements() []string { return statements(adminGrantSQL) }

// NarrowPrepareStatements are what the operator runs on the primary, as the admin account
// of an earlier release (which can), before narrowing that account in place: drop root
// over TCP, create UsersUser and ProbeUser where missing with these passwords, and grant
// UsersUser what ApplicationGrantSQL does on database ("": no database).
func NarrowPrepareStatements(usersPassword, probePassword, database string) []string {
	out := []string{"DROP USER IF EXISTS 'root'@'%'",
		"CREATE USER IF NOT EXISTS '" + UsersUser + "'@'%' IDENTIFIED BY '" + usersPassword + "'",
		"ALTER USER '" + UsersUser + "'@'%' IDENTIFIED BY '" + usersPassword + "'",
		"CREATE USER IF NOT EXISTS '" + ProbeUser + "'@'localhost' IDENTIFIED BY '" + probePassword + "'",
		"ALTER USER '" + ProbeUser + "'@'localhost' IDENTIFIED BY '" + probePassword + "'"}
	out = append(out, statements(usersGrantSQL)...)
	if database != "" {
		out = append(out, statements(strings.ReplaceAll(ApplicationGrantSQL, "${"+ApplicationDatabaseVar+"}", database))...)
	}
	return out
}

func statements(sql string) []string {
	var out []string
	for _, s := range strings.Split(sql, ";\n") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ApplicationGrantSQL lets UsersUser create spec.application's database and grant its
// account every privilege there (GRANT needs the grantor to hold what it grants). It is
// run where the accounts are made with root's rights: an instance's initialisation, a
// restore, and the narrowing of an earlier release's accounts.
// ${DOLPHIN_APPLICATION_DATABASE} as AccountsSQL's variables.
const ApplicationGrantSQL = "GRANT ALL PRIVILEGES ON `${" + ApplicationDatabaseVar + "}`.* TO '" + UsersUser + "'@'%' WITH GRANT OPTION;\n"

// ApplicationDatabaseVar is the variable that names spec.application's database to the
// init container and the restore Job (unset without spec.application).
const ApplicationDatabaseVar = "DOLPHIN_APPLICATION_DATABASE"

// accountVars maps each init-container variable to the credentials key it comes from.
var accountVars = []struct{ env, key string }{
	{"DOLPHIN_ADMIN_PASSWORD", KeyAdminPassword},
	{"DOLPHIN_REPLICATION_PASSWORD", KeyReplicationPassword},
	{"DOLPHIN_EXPORTER_PASSWORD", KeyExporterPassword},
	{"DOLPHIN_BACKUP_PASSWORD", KeyBackupPassword},
	{"DOLPHIN_USERS_PASSWORD", KeyUsersPassword},
	{ProbePasswordVar, KeyProbePassword},
}

// ProbePasswordVar is the variable that gives ProbeUser's password to the init container
// and to the mysql container's readiness probe.
const ProbePasswordVar = "DOLPHIN_PROBE_PASSWORD"

// AccountsSQL creates the operator's accounts. ${VARIABLES} name the init container's
// environment (AccountEnv); the shell expands them there. Passwords come from
// CredentialsSecret's alphabet, which needs no quoting in SQL. Accounts are created locked
// and unlocked once granted: a session opened in between would keep no global privilege
// (MySQL applies global grants to new sessions only).
const AccountsSQL = `CREATE USER IF NOT EXISTS '` + AdminUser + `'@'%' IDENTIFIED BY '${DOLPHIN_ADMIN_PASSWORD}' ACCOUNT LOCK;
` + adminGrantSQL + `CREATE USER IF NOT EXISTS '` + ReplicationUser + `'@'%' IDENTIFIED BY '${DOLPHIN_REPLICATION_PASSWORD}' ACCOUNT LOCK;
GRANT REPLICATION SLAVE, REPLICATION CLIENT, BACKUP_ADMIN ON *.* TO '` + ReplicationUser + `'@'%';
CREATE USER IF NOT EXISTS '` + ExporterUser + `'@'%' IDENTIFIED BY '${DOLPHIN_EXPORTER_PASSWORD}' WITH MAX_USER_CONNECTIONS 3 ACCOUNT LOCK;
GRANT PROCESS, REPLICATION CLIENT ON *.* TO '` + ExporterUser + `'@'%';
GRANT SELECT ON performance_schema.* TO '` + ExporterUser + `'@'%';
CREATE USER IF NOT EXISTS '` + BackupUser + `'@'%' IDENTIFIED BY '${DOLPHIN_BACKUP_PASSWORD}' ACCOUNT LOCK;
GRANT SELECT, SHOW VIEW, TRIGGER, LOCK TABLES, EVENT, RELOAD, PROCESS, REPLICATION CLIENT, BACKUP_ADMIN ON *.* TO '` + BackupUser + `'@'%';
CREATE USER IF NOT EXISTS '` + UsersUser + `'@'%' IDENTIFIED BY '${DOLPHIN_USERS_PASSWORD}' ACCOUNT LOCK;
` + usersGrantSQL + `CREATE USER IF NOT EXISTS '` + ProbeUser + `'@'localhost' IDENTIFIED BY '${` + ProbePasswordVar + `}';
ALTER USER '` + AdminUser + `'@'%', '` + ReplicationUser + `'@'%', '` + ExporterUser + `'@'%', '` + BackupUser + `'@'%', '` + UsersUser + `'@'%' ACCOUNT UNLOCK;
`

// NarrowSQL takes from root and the admin account what earlier releases gave them: root
// connects over the local socket only, and the admin account has adminGrants and nothing
// more on *.* (its grants on a database stay). For data restored from such a release.
const NarrowSQL = `DROP USER IF EXISTS 'root'@'%';
REVOKE ALL PRIVILEGES ON *.* FROM '` + AdminUser + `'@'%';
REVOKE GRANT OPTION ON *.* FROM '` + AdminUser + `'@'%';
` + adminGrantSQL

// RekeySQL gives restored data (a copy of another cluster's, with its passwords) this
// cluster's root and operator accounts: creates what is missing, narrows what an earlier
// release made wider (NarrowSQL), then sets every password. ${VARIABLES} as in
// AccountsSQL, and MYSQL_ROOT_PASSWORD for root.
const RekeySQL = `ALTER USER 'root'@'localhost' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
` + AccountsSQL + NarrowSQL + `ALTER USER '` + AdminUser + `'@'%' IDENTIFIED BY '${DOLPHIN_ADMIN_PASSWORD}';
ALTER USER '` + ReplicationUser + `'@'%' IDENTIFIED BY '${DOLPHIN_REPLICATION_PASSWORD}';
ALTER USER '` + ExporterUser + `'@'%' IDENTIFIED BY '${DOLPHIN_EXPORTER_PASSWORD}';
ALTER USER '` + BackupUser + `'@'%' IDENTIFIED BY '${DOLPHIN_BACKUP_PASSWORD}';
ALTER USER '` + UsersUser + `'@'%' IDENTIFIED BY '${DOLPHIN_USERS_PASSWORD}';
ALTER USER '` + ProbeUser + `'@'localhost' IDENTIFIED BY '${` + ProbePasswordVar + `}';
`

// accountEnv gives the init container the passwords AccountsSQL uses, and the application
// database ApplicationGrantSQL grants on.
func accountEnv(c *mysqlv1beta1.MySQLCluster) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(accountVars)+1)
	for _, v := range accountVars {
		env = append(env, secretEnv(v.env, CredentialsSecretName(c), v.key))
	}
	if a := c.Spec.Application; a != nil {
		env = append(env, corev1.EnvVar{Name: ApplicationDatabaseVar, Value: a.Database})
	}
	return env
}
