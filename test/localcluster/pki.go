package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

// certLifetime: clusters here live for minutes; a week leaves room for a long debugging
// session on a ground kept up with `make up`.
const certLifetime = 7 * 24 * time.Hour

func newCA(name string) (*pki.KeyPair, error) {
	return pki.NewCA(name, time.Now(), certLifetime, nil)
}

// issueServing issues a server certificate for the given DNS names and IPs.
func issueServing(ca *pki.KeyPair, cn string, dnsNames []string, ips []net.IP) (*pki.KeyPair, error) {
	return pki.Issue(ca, pki.Request{CommonName: cn, DNSNames: dnsNames, IPAddresses: ips,
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, time.Now(), certLifetime, nil)
}

// issueClient issues a client certificate; groups become the organisations, which the
// API server reads as the user's groups.
func issueClient(ca *pki.KeyPair, user string, groups ...string) (*pki.KeyPair, error) {
	return pki.Issue(ca, pki.Request{CommonName: user, Organization: groups,
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, time.Now(), certLifetime, nil)
}

// writePair writes kp as <dir>/<name>.crt and <dir>/<name>.key and returns the paths.
func writePair(kp *pki.KeyPair, dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, kp.CertPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("while writing %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, kp.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("while writing %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// credentials is every credential the control plane needs, written under dir.
type credentials struct {
	dir                    string
	ca, frontProxyCA       *pki.KeyPair
	caFile, frontProxyFile string
	apiserverCert          string
	apiserverKey           string
	frontProxyCert         string
	frontProxyKey          string
	saKey, saPub           string
	admin                  *pki.KeyPair
	// kubeletClientCert/Key: the API server's client certificate for kubelets (logs,
	// exec, port-forward).
	kubeletClientCert, kubeletClientKey string
}

func newCredentials(dir string) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("while creating %s: %w", dir, err)
	}
	p := &credentials{dir: dir}
	var err error
	if p.ca, err = newCA("dolphin-localcluster-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = newCA("dolphin-localcluster-front-proxy-ca"); err != nil {
		return nil, err
	}
	p.caFile, p.frontProxyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "front-proxy-ca.crt")
	if err := os.WriteFile(p.caFile, p.ca.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("while writing the CA: %w", err)
	}
	if err := os.WriteFile(p.frontProxyFile, p.frontProxyCA.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("while writing the front-proxy CA: %w", err)
	}
	serving, err := issueServing(p.ca, "kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(HostIP), net.ParseIP("10.96.0.1")})
	if err != nil {
		return nil, err
	}
	if p.apiserverCert, p.apiserverKey, err = writePair(serving, dir, "apiserver"); err != nil {
		return nil, err
	}
	// The aggregator authenticates to extension API servers with this client certificate.
	fp, err := issueClient(p.frontProxyCA, "front-proxy-client")
	if err != nil {
		return nil, err
	}
	if p.frontProxyCert, p.frontProxyKey, err = writePair(fp, dir, "front-proxy-client"); err != nil {
		return nil, err
	}
	if p.admin, err = issueClient(p.ca, "dolphin-admin", "system:masters"); err != nil {
		return nil, err
	}
	kc, err := issueClient(p.ca, "kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	if p.kubeletClientCert, p.kubeletClientKey, err = writePair(kc, dir, "apiserver-kubelet-client"); err != nil {
		return nil, err
	}
	return p, p.writeServiceAccountKey()
}

// writeServiceAccountKey writes the RSA key that signs service-account tokens.
func (p *credentials) writeServiceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("while generating the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("while encoding the service-account public key: %w", err)
	}
	p.saKey, p.saPub = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(p.saKey, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600); err != nil {
		return fmt.Errorf("while writing the service-account key: %w", err)
	}
	if err := os.WriteFile(p.saPub, pemBlock("PUBLIC KEY", pub), 0o644); err != nil {
		return fmt.Errorf("while writing the service-account public key: %w", err)
	}
	return nil
}
