package resources

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// PodDisruptionBudget lets voluntary disruptions (drains) take one instance at a time.
// A single instance gets none: a budget of zero would block every drain forever.
func PodDisruptionBudget(c *mysqlv1beta1.MySQLCluster) *policyv1.PodDisruptionBudget {
	if *c.Spec.Instances < 2 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: PodDisruptionBudgetName(c), Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: new(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
		},
	}
}
