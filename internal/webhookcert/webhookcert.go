// Package webhookcert gives the webhook server a certificate when nothing else does: in a
// kustomize install (`make deploy`) without cert-manager, the operator issues its own CA and
// serving certificate, keeps them in a Secret so that every replica and every restart serves
// the same chain, writes them where the webhook server reads them, and puts the CA into the
// admission webhook configurations and the CRDs' conversion webhooks (pointing those at the
// operator's own Service, wherever it runs). With Options.External, cert-manager issues the
// certificate into the Secret the operator mounts, and only the CA is injected.
//
// Under OLM this is off: OLM issues the certificate, mounts it and injects its CA itself, and
// the CSV grants no right to change webhook configurations or CRDs.
package webhookcert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dolphin-operator/dolphin/internal/pki"
)

// Lifetimes of the webhook chain. The serving certificate is renewed a month before it
// expires; Rotator checks every CheckInterval, far more often than that window.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
	CheckInterval  = time.Hour
	keyCACert      = "ca.crt"
	keyCAKey       = "ca.key"
)

// Options name what the certificate is for and where the CA goes.
type Options struct {
	Namespace   string // the operator's namespace, where the Secret and the Service are
	ServiceName string // the webhook Service
	SecretName  string // the Secret keeping the CA and the serving pair
	CertDir     string // where the webhook server reads tls.crt and tls.key
	Mutating    string // MutatingWebhookConfiguration to inject the CA into
	Validating  string // ValidatingWebhookConfiguration to inject the CA into
	CRDs        []string
	// External: someone else (cert-manager) issues the certificate and keeps it in the
	// Secret mounted at CertDir; Ensure only injects the ca.crt it finds there.
	External bool
}

// Validate names the first missing option.
func (o Options) Validate() error {
	required := map[string]string{"namespace (POD_NAMESPACE)": o.Namespace, "service": o.ServiceName, "cert dir": o.CertDir}
	if !o.External {
		required["secret"] = o.SecretName // an external certificate's Secret is mounted, never read
	}
	for name, v := range required {
		if v == "" {
			return fmt.Errorf("the webhook certificate's upkeep needs a %s", name)
		}
	}
	return nil
}

// DNSNames are the names the API server uses to reach the Service.
func (o Options) DNSNames() []string {
	base := o.ServiceName + "." + o.Namespace + ".svc"
	return []string{base, base + ".cluster.local"}
}

// Ensure makes the Secret hold a usable chain (keeping a valid one), writes the serving pair
// to CertDir and injects the CA wherever it is missing. It is idempotent, and it only writes
// what differs.
func Ensure(ctx context.Context, c client.Client, o Options, now time.Time) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.External {
		ca, err := mountedCA(o.CertDir)
		if err != nil {
			return err
		}
		return inject(ctx, c, o, ca)
	}
	secret, err := ensureSecret(ctx, c, o, now)
	if err != nil {
		return err
	}
	if err := writeFiles(o.CertDir, secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return err
	}
	return inject(ctx, c, o, secret.Data[keyCACert])
}

// mountedCA reads the CA of an externally issued certificate: the ca.crt that cert-manager
// writes beside tls.crt and tls.key. Anything but a PEM certificate is refused, so that a
// wrong mount never empties the caBundles the API server trusts.
func mountedCA(dir string) ([]byte, error) {
	path := filepath.Join(dir, keyCACert)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading the webhook CA the certificate's issuer left in %s: %w", path, err)
	}
	if !bytes.Contains(raw, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s holds no PEM certificate: the issuer must put its CA there (cert-manager does for CA and self-signed issuers)", path)
	}
	return raw, nil
}

// Chain returns the pairs to keep in the Secret: the existing ones while valid, else new ones.
func Chain(existing *corev1.Secret, names []string, now time.Time) (ca, server *pki.KeyPair, changed bool, err error) {
	var data map[string][]byte
	if existing != nil {
		data = existing.Data
	}
	ca, ok := pki.UsableCA(data[keyCACert], data[keyCAKey], now, RenewBefore)
	if !ok {
		if ca, err = pki.NewCA("dolphin-operator webhook CA", now, CALifetime, nil); err != nil {
			return nil, nil, false, err
		}
		changed = true
	}
	server, ok = pki.UsableServer(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], ca, names, now, RenewBefore)
	if !ok {
		if server, err = pki.IssueServer(ca, names, now, ServerLifetime, nil); err != nil {
			return nil, nil, false, err
		}
		changed = true
	}
	return ca, server, changed, nil
}

