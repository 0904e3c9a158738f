package resources

import (
	"crypto/rand"
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
		if server, err = pki.IssueServer(ca, names, now, ServerLifetime, random); err != nil {
			return TLSResult{}, err
		}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)}
	}
	res := TLSResult{
		CA: &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(CASecretName(c)),
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{KeyCACert: ca.CertPEM, KeyCAKey: ca.KeyPEM}},
		Server: &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(TLSSecretName(c)),
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: server.CertPEM,
				corev1.TLSPrivateKeyKey: server.KeyPEM, KeyCACert: ca.CertPEM}},
	}
	res.RenewAt = earliest(ca.Cert.NotAfter.Add(-RenewBefore), server.Cert.NotAfter.Add(-RenewBefore))
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

func keepOrNewCA(c *mysqlv1beta1.MySQLCluster, s *corev1.Secret, now time.Time, random io.Reader) (*pki.KeyPair, error) {
	if s != nil {
		if kp, ok := pki.UsableCA(s.Data[KeyCACert], s.Data[KeyCAKey], now, RenewBefore); ok {
			return kp, nil
		}
	}
	return pki.NewCA(c.Namespace+"/"+c.Name+" MySQL CA", now, CALifetime, random)
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
