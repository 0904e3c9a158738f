package resources

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func TestNetworkPolicy(t *testing.T) {
	if NetworkPolicy(cluster(), "") != nil {
		t.Error("an operator outside the cluster (no namespace) would be locked out: no policy")
	}
	if NetworkPolicy(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.NetworkPolicy.Enabled = new(false) }), "ops") != nil {
		t.Error("disabled: no policy")
	}
	monitoring := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}
	app := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	np := NetworkPolicy(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.NetworkPolicy.Clients = []networkingv1.NetworkPolicyPeer{app}
		c.Spec.NetworkPolicy.Metrics = []networkingv1.NetworkPolicyPeer{monitoring}
	}), "ops")
	if np == nil || len(np.Spec.Ingress) != 2 {
		t.Fatalf("policy %+v", np)
	}
	mysql, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
	if len(mysql.From) != 3 || mysql.From[2].PodSelector.MatchLabels["app"] != "shop" {
		t.Errorf("MySQL's port: the cluster's pods, the operator's and the listed clients only (not the namespace): %+v", mysql.From)
	}
	if mysql.From[0].PodSelector.MatchLabels[LabelInstance] != "db" || mysql.From[0].NamespaceSelector != nil {
		t.Errorf("the cluster's own pods, in its namespace: %+v", mysql.From[0])
	}
	if mysql.From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "ops" {
		t.Errorf("the operator's pods, in its namespace: %+v", mysql.From[1])
	}
	if len(metrics.From) != 1 || metrics.Ports[0].Port.IntVal != ExporterPort {
		t.Errorf("the exporter's port: the listed peers only: %+v", metrics)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("ingress only (egress is left open): %v", np.Spec.PolicyTypes)
	}
}
