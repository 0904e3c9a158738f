package resources

import (
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
)

// accountVars maps each init-container variable to the credentials key it comes from.
var accountVars = []struct{ env, key string }{
	{"DOLPHIN_ADMIN_PASSWORD", KeyAdminPassword},
	{"DOLPHIN_REPLICATION_PASSWORD", KeyReplicationPassword},
	{"DOLPHIN_EXPORTER_PASSWORD", KeyExporterPassword},
	{"DOLPHIN_BACKUP_PASSWORD", KeyBackupPassword},
}

// AccountsSQL creates the operator's accounts. ${VARIABLES} name the init container's
// environment (AccountEnv); the shell expands them there. Passwords come from
// CredentialsSecret's alphabet, which needs no quoting in SQL. Accounts are created locked
// and unlocked once granted: a session opened in between would keep no global privilege
// (MySQL applies global grants to new sessions only).
const AccountsSQL = `CREATE USER IF NOT EXISTS '` + AdminUser + `'@'%' IDENTIFIED BY '${DOLPHIN_ADMIN_PASSWORD}' ACCOUNT LOCK;
GRANT ALL PRIVILEGES ON *.* TO '` + AdminUser + `'@'%' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '` + ReplicationUser + `'@'%' IDENTIFIED BY '${DOLPHIN_REPLICATION_PASSWORD}' ACCOUNT LOCK;
GRANT REPLICATION SLAVE, REPLICATION CLIENT, BACKUP_ADMIN ON *.* TO '` + ReplicationUser + `'@'%';
CREATE USER IF NOT EXISTS '` + ExporterUser + `'@'%' IDENTIFIED BY '${DOLPHIN_EXPORTER_PASSWORD}' WITH MAX_USER_CONNECTIONS 3 ACCOUNT LOCK;
GRANT PROCESS, REPLICATION CLIENT ON *.* TO '` + ExporterUser + `'@'%';
GRANT SELECT ON performance_schema.* TO '` + ExporterUser + `'@'%';
CREATE USER IF NOT EXISTS '` + BackupUser + `'@'%' IDENTIFIED BY '${DOLPHIN_BACKUP_PASSWORD}' ACCOUNT LOCK;
GRANT SELECT, SHOW VIEW, TRIGGER, LOCK TABLES, EVENT, RELOAD, PROCESS, REPLICATION CLIENT, BACKUP_ADMIN ON *.* TO '` + BackupUser + `'@'%';
ALTER USER '` + AdminUser + `'@'%', '` + ReplicationUser + `'@'%', '` + ExporterUser + `'@'%', '` + BackupUser + `'@'%' ACCOUNT UNLOCK;
`

// RekeySQL gives restored data (a copy of another cluster's, with its passwords) this
// cluster's root and operator accounts: creates what is missing, then sets every
// password. ${VARIABLES} as in AccountsSQL, and MYSQL_ROOT_PASSWORD for root.
const RekeySQL = `CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
ALTER USER 'root'@'%' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
` + AccountsSQL + `ALTER USER '` + AdminUser + `'@'%' IDENTIFIED BY '${DOLPHIN_ADMIN_PASSWORD}';
ALTER USER '` + ReplicationUser + `'@'%' IDENTIFIED BY '${DOLPHIN_REPLICATION_PASSWORD}';
ALTER USER '` + ExporterUser + `'@'%' IDENTIFIED BY '${DOLPHIN_EXPORTER_PASSWORD}';
ALTER USER '` + BackupUser + `'@'%' IDENTIFIED BY '${DOLPHIN_BACKUP_PASSWORD}';
`

// accountEnv gives the init container the passwords AccountsSQL uses.
func accountEnv(c *mysqlv1beta1.MySQLCluster) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(accountVars))
	for _, v := range accountVars {
		env = append(env, secretEnv(v.env, CredentialsSecretName(c), v.key))
	}
	return env
}
