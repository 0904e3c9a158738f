package sql_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/pki"
	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// tlsDir holds what the operator mounts from a cluster's TLS Secret: ca.crt, tls.crt and
// tls.key, which mysqld reads at start-up and on ALTER INSTANCE RELOAD TLS.
type tlsDir string

func (d tlsDir) path(name string) string { return filepath.Join(string(d), name) }

// write issues a certificate for ips and names from ca, valid for lifetime, and writes it
// with ca's certificate. It returns the certificate.
func (d tlsDir) write(t *testing.T, ca *pki.KeyPair, lifetime time.Duration, ips []net.IP, names ...string) *x509.Certificate {
	t.Helper()
	kp, err := pki.Issue(ca, pki.Request{CommonName: "mysql", DNSNames: names, IPAddresses: ips,
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, time.Now(), lifetime, nil)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(string(d), 0o700))
	for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM} {
		require.NoError(t, os.WriteFile(d.path(name), data, 0o600))
	}
	return kp.Cert
}

func newCA(t *testing.T, name string) *pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA(name, time.Now(), 24*time.Hour, nil)
	require.NoError(t, err)
	return ca
}

var loopback = []net.IP{net.IPv4(127, 0, 0, 1)}

// startTLS starts one server per folder, each with distinct server_id, serving the
// certificate in its folder.
func startTLS(t *testing.T, dirs ...tlsDir) ([]*mysqld.Instance, []mysql.Instance) {
	t.Helper()
	install, err := mysqld.Locate()
	require.NoError(t, err, "MySQL for tests")
	base := t.TempDir()
	servers := make([]*mysqld.Instance, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for k, d := range dirs {
		wg.Go(func() {
			servers[k], errs[k] = install.Start(context.Background(), mysqld.Options{
				Dir: filepath.Join(base, fmt.Sprintf("mysql-%d", k)), ServerID: uint32(200 + k),
				ExtraArgs: []string{"--ssl-ca=" + d.path("ca.crt"), "--ssl-cert=" + d.path("tls.crt"), "--ssl-key=" + d.path("tls.key")},
			})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range servers {
			if s != nil {
				if t.Failed() {
					t.Logf("%s, end of error.log:\n%s", s.Addr(), s.ErrorLogTail(3000))
				}
				s.Stop()
			}
		}
	})
	in := make([]mysql.Instance, len(dirs))
	for k := range dirs {
		require.NoError(t, errs[k], "starting MySQL instance %d", k)
		in[k] = withReplicationAccount(t, servers[k])
	}
	return servers, in
}

// served is the certificate a new TLS connection to s is shown.
func served(t *testing.T, s *mysqld.Instance) *x509.Certificate {
	t.Helper()
	var got *x509.Certificate
	cfg := &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
		got = cs.PeerCertificates[0]
		return nil
	}}
	in, err := mysql.Open(mysql.Config{Addr: s.Addr(), User: "root", Password: mysqld.RootPassword, TLS: cfg})
	require.NoError(t, err)
	defer in.Close()
	_, err = in.Status(testContext(t))
	require.NoError(t, err)
	require.NotNil(t, got, "the connection used TLS")
	return got
}

func TestReloadTLSServesARenewedCertificateWithoutARestart(t *testing.T) {
	ctx := testContext(t)
	dir := tlsDir(t.TempDir())
	ca := newCA(t, "test CA")
	old := dir.write(t, ca, time.Hour, loopback)
	servers, in := startTLS(t, dir)
	// A replica is fenced: the reload must work under super_read_only too.
	require.NoError(t, in[0].SetSuperReadOnly(ctx, true))

	st, err := in[0].Status(ctx)
	require.NoError(t, err)
	require.True(t, st.TLSNotAfter.Equal(old.NotAfter), "status reports the served certificate's expiry: %s, want %s", st.TLSNotAfter, old.NotAfter)

	renewed := dir.write(t, ca, 2*time.Hour, loopback)
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.True(t, st.TLSNotAfter.Equal(old.NotAfter), "new files are not served before the reload")
	require.Equal(t, old.SerialNumber, served(t, servers[0]).SerialNumber)

	require.NoError(t, in[0].ReloadTLS(ctx))
	st, err = in[0].Status(ctx)
	require.NoError(t, err)
	require.True(t, st.TLSNotAfter.Equal(renewed.NotAfter), "after the reload: %s, want %s", st.TLSNotAfter, renewed.NotAfter)
	require.Equal(t, renewed.SerialNumber, served(t, servers[0]).SerialNumber, "new connections get the renewed certificate")
	require.Equal(t, 1, servers[0].Starts(), "without a restart")
}

