package chart_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dolphin-operator/dolphin/test/chart"
)

func render(t *testing.T, namespace string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart.Render("dolphin", namespace, vals)
	require.NoError(t, err)
	return objs
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := chart.Find(objs, "Deployment", "dolphin-controller-manager")
	require.NotNil(t, u, "the operator's Deployment")
	d := &appsv1.Deployment{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d))
	return d
}

func TestTheChartLintsCleanWithEveryOption(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"cert-manager, ServiceMonitor, images": {
			"certManager": map[string]any{"enabled": true},
			"metrics":     map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"networkPolicy": map[string]any{"metrics": map[string]any{"from": []any{
				map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}}}},
			"operandImages": map[string]any{"mysql": map[string]any{"8.4": "registry.example/mysql:8.4.8"},
				"exporter": "registry.example/exporter:v0.19.0"},
		},
	} {
		t.Run(name, func(t *testing.T) { require.NoError(t, chart.Lint(vals)) })
	}
}

// The chart installs what `make deploy` installs: the same objects by kind and name, the
// same CRDs, RBAC rules, Services and webhooks (only labels and the namespace differ), and a
// Deployment whose pod runs the same container the same way.
func TestTheChartWithDefaultsInstallsWhatConfigDefaultDoes(t *testing.T) {
	want, err := chart.Kustomize()
	require.NoError(t, err)
	got := render(t, "dolphin-system", nil)
	for _, w := range want {
		if w.GetKind() == "Namespace" {
			continue // Helm's: --create-namespace
		}
		g := chart.Find(got, w.GetKind(), w.GetName())
		require.NotNil(t, g, "the chart has no %s %s", w.GetKind(), w.GetName())
		require.Equal(t, w.GetNamespace(), g.GetNamespace(), "%s %s", w.GetKind(), w.GetName())
		switch w.GetKind() {
		case "Deployment":
			requireSamePod(t, w, g)
		default:
			requireSameBody(t, w, g)
		}
	}
	require.Len(t, got, len(want)-1, "the chart's objects, one for each of config/default's but the Namespace")
}

// requireSameBody compares everything but metadata (labels differ: Helm's own).
func requireSameBody(t *testing.T, want, got *unstructured.Unstructured) {
	t.Helper()
	w, g := want.DeepCopy().Object, got.DeepCopy().Object
	delete(w, "metadata")
	delete(g, "metadata")
	require.Equal(t, w, g, "%s %s", want.GetKind(), want.GetName())
	if want.GetKind() == "CustomResourceDefinition" {
		require.Equal(t, want.GetAnnotations(), got.GetAnnotations(), "%s's annotations", want.GetName())
	}
}

// requireSamePod compares the operator's pod: config/default's container arguments all
// appear, in order, and the rest of the chart's are the manager's defaults stated
// explicitly; image and pull policy are values; everything else is equal.
func requireSamePod(t *testing.T, want, got *unstructured.Unstructured) {
	t.Helper()
	var w, g appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(want.Object, &w))
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &g))
	require.Equal(t, w.Spec.Selector, g.Spec.Selector)
	require.Equal(t, w.Spec.Template.Labels, g.Spec.Template.Labels)
	require.Equal(t, w.Spec.Template.Annotations, g.Spec.Template.Annotations)
	wc, gc := w.Spec.Template.Spec.Containers[0], g.Spec.Template.Spec.Containers[0]
	var extra []string
	rest := wc.Args
	for _, a := range gc.Args {
		if len(rest) > 0 && a == rest[0] {
			rest = rest[1:]
		} else {
			extra = append(extra, a)
		}
	}
	require.Empty(t, rest, "config/default's arguments missing from the chart's (in order): %v", gc.Args)
	require.Equal(t, []string{"--max-concurrent-reconciles=16", "--kube-api-qps=200", "--kube-api-burst=400"}, extra,
		"the chart's own arguments are the manager's defaults")
	require.Equal(t, "quay.io/dolphin-operator/dolphin-operator:v0.2.0", gc.Image)
	wc.Args, gc.Args, wc.Image, gc.Image = nil, nil, "", ""
	gc.ImagePullPolicy = ""
	require.Equal(t, wc, gc)
	ws, gs := w.Spec.Template.Spec, g.Spec.Template.Spec
	ws.Containers, gs.Containers = nil, nil
	require.Equal(t, ws, gs)
}

