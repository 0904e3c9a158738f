package mysql

import (
	"testing"
	"time"
)

func TestStatementText(t *testing.T) {
	for name, tc := range map[string]struct{ got, want string }{
		"change source without TLS": {changeSource(ReplicaOptions{SourceHost: "db-0.db-instances.ns.svc", SourcePort: 3306, User: "repl", Password: "pw"}),
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST='db-0.db-instances.ns.svc', SOURCE_PORT=3306, SOURCE_USER='repl', SOURCE_PASSWORD='pw', " +
				"SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, SOURCE_RETRY_COUNT=86400, " +
				"SOURCE_SSL_CA='', SOURCE_SSL_VERIFY_SERVER_CERT=0, GET_SOURCE_PUBLIC_KEY=1"},
		"change source with TLS": {changeSource(ReplicaOptions{SourceHost: "h", SourcePort: 1, User: "u", Password: "p", TLS: true}),
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST='h', SOURCE_PORT=1, SOURCE_USER='u', SOURCE_PASSWORD='p', " +
				"SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, SOURCE_RETRY_COUNT=86400, SOURCE_SSL=1, SOURCE_SSL_CA='', SOURCE_SSL_VERIFY_SERVER_CERT=0"},
		"change source verifying the source": {changeSource(ReplicaOptions{SourceHost: "h", SourcePort: 1, User: "u", Password: "p", TLS: true,
			TLSCAFile: "/etc/mysql/tls/ca.crt", TLSVerifyName: true}),
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST='h', SOURCE_PORT=1, SOURCE_USER='u', SOURCE_PASSWORD='p', " +
				"SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, SOURCE_RETRY_COUNT=86400, SOURCE_SSL=1, SOURCE_SSL_CA='/etc/mysql/tls/ca.crt', SOURCE_SSL_VERIFY_SERVER_CERT=1"},
		"quotes are escaped":                 {quote(`it's \ odd`), `'it\'s \\ odd'`},
		"clone without TLS":                  {cloneFrom(CloneOptions{DonorHost: "h", DonorPort: 3306, User: "u", Password: "p"}), "CLONE INSTANCE FROM 'u'@'h':3306 IDENTIFIED BY 'p' REQUIRE NO SSL"},
		"clone with TLS":                     {cloneFrom(CloneOptions{DonorHost: "h", DonorPort: 3306, User: "u", Password: "p", TLS: true}), "CLONE INSTANCE FROM 'u'@'h':3306 IDENTIFIED BY 'p' REQUIRE SSL"},
		"clone's donor verified":             {cloneCA(CloneOptions{TLS: true, TLSCAFile: "/etc/mysql/tls/ca.crt"}), "SET GLOBAL clone_ssl_ca = '/etc/mysql/tls/ca.crt'"},
		"clone without TLS verifies nothing": {cloneCA(CloneOptions{TLSCAFile: "/etc/mysql/tls/ca.crt"}), "SET GLOBAL clone_ssl_ca = ''"},
		"install plugin":                     {installPlugin("clone", "mysql_clone.so"), "INSTALL PLUGIN clone SONAME 'mysql_clone.so'"},
		"error names no secrets":             {firstWords("CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD='x'"), "CHANGE REPLICATION SOURCE TO"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", name, tc.got, tc.want)
		}
	}
}

func TestPrimarySettings(t *testing.T) {
	got := primarySettings(PrimaryOptions{SemiSync: true, WaitForReplicaCount: 2, Timeout: 24 * time.Hour})
	want := []string{
		"SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'",
		"SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 2",
		"SET GLOBAL rpl_semi_sync_source_timeout = 86400000",
		"SET GLOBAL rpl_semi_sync_source_enabled = ON",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("statement %d: got %s want %s", k, got[k], want[k])
		}
	}
	if off := primarySettings(PrimaryOptions{}); len(off) != 1 || off[0] != "SET GLOBAL rpl_semi_sync_source_enabled = OFF" {
		t.Errorf("semi-sync off: %v", off)
	}
	if durationMillis(1000*24*time.Hour) != 1<<32-1 {
		t.Error("timeouts past MySQL's maximum are capped")
	}
}

func TestTheServedCertificatesExpiryIsReadAsMySQLPrintsIt(t *testing.T) {
	for value, want := range map[string]time.Time{
		"Dec  4 04:27:01 2027 GMT": time.Date(2027, 12, 4, 4, 27, 1, 0, time.UTC),
		"Jan 15 23:59:59 2036 GMT": time.Date(2036, 1, 15, 23, 59, 59, 0, time.UTC),
	} {
		got, err := time.Parse(SSLTimeLayout, value)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: got %v (%v), want %v", value, got, err, want)
		}
	}
}

func TestAChannelsTLSIsComparedWithWhatTheOperatorAsks(t *testing.T) {
	verified := ReplicaOptions{TLS: true, TLSCAFile: "/ca", TLSVerifyName: true}
	for name, tc := range map[string]struct {
		r    ReplicaStatus
		o    ReplicaOptions
		want bool
	}{
		"verified as asked":                   {ReplicaStatus{TLSCAFile: "/ca", TLSVerifyName: true}, verified, true},
		"an earlier release's unverified TLS": {ReplicaStatus{}, verified, false},
		"the CA only":                         {ReplicaStatus{TLSCAFile: "/ca"}, verified, false},
		"TLS off, nothing to verify":          {ReplicaStatus{}, ReplicaOptions{}, true},
		"TLS off, a CA left":                  {ReplicaStatus{TLSCAFile: "/ca"}, ReplicaOptions{}, false},
	} {
		if got := tc.r.TLSAs(tc.o); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
