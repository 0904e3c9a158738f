package topology

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/mysql"
	"github.com/dolphin-operator/dolphin/internal/pki"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// withTLS turns TLS on (the default) with a TLS Secret that every instance serves, runs
// the bootstrap's two passes with the clock at *now, and returns the certificate's expiry.
func (w *world) withTLS(t *testing.T, now *time.Time) time.Time {
	t.Helper()
	w.c.Spec.TLS.Enabled = nil
	w.m.Now = func() time.Time { return *now }
	notAfter := w.tlsSecret(t, *now, time.Hour)
	for _, f := range w.instances {
		f.status.TLSNotAfter = notAfter
	}
	w.pass(t)
	w.pass(t)
	return notAfter
}

// tlsSecret writes the cluster's TLS Secret: a CA and a server certificate issued at
// issued for lifetime; it returns the certificate's expiry.
func (w *world) tlsSecret(t *testing.T, issued time.Time, lifetime time.Duration) time.Time {
	t.Helper()
	ca, err := pki.NewCA("test CA", issued, 24*time.Hour, rand.Reader)
	require.NoError(t, err)
	server, err := pki.IssueServer(ca, resources.ServerDNSNames(w.c), issued, lifetime, rand.Reader)
	require.NoError(t, err)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.TLSSecretName(w.c)},
		Data: map[string][]byte{resources.KeyCACert: ca.CertPEM, corev1.TLSCertKey: server.CertPEM, corev1.TLSPrivateKeyKey: server.KeyPEM}}
	err = w.m.Client.Create(context.Background(), s)
	if apierrors.IsAlreadyExists(err) {
		err = w.m.Client.Update(context.Background(), s)
	}
	require.NoError(t, err)
	return server.Cert.NotAfter
}

// A renewed certificate reaches mysqld by ALTER INSTANCE RELOAD TLS, on every instance,
// after the topology's own actions; a reload that leaves the old certificate served (the
// kubelet has not written the new files yet) is tried again TLSReloadInterval later, not
// every pass. Replicas check their source's certificate against the cluster CA and for
// its DNS name, and a channel an earlier release set up without checks is set up again.
func TestManagerReloadsARenewedCertificateAndReplicasVerifyTheirSource(t *testing.T) {
	w := newWorld(t)
	w.m.Addresses = AddressDNS
	now := time.Now()
	first := w.withTLS(t, &now)
	for _, n := range []string{"db-1", "db-2"} {
		o := w.instances[n].replicaOptions
		require.Equal(t, []any{true, "/etc/mysql/tls/ca.crt", true}, []any{o.TLS, o.TLSCAFile, o.TLSVerifyName}, n)
	}
	w.replicate("db-0", u1+":1-5")
	for _, n := range []string{"db-1", "db-2"} {
		w.instances[n].status.Replica.SourceHost = "db-0.db-instances.ns.svc" // as an earlier release set it up
	}
	d := w.pass(t)
	require.ElementsMatch(t, []string{"db-1 ConfigureReplica db-0.db-instances.ns.svc", "db-2 ConfigureReplica db-0.db-instances.ns.svc"}, w.log,
		"channels without the certificate checks are set up again")
	require.False(t, d.Healthy)
	for _, n := range []string{"db-1", "db-2"} {
		r := w.instances[n].status.Replica
		r.SourceHost, r.TLSCAFile, r.TLSVerifyName = "db-0.db-instances.ns.svc", "/etc/mysql/tls/ca.crt", true
	}
	d = w.pass(t)
	require.True(t, d.Healthy, d.Message)
	require.Empty(t, w.log)

	second := w.tlsSecret(t, now.Add(time.Minute), time.Hour)
	require.NotEqual(t, first, second)
	d = w.pass(t)
	require.True(t, d.Healthy, "serving the previous, still valid certificate is no fault: %s", d.Message)
	require.ElementsMatch(t, []string{"db-0 ReloadTLS", "db-1 ReloadTLS", "db-2 ReloadTLS"}, w.log)
	w.pass(t)
	require.Empty(t, w.log, "no reload again within TLSReloadInterval")

	now = now.Add(TLSReloadInterval)
	for _, f := range w.instances {
		f.reloaded = func(st *mysql.Status) { st.TLSNotAfter = second } // the kubelet wrote the files
	}
	w.pass(t)
	require.ElementsMatch(t, []string{"db-0 ReloadTLS", "db-1 ReloadTLS", "db-2 ReloadTLS"}, w.log)
	now = now.Add(TLSReloadInterval)
	w.pass(t)
	require.Empty(t, w.log, "every instance serves the renewed certificate")
}

