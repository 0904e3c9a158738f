package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// HeadlessService gives each instance a stable DNS name,
// <pod>.<cluster>-instances.<namespace>.svc, for the StatefulSet and for replication.
// Unready pods are published too: a replica must reach a source that is still starting.
func HeadlessService(c *mysqlv1beta1.MySQLCluster) *corev1.Service {
	s := service(c, HeadlessServiceName(c), SelectorLabels(c), mysqlPort())
	s.Spec.ClusterIP = corev1.ClusterIPNone
	s.Spec.PublishNotReadyAddresses = true
	return s
}

// PrimaryService is read-write: it selects the one pod the topology manager labelled primary.
func PrimaryService(c *mysqlv1beta1.MySQLCluster) *corev1.Service {
	return service(c, PrimaryServiceName(c), merge(SelectorLabels(c), map[string]string{LabelRole: string(RolePrimary)}), mysqlPort())
}

// ReplicasService is read-only: it balances over the pods labelled replica.
func ReplicasService(c *mysqlv1beta1.MySQLCluster) *corev1.Service {
	return service(c, ReplicasServiceName(c), merge(SelectorLabels(c), map[string]string{LabelRole: string(RoleReplica)}), mysqlPort())
}

// MetricsService exposes the exporter of every instance; nil when the exporter is off.
func MetricsService(c *mysqlv1beta1.MySQLCluster) *corev1.Service {
	if !c.Spec.Monitoring.Exporter.Enabled {
		return nil
	}
	return service(c, MetricsServiceName(c), SelectorLabels(c), corev1.ServicePort{
		Name: "metrics", Protocol: corev1.ProtocolTCP, Port: ExporterPort, TargetPort: intstr.FromString("metrics")})
}

func mysqlPort() corev1.ServicePort {
	return corev1.ServicePort{Name: "mysql", Protocol: corev1.ProtocolTCP, Port: MySQLPort, TargetPort: intstr.FromString("mysql")}
}

func service(c *mysqlv1beta1.MySQLCluster, name string, selector map[string]string, port corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c, ComponentDatabase)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    []corev1.ServicePort{port},
		},
	}
}
