package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// OperatorPodLabels are the labels of the operator's pods, in every install (kustomize,
// Helm, OLM): what the instances' NetworkPolicy admits the operator by.
var OperatorPodLabels = map[string]string{"control-plane": "controller-manager"}

// NetworkPolicyName names a cluster's NetworkPolicy.
func NetworkPolicyName(c *mysqlv1beta1.MySQLCluster) string { return c.Name + "-instances" }

// NetworkPolicy is the instances' ingress policy (spec.networkPolicy): MySQL's port admits
// the operator's pods (in operatorNamespace), the cluster's own pods (its instances, which
// replicate and clone from each other, and its backup, restore and verification Jobs, all
// labelled with the cluster's instance label) and spec.networkPolicy.clients (default: the
// cluster's namespace); the exporter's port admits spec.networkPolicy.metrics (default:
// anyone). Nil when disabled, or when the operator's namespace is unknown (it runs outside
// the cluster: a policy would lock it out).
func NetworkPolicy(c *mysqlv1beta1.MySQLCluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	np := c.Spec.NetworkPolicy
	if (np.Enabled != nil && !*np.Enabled) || operatorNamespace == "" {
		return nil
	}
	own := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		LabelInstance: c.Name, LabelManagedBy: ManagedBy}}}
	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: operatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels}}
	clients := np.Clients
	if clients == nil {
		clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}} // this namespace's pods
	}
	tcp := corev1.ProtocolTCP
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: new(intstr.FromInt32(p))}}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: port(MySQLPort), From: append([]networkingv1.NetworkPolicyPeer{own, operator}, clients...)},
				{Ports: port(ExporterPort), From: np.Metrics},
			},
		},
	}
}
