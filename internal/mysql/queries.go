package mysql

import (
	"fmt"
	"strings"
	"time"
)

// Read-only queries.
const (
	qGlobals = `SELECT @@server_uuid, @@global.gtid_executed, @@global.gtid_purged, @@global.read_only, @@global.super_read_only`
	// qReplica joins the connection configuration and the two threads' states of the
	// default channel; no row means the instance is not a replica.
	qReplica = `SELECT c.HOST, c.PORT, s.SERVICE_STATE, a.SERVICE_STATE, s.RECEIVED_TRANSACTION_SET,
  s.LAST_ERROR_NUMBER, s.LAST_ERROR_MESSAGE, w.LAST_ERROR_NUMBER, w.LAST_ERROR_MESSAGE,
  c.SSL_CA_FILE, c.SSL_VERIFY_SERVER_CERTIFICATE
FROM performance_schema.replication_connection_configuration c
JOIN performance_schema.replication_connection_status s ON s.CHANNEL_NAME = c.CHANNEL_NAME
JOIN performance_schema.replication_applier_status a ON a.CHANNEL_NAME = c.CHANNEL_NAME
LEFT JOIN (SELECT CHANNEL_NAME, MAX(LAST_ERROR_NUMBER) AS LAST_ERROR_NUMBER, MAX(LAST_ERROR_MESSAGE) AS LAST_ERROR_MESSAGE
  FROM performance_schema.replication_applier_status_by_worker GROUP BY CHANNEL_NAME) w ON w.CHANNEL_NAME = c.CHANNEL_NAME
WHERE c.CHANNEL_NAME = ''`
	// qCoordinator reads the multi-threaded applier's coordinator (no row when it does not
	// run): the transaction it schedules, whether the receiver has it whole (the received
	// set holds only transactions received to their last event), its connection id.
	qCoordinator = `SELECT COALESCE(c.PROCESSING_TRANSACTION, ''),
  COALESCE(GTID_SUBSET(c.PROCESSING_TRANSACTION, s.RECEIVED_TRANSACTION_SET), 1), t.PROCESSLIST_ID
FROM performance_schema.replication_applier_status_by_coordinator c
JOIN performance_schema.replication_connection_status s ON s.CHANNEL_NAME = c.CHANNEL_NAME
LEFT JOIN performance_schema.threads t ON t.THREAD_ID = c.THREAD_ID
WHERE c.CHANNEL_NAME = '' AND c.SERVICE_STATE = 'ON'`
	qPlugins      = `SELECT PLUGIN_NAME FROM information_schema.PLUGINS WHERE PLUGIN_STATUS = 'ACTIVE'`
	qGlobalStatus = `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_status
WHERE VARIABLE_NAME IN ('Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_clients', 'Rpl_semi_sync_replica_status',
  'Ssl_server_not_after')`
	qCloneState    = `SELECT STATE, ERROR_NO, ERROR_MESSAGE FROM performance_schema.clone_status`
	qGTIDSubtract  = `SELECT GTID_SUBTRACT(?, ?)`
	qWaitForGTID   = `SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)`
	qUserProcesses = `SELECT ID FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID() AND USER NOT IN ('system user', 'event_scheduler') AND COMMAND <> 'Binlog Dump GTID' AND USER NOT IN (%s)`
)

// Plugins the operator relies on, by plugin name and library.
var plugins = []struct{ name, library string }{
	{"rpl_semi_sync_source", "semisync_source.so"},
	{"rpl_semi_sync_replica", "semisync_replica.so"},
	{"clone", "mysql_clone.so"},
}

func installPlugin(name, library string) string {
	return fmt.Sprintf("INSTALL PLUGIN %s SONAME '%s'", name, library)
}

// quote makes s a SQL string literal. Values come from the operator (host names,
// generated passwords), but quoting is never skipped.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// changeSource points the replica at its source with GTID auto-positioning. Retries are
// many and quick: a source that restarts must be found again within seconds.
func changeSource(o ReplicaOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CHANGE REPLICATION SOURCE TO SOURCE_HOST=%s, SOURCE_PORT=%d, SOURCE_USER=%s, SOURCE_PASSWORD=%s, "+
		"SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, SOURCE_RETRY_COUNT=86400",
		quote(o.SourceHost), o.SourcePort, quote(o.User), quote(o.Password))
	if o.TLS {
		fmt.Fprintf(&b, ", SOURCE_SSL=1, SOURCE_SSL_CA=%s, SOURCE_SSL_VERIFY_SERVER_CERT=%d", quote(o.TLSCAFile), map[bool]int{true: 1}[o.TLSVerifyName])
	} else {
		// Without TLS, caching_sha2_password needs the source's public key to send the
		// password. The CA and name check are cleared (CHANGE REPLICATION SOURCE keeps what
		// it is not told) but SOURCE_SSL=0 is not written: a channel never told it encrypts
		// whenever the source offers TLS (SSL_ALLOWED=YES on 9.7), and over plain TCP the
		// source noticed a stopped receiver only after more than 60 s, which held its
		// semi-sync accounting (test/sql TestFencingAPrimaryWhoseCommitsWaitForAnAcknowledgement).
		b.WriteString(", SOURCE_SSL_CA='', SOURCE_SSL_VERIFY_SERVER_CERT=0, GET_SOURCE_PUBLIC_KEY=1")
	}
	return b.String()
}

// primarySettings makes an instance a lossless semi-sync source (or turns semi-sync off).
func primarySettings(o PrimaryOptions) []string {
	if !o.SemiSync {
		return []string{"SET GLOBAL rpl_semi_sync_source_enabled = OFF"}
	}
	return []string{
		"SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'",
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = %d", max(o.WaitForReplicaCount, 1)),
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_source_timeout = %d", durationMillis(o.Timeout)),
		"SET GLOBAL rpl_semi_sync_source_enabled = ON",
	}
}

// durationMillis caps at the largest timeout MySQL accepts (2^32-1 ms).
func durationMillis(d time.Duration) int64 {
	const maxMillis = 1<<32 - 1
	if d <= 0 {
		return 10000
	}
	return min(d.Milliseconds(), maxMillis)
}

// cloneCA sets the CA the recipient verifies its donor's certificate against; empty (no
// CA, or no TLS) verifies nothing.
func cloneCA(o CloneOptions) string {
	ca := ""
	if o.TLS {
		ca = o.TLSCAFile
	}
	return "SET GLOBAL clone_ssl_ca = " + quote(ca)
}

func cloneFrom(o CloneOptions) string {
	return fmt.Sprintf("CLONE INSTANCE FROM %s@%s:%d IDENTIFIED BY %s REQUIRE %sSSL",
		quote(o.User), quote(o.DonorHost), o.DonorPort, quote(o.Password), map[bool]string{true: "", false: "NO "}[o.TLS])
}
