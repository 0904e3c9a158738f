package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stretchr/testify/require"

	"github.com/dolphin-operator/dolphin/test/ground"
)

func TestAPIServerReportsTheBuiltVersion(t *testing.T) {
	ground.Level(t, ground.Full)
	v, err := kube.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Regexp(t, `^v1\.\d+\.\d+$`, v.GitVersion, "the build stamps /version")
}

func TestStatefulSetOfThreeBecomesReady(t *testing.T) {
	ground.Level(t, ground.Full)
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
		node := cluster.Node(p.Spec.NodeName)
		require.NotNil(t, node, "%s scheduled by kube-scheduler to a node of the cluster", p.Name)
		ip := net.ParseIP(p.Status.PodIP)
		require.NotNil(t, ip, "pod %s has an IP", p.Name)
		_, cidr, _ := net.ParseCIDR(node.PodCIDR)
		require.True(t, cidr.Contains(ip), "pod IP %s is in its node's pod subnet %s", ip, node.PodCIDR)
		ips[p.Status.PodIP] = true
		require.NotNil(t, p.Status.ContainerStatuses[0].State.Running, "%s runs a real container", p.Name)
		pid, err := cluster.ContainerPID(&p, "main")
		require.NoError(t, err)
		require.True(t, alive(pid), "the container's process %d runs", pid)
	}
	require.Len(t, ips, 3, "every pod has its own IP")
}

func TestGarbageCollectorDeletesTheChildrenOfADeletedOwner(t *testing.T) {
	ground.Level(t, ground.Full)
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
	ground.Level(t, ground.Full)
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
