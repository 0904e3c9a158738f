package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority kept in memory for issuing certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// newCA creates a self-signed CA valid for a week: clusters here live for minutes.
func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("while generating the %s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("while signing the %s certificate: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("while parsing the %s certificate: %w", name, err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// KeyPair is a PEM certificate and key.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// IssueServing issues a server certificate for the given DNS names and IPs.
func (ca *CA) IssueServing(cn string, dnsNames []string, ips []net.IP) (*KeyPair, error) {
	return ca.issue(pkix.Name{CommonName: cn}, dnsNames, ips, x509.ExtKeyUsageServerAuth)
}

// IssueClient issues a client certificate; groups become the organisations, which the
// API server reads as the user's groups.
func (ca *CA) IssueClient(user string, groups ...string) (*KeyPair, error) {
	return ca.issue(pkix.Name{CommonName: user, Organization: groups}, nil, nil, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(subject pkix.Name, dnsNames []string, ips []net.IP, usage x509.ExtKeyUsage) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("while generating a key for %s: %w", subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("while picking a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("while signing a certificate for %s: %w", subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("while encoding a key: %w", err)
	}
	return &KeyPair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// WriteFiles writes the pair as <dir>/<name>.crt and <dir>/<name>.key and returns the paths.
func (kp *KeyPair) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
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

// pki is every credential the control plane needs, written under dir.
type pki struct {
	dir                    string
	ca, frontProxyCA       *CA
	caFile, frontProxyFile string
	apiserverCert          string
	apiserverKey           string
	frontProxyCert         string
	frontProxyKey          string
	saKey, saPub           string
	admin                  *KeyPair
	// kubeletClientCert/Key: the API server's client certificate for kubelets (logs,
	// exec, port-forward).
	kubeletClientCert, kubeletClientKey string
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("while creating %s: %w", dir, err)
	}
	p := &pki{dir: dir}
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
	serving, err := p.ca.IssueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(HostIP), net.ParseIP("10.96.0.1")})
	if err != nil {
		return nil, err
	}
	if p.apiserverCert, p.apiserverKey, err = serving.WriteFiles(dir, "apiserver"); err != nil {
		return nil, err
	}
	// The aggregator authenticates to extension API servers with this client certificate.
	fp, err := p.frontProxyCA.IssueClient("front-proxy-client")
	if err != nil {
		return nil, err
	}
	if p.frontProxyCert, p.frontProxyKey, err = fp.WriteFiles(dir, "front-proxy-client"); err != nil {
		return nil, err
	}
	if p.admin, err = p.ca.IssueClient("dolphin-admin", "system:masters"); err != nil {
		return nil, err
	}
	kc, err := p.ca.IssueClient("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return nil, err
	}
	if p.kubeletClientCert, p.kubeletClientKey, err = kc.WriteFiles(dir, "apiserver-kubelet-client"); err != nil {
		return nil, err
	}
	return p, p.writeServiceAccountKey()
}

// writeServiceAccountKey writes the RSA key that signs service-account tokens.
func (p *pki) writeServiceAccountKey() error {
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
