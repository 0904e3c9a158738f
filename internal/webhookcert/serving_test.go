package webhookcert

import (
	"crypto/rand"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

func serverPair(t *testing.T) *pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA("ca", time.Now(), time.Hour, rand.Reader)
	require.NoError(t, err)
	kp, err := pki.IssueServer(ca, []string{"localhost"}, time.Now(), time.Hour, rand.Reader)
	require.NoError(t, err)
	return kp
}

func TestServingIsReadyOnlyWhileTheServerServesTheCertificateOnDisk(t *testing.T) {
	served := serverPair(t)
	cert, err := tls.X509KeyPair(served.CertPEM, served.KeyPEM)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	file := filepath.Join(t.TempDir(), "tls.crt")
	check := Serving(addr, file)
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)

	require.ErrorContains(t, check(req), "no such file", "no certificate yet")
	require.NoError(t, os.WriteFile(file, []byte("not PEM"), 0o600))
	require.ErrorContains(t, check(req), "holds no PEM certificate")

	// The served one, as a chain with its key before it: ready.
	require.NoError(t, os.WriteFile(file, append(append([]byte(nil), served.KeyPEM...), served.CertPEM...), 0o600))
	require.NoError(t, check(req))

	// Rotated on disk, the server not reloaded: not ready, and the error says which it serves.
	rotated := serverPair(t)
	require.NoError(t, os.WriteFile(file, rotated.CertPEM, 0o600))
	err = check(req)
	require.ErrorContains(t, err, "serves the certificate of serial")
	require.ErrorContains(t, err, "not the one in "+file)

	// No server: not ready.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := l.Addr().String()
	require.NoError(t, l.Close())
	require.ErrorContains(t, Serving(gone, file)(req), "the webhook server at "+gone)
}