// Installed elsewhere, everything namespaced lands in the release's namespace and every
// reference to the operator's Services and ServiceAccount follows it; the CRDs alone name
// dolphin-system (Helm does not template crds/; the operator re-points them at start).
func TestTheChartFollowsTheReleaseNamespace(t *testing.T) {
	objs := render(t, "databases-operator", nil)
	for _, o := range objs {
		text := strings.Join(strings.Fields(toText(t, o)), " ")
		if o.GetKind() == "CustomResourceDefinition" {
			require.Contains(t, text, "namespace: dolphin-system")
			continue
		}
		require.NotContains(t, text, "dolphin-system", "%s %s", o.GetKind(), o.GetName())
		if o.GetNamespace() != "" {
			require.Equal(t, "databases-operator", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}
	hook := chart.Find(objs, "ValidatingWebhookConfiguration", "dolphin-validating-webhook-configuration")
	webhooks, _, _ := unstructured.NestedSlice(hook.Object, "webhooks")
	require.NotEmpty(t, webhooks)
	for _, w := range webhooks {
		ns, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "service", "namespace")
		require.Equal(t, "databases-operator", ns)
	}
}

func TestChartValuesReachTheOperatorsPod(t *testing.T) {
	objs := render(t, "ops", map[string]any{
		"image":                   map[string]any{"repository": "registry.example/dolphin", "digest": "sha256:" + strings.Repeat("ab", 32)},
		"replicaCount":            2,
		"maxConcurrentReconciles": 64,
		"kubeAPI":                 map[string]any{"qps": 500, "burst": 1000},
		"extraArgs":               []any{"--primary-watch-interval=500ms"},
		"operandImages":           map[string]any{"mysql": map[string]any{"8.4": "registry.example/mysql:8.4.8", "9.7": ""}},
		"resources":               map[string]any{"limits": map[string]any{"memory": "1Gi"}},
		"nodeSelector":            map[string]any{"node-role.example/infra": "true"},
		"tolerations":             []any{map[string]any{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}},
		"watchNamespace":          "team-a,team-b",
	})
	d := deployment(t, objs)
	require.Equal(t, int32(2), *d.Spec.Replicas)
	c := d.Spec.Template.Spec.Containers[0]
	require.Equal(t, "registry.example/dolphin@sha256:"+strings.Repeat("ab", 32), c.Image)
	for _, a := range []string{"--max-concurrent-reconciles=64", "--kube-api-qps=500", "--kube-api-burst=1000", "--primary-watch-interval=500ms"} {
		require.Contains(t, c.Args, a)
	}
	require.Contains(t, c.Env, corev1.EnvVar{Name: "RELATED_IMAGE_MYSQL_8_4", Value: "registry.example/mysql:8.4.8"})
	require.Contains(t, c.Env, corev1.EnvVar{Name: "WATCH_NAMESPACE", Value: "team-a,team-b"})
	for _, e := range c.Env {
		require.NotEqual(t, "RELATED_IMAGE_MYSQL_9_7", e.Name, "an empty image is the operator's default, not an empty variable")
	}
	require.Equal(t, "1Gi", c.Resources.Limits.Memory().String())
	require.Equal(t, map[string]string{"node-role.example/infra": "true"}, d.Spec.Template.Spec.NodeSelector)
	require.Len(t, d.Spec.Template.Spec.Tolerations, 1)
}

func TestCertManagerIssuesTheWebhookCertificateInstead(t *testing.T) {
	objs := render(t, "ops", map[string]any{"certManager": map[string]any{"enabled": true}})
	d := deployment(t, objs)
	args := d.Spec.Template.Spec.Containers[0].Args
	require.Contains(t, args, "--inject-webhook-ca")
	require.NotContains(t, args, "--self-issue-webhook-cert")
	vol := d.Spec.Template.Spec.Volumes[0]
	require.NotNil(t, vol.Secret, "the certificate cert-manager keeps is mounted")
	require.Equal(t, "dolphin-webhook-server-cert", vol.Secret.SecretName)

	cert := chart.Find(objs, "Certificate", "dolphin-serving-cert")
	require.NotNil(t, cert)
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	require.Equal(t, vol.Secret.SecretName, secret)
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	require.Equal(t, []string{"dolphin-webhook-service.ops.svc", "dolphin-webhook-service.ops.svc.cluster.local"}, names)
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	ca := chart.Find(objs, "Issuer", issuer)
	require.NotNil(t, ca, "the serving certificate's issuer")
	caSecret, _, _ := unstructured.NestedString(ca.Object, "spec", "ca", "secretName")
	caCert := chart.Find(objs, "Certificate", "dolphin-webhook-ca")
	require.NotNil(t, caCert)
	isCA, _, _ := unstructured.NestedBool(caCert.Object, "spec", "isCA")
	require.True(t, isCA)
	caCertSecret, _, _ := unstructured.NestedString(caCert.Object, "spec", "secretName")
	require.Equal(t, caSecret, caCertSecret, "the CA Issuer signs with the CA certificate's Secret")

	// The operator keeps no Secret of its own, but still injects the CA.
	require.Nil(t, chart.Find(objs, "Role", "dolphin-webhook-cert"))
	require.Nil(t, chart.Find(objs, "RoleBinding", "dolphin-webhook-cert"))
	require.NotNil(t, chart.Find(objs, "ClusterRole", "dolphin-webhook-cert"))
	require.NotNil(t, chart.Find(objs, "ClusterRoleBinding", "dolphin-webhook-cert"))

	plain := render(t, "ops", nil)
	for _, kind := range []string{"Issuer", "Certificate"} {
		for _, o := range plain {
			require.NotEqual(t, kind, o.GetKind(), "no cert-manager objects unless asked")
		}
	}
}

func TestTheServiceMonitorSelectsTheMetricsServiceOnly(t *testing.T) {
	objs := render(t, "ops", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{
		"enabled": true, "labels": map[string]any{"release": "prometheus"}}}})
	sm := chart.Find(objs, "ServiceMonitor", "dolphin-controller-manager-metrics")
	require.NotNil(t, sm)
	require.Equal(t, "prometheus", sm.GetLabels()["release"])
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	matches := func(name string) bool {
		svc := chart.Find(objs, "Service", name)
		require.NotNil(t, svc, name)
		for k, v := range sel {
			if svc.GetLabels()[k] != v {
				return false
			}
		}
		return true
	}
	require.True(t, matches("dolphin-controller-manager-metrics-service"))
	require.False(t, matches("dolphin-webhook-service"))
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	require.Equal(t, true, ep["honorLabels"], "docs/metrics.md: the series carry the clusters' namespace and instance")
	require.Equal(t, "https", ep["port"])
	require.Nil(t, chart.Find(render(t, "ops", nil), "ServiceMonitor", "dolphin-controller-manager-metrics"))
}

