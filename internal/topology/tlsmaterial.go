package topology

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dolphin-operator/dolphin/internal/pki"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// tlsMaterial is what a pass needs of a cluster's TLS Secret, parsed: the pool that
// verifies the instances, the certificate's expiry and a digest of the CA that names
// pooled connections. Parsing them took about a seventh of the operator's CPU with
// hundreds of clusters (every pass of every cluster parsed the CA once an instance and
// the certificate once), so the manager keeps them by cluster until the Secret's bytes
// change.
type tlsMaterial struct {
	ca, cert []byte // what they were parsed from
	pool     *x509.CertPool
	notAfter time.Time
	digest   [sha256.Size]byte
}

// tlsMaterial returns the parsed CA and certificate of a cluster's TLS Secret, parsing
// them only when they differ from the last ones parsed for the cluster.
func (m *Manager) tlsMaterial(key, secret string, ca, cert []byte) (*tlsMaterial, error) {
	m.mu.Lock()
	held := m.tls[key]
	m.mu.Unlock()
	if held != nil && bytes.Equal(held.ca, ca) && bytes.Equal(held.cert, cert) {
		return held, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("TLS Secret %s: %s does not parse", secret, resources.KeyCACert)
	}
	parsed, err := pki.ParseCertificate(cert)
	if err != nil {
		return nil, fmt.Errorf("TLS Secret %s: %s: %w", secret, corev1.TLSCertKey, err)
	}
	// Copies: the bytes are the cache's, which a later read may hand out again.
	t := &tlsMaterial{ca: bytes.Clone(ca), cert: bytes.Clone(cert), pool: pool, notAfter: parsed.NotAfter,
		digest: sha256.Sum256(ca)}
	m.mu.Lock()
	if m.tls == nil {
		m.tls = map[string]*tlsMaterial{}
	}
	m.tls[key] = t
	m.mu.Unlock()
	return t, nil
}
