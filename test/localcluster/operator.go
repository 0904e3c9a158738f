package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OperatorOptions say how to run an operator binary as if it were deployed: in a pod's
// place, behind a webhook Service, with a serving certificate from the cluster CA.
type OperatorOptions struct {
	// Binary is the manager to run.
	Binary string
	// Namespace of the operator's pod and Service; default dolphin-system.
	Namespace string
	// WebhookManifests is the controller-gen output (Mutating and Validating
	// WebhookConfigurations); empty means no admission webhooks.
	WebhookManifests string
	// ConversionCRDs are the CRDs (by name, already installed) whose conversion goes to the
	// operator's /convert endpoint.
	ConversionCRDs []string
	// Args and Env are added to the manager's.
	Args, Env []string
	// Ready, when set, is polled after the webhooks are registered until it returns nil:
	// a check that the API server really calls them (webhook configurations take a moment
	// to be picked up).
	Ready func(context.Context) error
}

// Operator is a running operator process standing in for its pod.
type Operator struct {
	*Process
	// PodIP is the address it serves webhooks (9443), probes (8081) and metrics (8080) on.
	PodIP string
}

const (
	operatorPodName     = "dolphin-operator"
	webhookServiceName  = "dolphin-webhook-service"
	defaultOperatorNS   = "dolphin-system"
	webhookPort         = 9443
	operatorProbeSuffix = ":8081"
)

// StartOperator runs the operator in a pod's place: it creates a pod for it on the fake
// node and a Service in front of that pod, issues the Service a certificate, starts the
// binary serving on the pod's IP, registers the webhooks (admission and conversion) with
// the Service and the cluster CA, and waits until they work.
func (c *Cluster) StartOperator(ctx context.Context, o OperatorOptions) (*Operator, error) {
	if o.Namespace == "" {
		o.Namespace = defaultOperatorNS
	}
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	ip, err := c.operatorPod(ctx, cs, o.Namespace)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(c.cfg.Dir, "operator-certs")
	if err := c.writeWebhookCert(certDir, o.Namespace); err != nil {
		return nil, err
	}
	args := append([]string{"--webhook-cert-dir=" + certDir, "--leader-elect=false",
		"--metrics-secure=false", "--metrics-bind-address=" + net.JoinHostPort(ip, "8080"),
		"--health-probe-bind-address=" + ip + operatorProbeSuffix}, o.Args...)
	proc, err := c.Run("operator", o.Binary, o.Env, args...)
	if err != nil {
		return nil, err
	}
	op := &Operator{Process: proc, PodIP: ip}
	if err := c.waitFor(ctx, "the operator's readiness probe", time.Minute, func(ctx context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		return probe(ctx, "http://"+ip+operatorProbeSuffix+"/readyz"), nil
	}); err != nil {
		return op, err
	}
	if err := c.registerWebhooks(ctx, cs, o); err != nil {
		return op, err
	}
	if o.Ready != nil {
		var last error
		err := c.waitFor(ctx, "the API server to call the operator's webhooks", time.Minute, func(ctx context.Context) (bool, error) {
			if err := proc.Exited(); err != nil {
				return false, err
			}
			last = o.Ready(ctx)
			return last == nil, nil
		})
		if err != nil {
			return op, errors.Join(err, last)
		}
	}
	return op, nil
}

// operatorPod creates the pod the operator stands in for, and its webhook Service, and
// returns the pod's IP once the Service has it as a ready endpoint.
func (c *Cluster) operatorPod(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	labels := map[string]string{"control-plane": "controller-manager", "app.kubernetes.io/name": "dolphin-operator"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("while creating namespace %s: %w", ns, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: operatorPodName, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "dolphin-operator:local",
			Ports: []corev1.ContainerPort{{Name: "webhook", ContainerPort: webhookPort}}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("while creating the operator's pod: %w", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: webhookServiceName, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Port: 443, TargetPort: intstr.FromInt32(webhookPort)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("while creating the webhook Service: %w", err)
	}
	var ip string
	err := c.waitFor(ctx, "the operator's pod behind its Service", time.Minute, func(ctx context.Context) (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx,
			metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + webhookServiceName})
		if err != nil {
			return false, nil //nolint:nilerr // transient: keep polling until the timeout
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
					ip = e.Addresses[0]
					return true, nil
				}
			}
		}
		return false, nil
	})
	return ip, err
}