// The operator's NetworkPolicy selects its pods and admits its three ports, each from
// anyone; networkPolicy.metrics.from narrows the metrics port alone; disabled, there is none.
func TestTheNetworkPolicyAdmitsTheOperatorsPorts(t *testing.T) {
	objs := render(t, "ops", nil)
	policy := func(objs []*unstructured.Unstructured) *networkingv1.NetworkPolicy {
		u := chart.Find(objs, "NetworkPolicy", "dolphin-controller-manager")
		require.NotNil(t, u, "the operator's NetworkPolicy")
		p := &networkingv1.NetworkPolicy{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p))
		return p
	}
	p := policy(objs)
	pods := deployment(t, objs).Spec.Template.Labels
	for k, v := range p.Spec.PodSelector.MatchLabels {
		require.Equal(t, v, pods[k], "the policy selects the operator's pods (%s)", k)
	}
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, p.Spec.PolicyTypes)
	ports := map[int]networkingv1.NetworkPolicyIngressRule{}
	for _, rule := range p.Spec.Ingress {
		require.Len(t, rule.Ports, 1)
		ports[rule.Ports[0].Port.IntValue()] = rule
	}
	require.Len(t, ports, 3)
	for _, port := range []int{9443, 8443, 8081} {
		require.Contains(t, ports, port)
		require.Empty(t, ports[port].From, "port %d from anyone", port)
	}

	monitoring := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{
		"kubernetes.io/metadata.name": "monitoring"}}}
	controlPlane := map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}
	p = policy(render(t, "ops", map[string]any{"networkPolicy": map[string]any{
		"metrics": map[string]any{"from": []any{monitoring}}, "webhook": map[string]any{"from": []any{controlPlane}}}}))
	for _, rule := range p.Spec.Ingress {
		switch rule.Ports[0].Port.IntValue() {
		case 8443:
			require.Len(t, rule.From, 1)
			require.Equal(t, "monitoring", rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
		case 9443:
			require.Len(t, rule.From, 1)
			require.Equal(t, "10.0.0.0/24", rule.From[0].IPBlock.CIDR)
		default:
			require.Empty(t, rule.From)
		}
	}
	require.Nil(t, chart.Find(render(t, "ops", map[string]any{"networkPolicy": map[string]any{"enabled": false}}),
		"NetworkPolicy", "dolphin-controller-manager"))
}

// Bad values are refused before anything is installed, naming the value.
func TestTheSchemaRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"replicaCount": 0}, "replicaCount"},
		{map[string]any{"image": map[string]any{"repository": "r", "pullPolicy": "Sometimes"}}, "pullPolicy"},
		{map[string]any{"image": map[string]any{"repository": "r", "digest": "latest"}}, "digest"},
		{map[string]any{"resource": map[string]any{}}, "resource"},
		{map[string]any{"extraArgs": []any{"primary-watch-interval=1s"}}, "extraArgs"},
		{map[string]any{"operandImages": map[string]any{"mysql": map[string]any{"latest": "x"}}}, "latest"},
		{map[string]any{"certManager": map[string]any{"enabled": "yes"}}, "enabled"},
		{map[string]any{"networkPolicy": map[string]any{"metrics": map[string]any{"from": []any{
			map[string]any{"namespace": "monitoring"}}}}}, "namespace"},
		{map[string]any{"networkPolicy": map[string]any{"webhook": map[string]any{"from": []any{
			map[string]any{"ipBlock": map[string]any{"except": []any{"10.0.0.1/32"}}}}}}}, "cidr"},
	} {
		_, err := chart.Render("dolphin", "ops", c.vals)
		require.Error(t, err, "%v", c.vals)
		require.Contains(t, err.Error(), c.want, "%v", c.vals)
	}
}

func toText(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	raw, err := o.MarshalJSON()
	require.NoError(t, err)
	return strings.NewReplacer(`"namespace":"`, "namespace: ", `"`, " ").Replace(string(raw))
}
