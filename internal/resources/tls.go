package resources

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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Lifetimes of operator-issued certificates, and how long before expiry they are renewed.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
	KeyCACert      = "ca.crt"
	KeyCAKey       = "ca.key"
)

// TLSResult is what TLSSecrets decided.
type TLSResult struct {
	// CA and Server are the Secrets to apply; nil means they must not exist (TLS off, or
	// the user brings the certificate).
	CA, Server *corev1.Secret
	// RenewAt is when the next certificate runs into its renewal window: reconcile again then.
	RenewAt time.Time
}

// TLSSecrets builds the operator-issued CA and server certificate Secrets. Valid existing
// certificates are kept; a certificate is (re)issued when it is missing, unreadable,
// within RenewBefore of expiry, not signed by the current CA, or missing a name the
// cluster's Services need.
func TLSSecrets(c *mysqlv1beta1.MySQLCluster, existingCA, existingServer *corev1.Secret, now time.Time, random io.Reader) (TLSResult, error) {
	if random == nil {
		random = rand.Reader
	}
	if (c.Spec.TLS.Enabled != nil && !*c.Spec.TLS.Enabled) || c.Spec.TLS.SecretName != "" {
		return TLSResult{}, nil
	}
	ca, err := keepOrNewCA(c, existingCA, now, random)
	if err != nil {
		return TLSResult{}, err
	}
	names := ServerDNSNames(c)
	server := keepServer(existingServer, ca, names, now)
	if server == nil {
		if server, err = issueServer(ca, names, now, random); err != nil {
			return TLSResult{}, err
		}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)}
	}
	res := TLSResult{
		CA: &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(CASecretName(c)),
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{KeyCACert: ca.certPEM, KeyCAKey: ca.keyPEM}},
		Server: &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(TLSSecretName(c)),
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: server.certPEM,
				corev1.TLSPrivateKeyKey: server.keyPEM, KeyCACert: ca.certPEM}},
	}
	res.RenewAt = earliest(ca.cert.NotAfter.Add(-RenewBefore), server.cert.NotAfter.Add(-RenewBefore))
	return res, nil
}

// ServerDNSNames are the names clients and replicas use: every Service, and every
// instance through the headless Service.
func ServerDNSNames(c *mysqlv1beta1.MySQLCluster) []string {
	var names []string
	for _, svc := range []string{PrimaryServiceName(c), ReplicasServiceName(c), HeadlessServiceName(c)} {
		base := svc + "." + c.Namespace
		names = append(names, svc, base, base+".svc", base+".svc.cluster.local")
	}
	h := HeadlessServiceName(c) + "." + c.Namespace + ".svc"
	return append(names, "*."+h, "*."+h+".cluster.local")
}

type keyPair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

func keepOrNewCA(c *mysqlv1beta1.MySQLCluster, s *corev1.Secret, now time.Time, random io.Reader) (*keyPair, error) {
	if s != nil {
		if kp, err := parsePair(s.Data[KeyCACert], s.Data[KeyCAKey]); err == nil &&
			kp.cert.IsCA && now.Before(kp.cert.NotAfter.Add(-RenewBefore)) {
			return kp, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("while generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(random), Subject: pkix.Name{CommonName: c.Namespace + "/" + c.Name + " MySQL CA", Organization: []string{"Dolphin"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CALifetime), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return sign(tmpl, tmpl, key, key, random)
}

// keepServer returns the existing server pair if it is still good for these names and
// CA; nil (missing, unreadable, expiring, signed by another CA, a name missing) means a
// new one is issued.
func keepServer(s *corev1.Secret, ca *keyPair, names []string, now time.Time) *keyPair {
	if s == nil {
		return nil
	}
	kp, err := parsePair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil || kp.cert.CheckSignatureFrom(ca.cert) != nil || !now.Before(kp.cert.NotAfter.Add(-RenewBefore)) {
		return nil
	}
	for _, n := range names {
		if !slices.Contains(kp.cert.DNSNames, n) {
			return nil
		}
	}
	return kp
}

func issueServer(ca *keyPair, names []string, now time.Time, random io.Reader) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("while generating the server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(random), Subject: pkix.Name{CommonName: names[0], Organization: []string{"Dolphin"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(ServerLifetime), DNSNames: names,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return sign(tmpl, ca.cert, key, ca.key, random)
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, random io.Reader) (*keyPair, error) {
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
	return &keyPair{cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

func parsePair(certPEM, keyPEM []byte) (*keyPair, error) {
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
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func serial(random io.Reader) *big.Int {
	b := make([]byte, 16)
	_, _ = io.ReadFull(random, b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
