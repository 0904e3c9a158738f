package suite

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dolphin-operator/dolphin/test/ground"
)

func operatorDeployment(image string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ground.OperatorNamespace, Name: ground.OperatorDeployment},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "manager", Image: image}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
}

func namespaceNamed(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// The check a shared ground runs after each test names what the test left: a namespace
// of its own, a namespace it removed, the operator's pod template changed or not rolled out.
func TestTheAfterTestCheckNamesWhatATestLeftChanged(t *testing.T) {
	ctx := context.Background()
	k8s := fake.NewClientBuilder().WithScheme(ground.Scheme()).
		WithObjects(namespaceNamed("default"), namespaceNamed(ground.OperatorNamespace), operatorDeployment("op:1")).
		WithStatusSubresource(&appsv1.Deployment{}).Build()
	c := &checker{k8s: k8s}
	was, err := c.look(ctx)
	require.NoError(t, err)
	require.NoError(t, c.namespacesAsBefore(ctx, was))
	require.NoError(t, c.operatorRolledOut(ctx, was))

	require.NoError(t, k8s.Create(ctx, namespaceNamed("e2e-abcde")))
	require.ErrorContains(t, c.namespacesAsBefore(ctx, was), "namespaces left behind [e2e-abcde ()]")
	require.NoError(t, k8s.Delete(ctx, namespaceNamed("e2e-abcde")))
	require.NoError(t, k8s.Delete(ctx, namespaceNamed("default")))
	require.ErrorContains(t, c.namespacesAsBefore(ctx, was), "namespaces removed [default]")

	d := &appsv1.Deployment{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(operatorDeployment("")), d))
	d.Spec.Template.Spec.Containers[0].Image = "op:0"
	require.NoError(t, k8s.Update(ctx, d))
	require.ErrorContains(t, c.operatorRolledOut(ctx, was), "the operator's pod template changed")

	d.Spec.Template.Spec.Containers[0].Image = "op:1"
	require.NoError(t, k8s.Update(ctx, d))
	d.Status.UpdatedReplicas = 0
	require.NoError(t, k8s.Status().Update(ctx, d))
	require.ErrorContains(t, c.operatorRolledOut(ctx, was), "0 of 1 updated")
}
