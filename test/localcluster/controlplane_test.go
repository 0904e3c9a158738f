package localcluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stretchr/testify/require"
)

func TestAPIServerReportsTheBuiltVersion(t *testing.T) {
	v, err := kube.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Regexp(t, `^v1\.\d+\.\d+$`, v.GitVersion, "the build stamps /version")
}

func TestStatefulSetOfThreeBecomesReady(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "web", "web", 3, false), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "3 ready replicas", func() (bool, string) {
		s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return s.Status.ReadyReplicas == 3, fmt.Sprintf("readyReplicas=%d", s.Status.ReadyReplicas)
	})
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	ips := map[string]bool{}
	for _, p := range pods.Items {
		require.Equal(t, cluster.NodeName(), p.Spec.NodeName, "scheduled by kube-scheduler")
		ip := net.ParseIP(p.Status.PodIP)
		require.NotNil(t, ip, "pod %s has an IP", p.Name)
		_, cidr, _ := net.ParseCIDR("10.244.0.0/16")
		require.True(t, cidr.Contains(ip), "pod IP %s is in the pod CIDR", ip)
		ips[p.Status.PodIP] = true
	}
	require.Len(t, ips, 3, "every pod has its own IP")
}

func TestGarbageCollectorDeletesTheChildrenOfADeletedOwner(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	owner, err := kube.CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sts := statefulSet(ns, "owned", "owned", 2, false)
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name,
		UID: owner.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}
	_, err = kube.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "2 pods", func() (bool, string) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 2, fmt.Sprintf("%d pods", len(pods.Items))
	})
	fg := metav1.DeletePropagationForeground
	require.NoError(t, kube.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &fg}))
	eventually(t, time.Minute, "the owner, its StatefulSet and their pods to be gone", func() (bool, string) {
		_, errOwner := kube.CoreV1().ConfigMaps(ns).Get(ctx, owner.Name, metav1.GetOptions{})
		_, errSts := kube.AppsV1().StatefulSets(ns).Get(ctx, "owned", metav1.GetOptions{})
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return gone(errOwner) && gone(errSts) && len(pods.Items) == 0,
			fmt.Sprintf("owner: %v, statefulset: %v, pods: %d", errOwner, errSts, len(pods.Items))
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "doomed", "doomed", 1, true), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "a running pod", func() (bool, string) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "doomed-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	require.NoError(t, kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	eventually(t, time.Minute, "the namespace to be gone", func() (bool, string) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if gone(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions)
	})
}

func TestAPIServerCallsAValidatingWebhookServedByALocalProcess(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ip := webhookPod(t, ns)
	var calls atomic.Int32
	serveWebhook(t, ns, ip, &calls)

	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-labelled-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.localcluster.dolphin-operator.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook", Path: new("/validate")},
				CABundle: cluster.CA().CertPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})

	cm := func(name string, deny bool) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if deny {
			c.Labels = map[string]string{"deny": "true"}
		}
		return c
	}
	// The API server picks up a new webhook configuration within a second or so.
	var denyErr error
	eventually(t, 30*time.Second, "the webhook to deny a labelled ConfigMap", func() (bool, string) {
		_, denyErr = kube.CoreV1().ConfigMaps(ns).Create(ctx, cm(fmt.Sprintf("denied-%d", time.Now().UnixNano()), true), metav1.CreateOptions{})
		return denyErr != nil && strings.Contains(denyErr.Error(), "denied by the local webhook"), fmt.Sprint(denyErr)
	})
	require.Contains(t, denyErr.Error(), `admission webhook "deny.localcluster.dolphin-operator.io" denied the request`)
	before := calls.Load()
	_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, cm("allowed", false), metav1.CreateOptions{})
	require.NoError(t, err, "an unlabelled ConfigMap is allowed")
	require.Greater(t, calls.Load(), before, "the webhook was called for the allowed object too")
}

// webhookPod runs a pod labelled app=webhook behind a Service "webhook" (443 -> 9443) and
// returns the pod's IP once the Service has it as a ready endpoint.
func webhookPod(t *testing.T, ns string) string {
	ctx := context.Background()
	labels := map[string]string{"app": "webhook"}
	_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "webhook", Image: "webhook"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Port: 443, TargetPort: intstr.FromInt32(9443)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var ip string
	eventually(t, time.Minute, "a ready endpoint for the webhook Service", func() (bool, string) {
		slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=webhook"})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
					ip = e.Addresses[0]
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d slices", len(slices.Items))
	})
	return ip
}

// serveWebhook serves /validate on ip:9443 with a certificate for the Service's DNS name,
// denying objects labelled deny=true.
func serveWebhook(t *testing.T, ns, ip string, calls *atomic.Int32) {
	kp, err := cluster.CA().IssueServing("webhook", []string{"webhook." + ns + ".svc"}, nil)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(review.Request.Object.Raw, &obj)
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: obj.Labels["deny"] != "true"}
		if !resp.Allowed {
			resp.Result = &metav1.Status{Message: "denied by the local webhook", Code: http.StatusForbidden}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	})
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "9443"), &tls.Config{Certificates: []tls.Certificate{cert}})
	require.NoError(t, err, "a local process can bind the pod's IP")
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}
