// Package pki issues and checks the certificates the operator makes itself: a CA and the
// server certificates it signs. It is used for MySQL's TLS and for the webhook server when
// nothing else (OLM, cert-manager) provides one, and by the test ground for its control
// plane's and nodes' certificates. Keys are ECDSA P-256. It depends on nothing of the
// operator's.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"time"
)

// KeyPair is a certificate with its private key, parsed and PEM-encoded.
type KeyPair struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM []byte
}

// NewCA issues a self-signed CA valid from an hour before now (clock skew) for lifetime.
func NewCA(commonName string, now time.Time, lifetime time.Duration, random io.Reader) (*KeyPair, error) {
	if random == nil {
		random = rand.Reader
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("while generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(random), Subject: pkix.Name{CommonName: commonName, Organization: []string{"Dolphin"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return sign(tmpl, tmpl, key, key, random)
}

// IssueServer signs a certificate for names (the first is its common name) with ca.
func IssueServer(ca *KeyPair, names []string, now time.Time, lifetime time.Duration, random io.Reader) (*KeyPair, error) {
	if len(names) == 0 {
		return nil, errors.New("a server certificate needs at least one DNS name")
	}
	return Issue(ca, Request{CommonName: names[0], Organization: []string{"Dolphin"}, DNSNames: names,
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, now, lifetime, random)
}

// Request is what a leaf certificate says: who it is (a client certificate's organisations
// are the groups Kubernetes reads), the names and addresses it serves, and what it is for.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPAddresses  []net.IP
	Usage        []x509.ExtKeyUsage
}

// Issue signs a leaf certificate for r with ca, valid from an hour before now for lifetime.
func Issue(ca *KeyPair, r Request, now time.Time, lifetime time.Duration, random io.Reader) (*KeyPair, error) {
	if random == nil {
		random = rand.Reader
	}
	if r.CommonName == "" || len(r.Usage) == 0 {
		return nil, errors.New("a certificate needs a common name and a usage")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("while generating the key of %s: %w", r.CommonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(random), Subject: pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime), DNSNames: r.DNSNames, IPAddresses: r.IPAddresses,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: r.Usage,
	}
	return sign(tmpl, ca.Cert, key, ca.Key, random)
}

// ParseCertificate reads the first certificate of a PEM bundle (a leaf before its chain).
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("while parsing a certificate: %w", err)
	}
	return cert, nil
}

// Parse reads a PEM certificate and its PEM EC key.
func Parse(certPEM, keyPEM []byte) (*KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("no PEM certificate or key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("while parsing a certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("while parsing a key: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// UsableCA parses a CA pair and returns it if it is a CA outside its renewal window.
func UsableCA(certPEM, keyPEM []byte, now time.Time, renewBefore time.Duration) (*KeyPair, bool) {
	kp, err := Parse(certPEM, keyPEM)
	if err != nil || !kp.Cert.IsCA || !now.Before(kp.Cert.NotAfter.Add(-renewBefore)) {
		return nil, false
	}
	return kp, true
}

// UsableServer parses a server pair and returns it if ca signed it, it names every one of
// names, and it is outside its renewal window. Anything else means: issue a new one.
func UsableServer(certPEM, keyPEM []byte, ca *KeyPair, names []string, now time.Time, renewBefore time.Duration) (*KeyPair, bool) {
	kp, err := Parse(certPEM, keyPEM)
	if err != nil || kp.Cert.CheckSignatureFrom(ca.Cert) != nil || !now.Before(kp.Cert.NotAfter.Add(-renewBefore)) {
		return nil, false
	}
	for _, n := range names {
		if !slices.Contains(kp.Cert.DNSNames, n) {
			return nil, false
		}
	}
	return kp, true
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, random io.Reader) (*KeyPair, error) {
	der, err := x509.CreateCertificate(random, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("while signing %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("while encoding a key: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("while parsing a new certificate: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

func serial(random io.Reader) *big.Int {
	b := make([]byte, 16)
	_, _ = io.ReadFull(random, b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
