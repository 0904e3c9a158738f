package topology

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

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
