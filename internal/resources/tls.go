package resources

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/pki"
)

// Lifetimes of operator-issued certificates, and how long before expiry they are renewed.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
	// CATransition is how long after a new CA is made the one it replaced is still
	// trusted (its certificate stays in the TLS Secret's ca.crt): long enough for every
	// instance to load a certificate of the new CA, and for clients to take the new ca.crt.
	CATransition      = RenewBefore
	KeyCACert         = "ca.crt"
	KeyCAKey          = "ca.key"
	KeyPreviousCACert = "ca-previous.crt"
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
//
// A new CA does not end the trust in the one it replaces at once: instances serve a
// certificate of the old CA until they reload theirs, and the operator, replicas and
// clients verify them with the TLS Secret's ca.crt. So for CATransition after a new CA is
// made, ca.crt holds both CAs (the old one's certificate is kept in the CA Secret, or
// read from the TLS Secret's ca.crt when the CA Secret was deleted to force a new CA).
func TLSSecrets(c *mysqlv1beta1.MySQLCluster, existingCA, existingServer *corev1.Secret, now time.Time, random io.Reader) (TLSResult, error) {
	if random == nil {
		random = rand.Reader
	}
	if (c.Spec.TLS.Enabled != nil && !*c.Spec.TLS.Enabled) || c.Spec.TLS.SecretName != "" {
		return TLSResult{}, nil
	}
	ca, previous, err := keepOrNewCA(c, existingCA, existingServer, now, random)
	if err != nil {
		return TLSResult{}, err
	}
	names := ServerDNSNames(c)
	server := keepServer(existingServer, ca, names, now)
	if server == nil {
		if server, err = pki.IssueServer(ca, names, now, ServerLifetime, random); err != nil {
			return TLSResult{}, err
		}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)}
	}
	caData := map[string][]byte{KeyCACert: ca.CertPEM, KeyCAKey: ca.KeyPEM}
	trusted := ca.CertPEM
	res := TLSResult{RenewAt: earliest(ca.Cert.NotAfter.Add(-RenewBefore), server.Cert.NotAfter.Add(-RenewBefore))}
	if previous != nil {
		caData[KeyPreviousCACert] = previous.Raw
		trusted = append(append([]byte{}, ca.CertPEM...), previous.Raw...)
		res.RenewAt = earliest(res.RenewAt, transitionEnd(ca.Cert, previous.Cert))
	}
	res.CA = &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(CASecretName(c)),
		Type: corev1.SecretTypeOpaque, Data: caData}
	res.Server = &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(TLSSecretName(c)),
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: server.CertPEM,
			corev1.TLSPrivateKeyKey: server.KeyPEM, KeyCACert: trusted}}
	return res, nil
}

// pemCert is a certificate with the PEM it was read from.
type pemCert struct {
	Cert *x509.Certificate
	Raw  []byte
}

// transitionEnd is when the previous CA stops being trusted: CATransition after the
// current one was made, or its own expiry if that comes first.
func transitionEnd(current, previous *x509.Certificate) time.Time {
	return earliest(current.NotBefore.Add(CATransition), previous.NotAfter)
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

// keepOrNewCA returns the CA to sign with and the previous CA still trusted, if any.
func keepOrNewCA(c *mysqlv1beta1.MySQLCluster, caSecret, server *corev1.Secret, now time.Time, random io.Reader) (*pki.KeyPair, *pemCert, error) {
	if caSecret != nil {
		if kp, ok := pki.UsableCA(caSecret.Data[KeyCACert], caSecret.Data[KeyCAKey], now, RenewBefore); ok {
			prev := caCert(caSecret.Data[KeyPreviousCACert])
			if prev != nil && !now.Before(transitionEnd(kp.Cert, prev.Cert)) {
				prev = nil
			}
			return kp, prev, nil
		}
	}
	kp, err := pki.NewCA(c.Namespace+"/"+c.Name+" MySQL CA", now, CALifetime, random)
	if err != nil {
		return nil, nil, err
	}
	// The CA replaced: the CA Secret's, or when that is gone the one the instances were
	// last given.
	var prev *pemCert
	if caSecret != nil {
		prev = caCert(caSecret.Data[KeyCACert])
	}
	if prev == nil && server != nil {
		prev = caCert(server.Data[KeyCACert])
	}
	if prev != nil && !now.Before(prev.Cert.NotAfter) {
		prev = nil
	}
	return kp, prev, nil
}

// caCert reads the first certificate of a PEM bundle if it is a CA's; nil otherwise.
func caCert(p []byte) *pemCert {
	cert, err := pki.ParseCertificate(p)
	if err != nil || !cert.IsCA {
		return nil
	}
	return &pemCert{Cert: cert, Raw: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}
}

// keepServer returns the existing server pair if it is still good for these names and
// CA; nil (missing, unreadable, expiring, signed by another CA, a name missing) means a
// new one is issued.
func keepServer(s *corev1.Secret, ca *pki.KeyPair, names []string, now time.Time) *pki.KeyPair {
	if s == nil {
		return nil
	}
	kp, _ := pki.UsableServer(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], ca, names, now, RenewBefore)
	return kp
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