// A reload mysqld refuses (files it cannot use) leaves the instance serving its previous
// certificate: the pass goes on (it does not fail, the cluster stays healthy), a Warning
// Event says so, and the reload is tried again TLSReloadRetry later, not every interval.
func TestManagerReportsARefusedReloadWithoutFailingThePass(t *testing.T) {
	w := newWorld(t)
	rec := events.NewFakeRecorder(10)
	w.m.Recorder = rec
	now := time.Now()
	w.withTLS(t, &now)
	w.replicate("db-0", u1+":1-5")
	for _, n := range []string{"db-1", "db-2"} {
		r, o := w.instances[n].status.Replica, w.instances[n].replicaOptions
		r.TLSCAFile, r.TLSVerifyName = o.TLSCAFile, o.TLSVerifyName
	}
	require.True(t, w.pass(t).Healthy)
	<-rec.Events // the bootstrap's
	w.tlsSecret(t, now.Add(time.Minute), time.Hour)
	w.instances["db-1"].reloadErr = errors.New("Error 3888: Failed to set up SSL because of the following SSL library error: key values mismatch")
	d := w.pass(t)
	require.True(t, d.Healthy, d.Message)
	require.ElementsMatch(t, []string{"db-0 ReloadTLS", "db-1 ReloadTLS", "db-2 ReloadTLS"}, w.log)
	require.Len(t, rec.Events, 1)
	ev := <-rec.Events
	require.Contains(t, ev, mysqlv1beta1.ReasonCertificateReloadFailed)
	require.Contains(t, ev, "db-1 still serves its previous certificate")
	require.Contains(t, ev, "key values mismatch")

	now = now.Add(TLSReloadInterval)
	w.pass(t)
	require.ElementsMatch(t, []string{"db-0 ReloadTLS", "db-2 ReloadTLS"}, w.log, "the failed one waits longer")
	now = now.Add(TLSReloadRetry)
	w.pass(t)
	require.Contains(t, w.log, "db-1 ReloadTLS")
}

// A cluster's TLS Secret is parsed once and again only when its bytes change; a Secret
// that does not parse is refused with the key at fault.
func TestTLSMaterialIsParsedOnceUntilTheSecretChanges(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("test CA", now, 24*time.Hour, rand.Reader)
	require.NoError(t, err)
	first, err := pki.IssueServer(ca, []string{"db-0.db-instances.ns.svc"}, now, time.Hour, rand.Reader)
	require.NoError(t, err)
	m := &Manager{}

	a, err := m.tlsMaterial("ns/db/", "db-tls", ca.CertPEM, first.CertPEM)
	require.NoError(t, err)
	require.Equal(t, first.Cert.NotAfter, a.notAfter)
	b, err := m.tlsMaterial("ns/db/", "db-tls", append([]byte(nil), ca.CertPEM...), append([]byte(nil), first.CertPEM...))
	require.NoError(t, err)
	require.Same(t, a, b, "the same bytes are not parsed again")

	renewed, err := pki.IssueServer(ca, []string{"db-0.db-instances.ns.svc"}, now.Add(time.Minute), time.Hour, rand.Reader)
	require.NoError(t, err)
	c, err := m.tlsMaterial("ns/db/", "db-tls", ca.CertPEM, renewed.CertPEM)
	require.NoError(t, err)
	require.NotSame(t, a, c)
	require.Equal(t, renewed.Cert.NotAfter, c.notAfter)
	require.Equal(t, a.digest, c.digest, "the same CA")

	_, err = m.tlsMaterial("ns/other/", "other-tls", []byte("not PEM"), renewed.CertPEM)
	require.ErrorContains(t, err, "TLS Secret other-tls: ca.crt does not parse")
	_, err = m.tlsMaterial("ns/other/", "other-tls", ca.CertPEM, []byte("not PEM"))
	require.ErrorContains(t, err, "TLS Secret other-tls: tls.crt:")

	require.NoError(t, m.Forget(t.Context(), &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}))
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotContains(t, m.tls, "ns/db/", "a forgotten cluster's material goes with it")
}
