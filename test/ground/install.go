package ground

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1alpha1 "github.com/dolphin-operator/dolphin/api/v1alpha1"
)

// What an install of the operator (make deploy, the Helm chart) puts on a cluster.
const (
	// WebhookCertSecret holds the operator's self-issued webhook certificate and its CA.
	WebhookCertSecret = "dolphin-webhook-server-cert"
	// MutatingWebhooks and ValidatingWebhooks are the webhook configurations' names.
	MutatingWebhooks   = "dolphin-mutating-webhook-configuration"
	ValidatingWebhooks = "dolphin-validating-webhook-configuration"
)

// CRDNames are Dolphin's CustomResourceDefinitions.
var CRDNames = []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"}

// CAInjected returns why ca is not the CA bundle of every webhook of both configurations
// and of both CRDs' conversion webhooks.
func CAInjected(ctx context.Context, k8s client.Client, ca []byte) error {
	if !bytes.HasPrefix(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return errors.New("the Secret holds no CA")
	}
	var errs []error
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: MutatingWebhooks}, m); err != nil {
		return err
	}
	for _, w := range m.Webhooks {
		if !bytes.Equal(ca, w.ClientConfig.CABundle) {
			errs = append(errs, fmt.Errorf("webhook %s has another CA bundle", w.Name))
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: ValidatingWebhooks}, v); err != nil {
		return err
	}
	for _, w := range v.Webhooks {
		if !bytes.Equal(ca, w.ClientConfig.CABundle) {
			errs = append(errs, fmt.Errorf("webhook %s has another CA bundle", w.Name))
		}
	}
	for _, name := range CRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil || crd.Spec.Conversion.Webhook.ClientConfig == nil ||
			!bytes.Equal(ca, crd.Spec.Conversion.Webhook.ClientConfig.CABundle) {
			errs = append(errs, fmt.Errorf("CRD %s's conversion webhook has another CA bundle", name))
		}
	}
	return errors.Join(errs...)
}

// Forbidden returns the lines of an operator's log that tell of a call its RBAC refused
// (`... is forbidden: User "..." cannot ...`): not the API server's refusal to create an
// Event in a namespace being deleted, which it words as forbidden too.
func Forbidden(logs string) []string {
	var refused []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `is forbidden: User \"`) || strings.Contains(line, `is forbidden: User "`) {
			refused = append(refused, line)
		}
	}
	return refused
}

// V1alpha1Sample is config/samples' v1alpha1 MySQLCluster.
func V1alpha1Sample() (*mysqlv1alpha1.MySQLCluster, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "samples", "mysql_v1alpha1_mysqlcluster.yaml"))
	if err != nil {
		return nil, err
	}
	c := &mysqlv1alpha1.MySQLCluster{}
	if err := yaml.Unmarshal(raw, c); err != nil {
		return nil, fmt.Errorf("the v1alpha1 sample: %w", err)
	}
	return c, nil
}