func ensureSecret(ctx context.Context, c client.Client, o Options, now time.Time) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, secret)
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return nil, fmt.Errorf("while reading Secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	var existing *corev1.Secret
	if !missing {
		existing = secret
	}
	ca, server, changed, err := Chain(existing, o.DNSNames(), now)
	if err != nil || !changed {
		return secret, err
	}
	secret.Type = corev1.SecretTypeTLS
	secret.Data = map[string][]byte{corev1.TLSCertKey: server.CertPEM, corev1.TLSPrivateKeyKey: server.KeyPEM,
		keyCACert: ca.CertPEM, keyCAKey: ca.KeyPEM}
	if missing {
		secret.ObjectMeta = metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName,
			Labels: map[string]string{"app.kubernetes.io/name": "dolphin-operator", "app.kubernetes.io/component": "webhook"}}
		err = c.Create(ctx, secret)
	} else {
		// Update carries the resourceVersion read above: a replica that rotated first wins
		// and this one gets a conflict, retries, and then keeps the winner's chain.
		err = c.Update(ctx, secret)
	}
	if err != nil {
		return nil, fmt.Errorf("while storing the webhook certificate in Secret %s/%s: %w", o.Namespace, o.SecretName, err)
	}
	log.FromContext(ctx).Info("Issued the webhook serving certificate", "secret", o.SecretName,
		"notAfter", server.Cert.NotAfter, "dnsNames", server.Cert.DNSNames)
	return secret, nil
}

// writeFiles replaces tls.crt and tls.key by rename, so the server's file watcher never reads
// a half-written pair; unchanged files are left alone.
func writeFiles(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("while creating %s: %w", dir, err)
	}
	// The key goes first: a watcher that reloads on the certificate then finds its key.
	for _, f := range []struct {
		name string
		data []byte
	}{{corev1.TLSPrivateKeyKey, keyPEM}, {corev1.TLSCertKey, certPEM}} {
		path := filepath.Join(dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return fmt.Errorf("while writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("while replacing %s: %w", path, err)
		}
	}
	return nil
}

// inject puts caPEM into every webhook of the two configurations and into the conversion
// webhook of each CRD, and points each CRD's conversion webhook at the operator's own Service.
// The CRDs are the one part of an install that cannot say where the operator runs: Helm
// installs a chart's crds/ as they are, without templating, so they name the namespace they
// were generated with (dolphin-system) whatever namespace the release went to. A
// configuration or CRD that does not exist is an error: the install is incomplete and the
// API server could not call the webhook anyway.
func inject(ctx context.Context, c client.Client, o Options, caPEM []byte) error {
	var errs []error
	if o.Mutating != "" {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		errs = append(errs, patch(ctx, c, client.ObjectKey{Name: o.Mutating}, m, func() bool {
			changed := false
			for i := range m.Webhooks {
				changed = setCA(&m.Webhooks[i].ClientConfig.CABundle, caPEM) || changed
			}
			return changed
		}))
	}
	if o.Validating != "" {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		errs = append(errs, patch(ctx, c, client.ObjectKey{Name: o.Validating}, v, func() bool {
			changed := false
			for i := range v.Webhooks {
				changed = setCA(&v.Webhooks[i].ClientConfig.CABundle, caPEM) || changed
			}
			return changed
		}))
	}
	for _, name := range o.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		errs = append(errs, patch(ctx, c, client.ObjectKey{Name: name}, crd, func() bool {
			conv := crd.Spec.Conversion
			if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				return false
			}
			moved := setService(conv.Webhook.ClientConfig.Service, o)
			return setCA(&conv.Webhook.ClientConfig.CABundle, caPEM) || moved
		}))
	}
	return errors.Join(errs...)
}

func patch(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object, mutate func() bool) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("while reading %T %s to inject the webhook CA: %w", obj, key.Name, err)
	}
	base := obj.DeepCopyObject().(client.Object)
	if !mutate() {
		return nil
	}
	// A merge patch with the resourceVersion: lists of webhooks are replaced whole, so a
	// concurrent change must fail rather than be overwritten.
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("while injecting the webhook CA into %s: %w", key.Name, err)
	}
	return nil
}

// setService points a conversion webhook's Service reference at o's Service; the path and
// port stay as generated.
func setService(svc *apiextensionsv1.ServiceReference, o Options) bool {
	if svc == nil || (svc.Namespace == o.Namespace && svc.Name == o.ServiceName) {
		return false
	}
	svc.Namespace, svc.Name = o.Namespace, o.ServiceName
	return true
}

func setCA(field *[]byte, caPEM []byte) bool {
	if bytes.Equal(*field, caPEM) {
		return false
	}
	*field = caPEM
	return true
}

// Rotator re-runs Ensure every CheckInterval, so the certificate is renewed while the
// operator runs and a CA removed by someone else is put back. It runs on every replica
// (each serves webhooks from its own files).
type Rotator struct {
	Client  client.Client
	Options Options
	Now     func() time.Time
}

// Start implements manager.Runnable.
func (r *Rotator) Start(ctx context.Context) error {
	ticker := time.NewTicker(CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := Ensure(ctx, r.Client, r.Options, r.Now()); err != nil {
				log.FromContext(ctx).Error(err, "Could not renew the webhook certificate; retrying in an hour")
			}
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica needs files.
func (r *Rotator) NeedLeaderElection() bool { return false }