// writeWebhookCert writes tls.crt and tls.key for the webhook Service's DNS names.
func (c *Cluster) writeWebhookCert(dir, ns string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("while creating %s: %w", dir, err)
	}
	host := webhookServiceName + "." + ns + ".svc"
	kp, err := c.pki.ca.IssueServing(host, []string{host, host + ".cluster.local"}, nil)
	if err != nil {
		return err
	}
	_, _, err = kp.WriteFiles(dir, "tls")
	return err
}

// registerWebhooks creates the admission webhook configurations and points the CRDs'
// conversion at the operator's Service.
func (c *Cluster) registerWebhooks(ctx context.Context, cs kubernetes.Interface, o OperatorOptions) error {
	// toOperator keeps a webhook's path and sends it to the operator's Service, trusting
	// the cluster CA that signed the Service's certificate.
	toOperator := func(cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: c.pki.ca.CertPEM,
			Service: &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: webhookServiceName,
				Path: cc.Service.Path}}
	}
	if o.WebhookManifests != "" {
		mutating, validating, err := readWebhookManifests(o.WebhookManifests)
		if err != nil {
			return err
		}
		for _, m := range mutating {
			for k := range m.Webhooks {
				m.Webhooks[k].ClientConfig = toOperator(m.Webhooks[k].ClientConfig)
			}
			m.Name = "dolphin-" + m.Name
			if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("while creating %s: %w", m.Name, err)
			}
		}
		for _, v := range validating {
			for k := range v.Webhooks {
				v.Webhooks[k].ClientConfig = toOperator(v.Webhooks[k].ClientConfig)
			}
			v.Name = "dolphin-" + v.Name
			if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("while creating %s: %w", v.Name, err)
			}
		}
	}
	return c.convertThroughOperator(ctx, o.ConversionCRDs, o.Namespace)
}

func (c *Cluster) convertThroughOperator(ctx context.Context, crds []string, ns string) error {
	if len(crds) == 0 {
		return nil
	}
	ax, err := apiextensionsclient.NewForConfig(c.restConfig)
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	path := "/convert"
	for _, name := range crds {
		crd, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("while reading CRD %s: %w", name, err)
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					Service:  &apiextensionsv1.ServiceReference{Namespace: ns, Name: webhookServiceName, Path: &path},
					CABundle: c.pki.ca.CertPEM},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("while pointing %s's conversion at the operator: %w", name, err)
		}
	}
	return nil
}

// readWebhookManifests decodes the webhook configurations controller-gen writes.
func readWebhookManifests(path string) ([]*admissionregistrationv1.MutatingWebhookConfiguration,
	[]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("while reading %s: %w", path, err)
	}
	var mut []*admissionregistrationv1.MutatingWebhookConfiguration
	var val []*admissionregistrationv1.ValidatingWebhookConfiguration
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var meta metav1.TypeMeta
		var doc yamlDoc
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return mut, val, nil
			}
			return nil, nil, fmt.Errorf("while decoding %s: %w", path, err)
		}
		if err := unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := unmarshal(doc, m); err != nil {
				return nil, nil, err
			}
			mut = append(mut, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := unmarshal(doc, v); err != nil {
				return nil, nil, err
			}
			val = append(val, v)
		case "":
		default:
			return nil, nil, fmt.Errorf("%s: unexpected kind %s", path, meta.Kind)
		}
	}
}

// probe reports whether url answers 200.
func probe(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// yamlDoc is one decoded YAML document.
type yamlDoc = map[string]any

func unmarshal(doc yamlDoc, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(doc, into)
}

// ProbeDolphinWebhooks returns a readiness check for StartOperator: the API server must
// send a MySQLCluster to Dolphin's validating webhook, which refuses a setting the
// operator owns (no CRD rule can). The object is a dry run; nothing is stored.
func ProbeDolphinWebhooks(cfg *rest.Config) func(context.Context) error {
	return func(ctx context.Context) error {
		cl, err := client.New(cfg, client.Options{})
		if err != nil {
			return fmt.Errorf("while creating a client: %w", err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "mysql.dolphin-operator.io/v1beta1", "kind": "MySQLCluster",
			"metadata": map[string]any{"name": "webhook-probe", "namespace": "default"},
			"spec": map[string]any{"instances": int64(1),
				"mysql": map[string]any{"config": map[string]any{"server_id": "1"}}},
		}}
		err = cl.Create(ctx, u, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "set by the operator") {
			return fmt.Errorf("the validating webhook did not refuse the probe object (got: %w)", err)
		}
		return nil
	}
}