func TestAReplicaVerifiesItsSourcesCertificate(t *testing.T) {
	ctx := testContext(t)
	ca, other := newCA(t, "cluster CA"), newCA(t, "another CA")
	root := t.TempDir()
	dirs := []tlsDir{tlsDir(root + "/replica"), tlsDir(root + "/good"), tlsDir(root + "/other-ca"), tlsDir(root + "/other-name")}
	dirs[0].write(t, ca, time.Hour, loopback)
	dirs[1].write(t, ca, time.Hour, loopback, "mysql.test")
	dirs[2].write(t, other, time.Hour, loopback)
	dirs[3].write(t, ca, time.Hour, nil, "elsewhere.test")
	servers, in := startTLS(t, dirs...)
	replica := in[0]
	from := func(k int, verifyName bool) mysql.ReplicaOptions {
		o := replicaOf(servers[k])
		o.SemiSync, o.TLS, o.TLSCAFile, o.TLSVerifyName = false, true, dirs[0].path("ca.crt"), verifyName
		return o
	}
	replicates := func(k int, o mysql.ReplicaOptions) {
		t.Helper()
		require.NoError(t, replica.ConfigureReplica(ctx, o))
		db := fmt.Sprintf("from_%d_%v", k, o.TLSVerifyName)
		require.NoError(t, asRoot(t, servers[k]).Exec(ctx, "CREATE DATABASE "+db))
		st, err := in[k].Status(ctx)
		require.NoError(t, err)
		require.NoError(t, replica.WaitForGTID(ctx, st.GTIDExecuted, 30*time.Second), "replicates from %s", servers[k].Addr())
		rs, err := replica.Status(ctx)
		require.NoError(t, err)
		require.True(t, rs.Replica.TLSAs(o), "the channel reports its checks: %+v", rs.Replica)
	}
	refused := func(k int, o mysql.ReplicaOptions) {
		t.Helper()
		require.NoError(t, replica.ConfigureReplica(ctx, o))
		eventually(t, "the receiver to refuse "+servers[k].Addr(), func() error {
			rs, err := replica.Status(ctx)
			if err != nil {
				return err
			}
			if rs.Replica.IORunning || rs.Replica.LastIOError == "" {
				return fmt.Errorf("receiver running %v, error %q", rs.Replica.IORunning, rs.Replica.LastIOError)
			}
			require.Contains(t, strings.ToLower(rs.Replica.LastIOError), "ssl", "the error says why")
			return nil
		})
	}

	replicates(1, from(1, true))         // the cluster's CA, and the address dialled is in the certificate
	refused(2, from(2, true))            // another CA
	refused(2, from(2, false))           // another CA, even when names are not checked
	refused(3, from(3, true))            // the cluster's CA, but the certificate names another host
	replicates(3, from(3, false))        // the same, checking the CA only (replicas that dial pod IPs)
	replicates(1, replicaOf(servers[1])) // without TLS the channel is set back to no checks
	rs, err := replica.Status(ctx)
	require.NoError(t, err)
	require.Empty(t, rs.Replica.TLSCAFile)
	require.False(t, rs.Replica.TLSVerifyName)
}

// A clone verifies its donor's certificate against the CA it is given (clone_ssl_ca): a
// donor serving a certificate of another CA is refused and the recipient keeps its data;
// a donor of the cluster's CA is cloned.
func TestACloneVerifiesItsDonorsCertificate(t *testing.T) {
	ctx := testContext(t)
	ca, other := newCA(t, "cluster CA"), newCA(t, "another CA")
	root := t.TempDir()
	dirs := []tlsDir{tlsDir(root + "/recipient"), tlsDir(root + "/good"), tlsDir(root + "/other-ca")}
	dirs[0].write(t, ca, time.Hour, loopback)
	dirs[1].write(t, ca, time.Hour, loopback)
	dirs[2].write(t, other, time.Hour, loopback)
	servers, in := startTLS(t, dirs...)
	for k := 1; k < len(in); k++ {
		require.NoError(t, in[k].ConfigurePrimary(ctx, mysql.PrimaryOptions{}))
		require.NoError(t, asRoot(t, servers[k]).Exec(ctx, fmt.Sprintf("CREATE DATABASE donor_%d", k)))
	}
	from := func(k int) mysql.CloneOptions {
		return mysql.CloneOptions{DonorHost: "127.0.0.1", DonorPort: servers[k].Port(), User: replUser, Password: replPassword,
			TLS: true, TLSCAFile: dirs[0].path("ca.crt")}
	}

	require.NoError(t, in[0].PrepareClone(ctx, from(2)))
	err := in[0].Clone(ctx, from(2))
	require.Error(t, err, "a donor of another CA is refused")
	require.Contains(t, strings.ToLower(err.Error()), "ssl", "the error says why")
	require.Equal(t, 1, servers[0].Starts(), "nothing was copied: no restart")

	require.NoError(t, in[0].PrepareClone(ctx, from(1)))
	require.NoError(t, in[0].Clone(ctx, from(1)), "the connection dropping as mysqld restarts counts as the clone's end")
	eventually(t, "the clone from the cluster CA's donor", func() error {
		st, err := in[0].Status(ctx)
		if err != nil {
			return err
		}
		if st.Clone == nil || st.Clone.State != mysql.CloneCompleted {
			return fmt.Errorf("clone %+v", st.Clone)
		}
		return nil
	})
	db, err := servers[0].DB()
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'donor_1'").Scan(&n))
	require.Equal(t, 1, n, "the donor's data is in place")
}
