package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dolphin-operator/dolphin/test/ground"
)

// A StatefulSet's pods get DNS names through the headless Service and CoreDNS, which this
// process resolves too (the namespace's resolv.conf); their volumes are provisioned on
// demand and writable by any user.
func TestPodsHaveDNSNamesAndProvisionedVolumes(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{"app.kubernetes.io/instance": "db"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "db", "db", 2, true), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 2*time.Minute, "2 ready replicas", func() (bool, string) {
		s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return s.Status.ReadyReplicas == 2, fmt.Sprintf("readyReplicas=%d", s.Status.ReadyReplicas)
	})
	for i := range 2 {
		name := fmt.Sprintf("db-%d", i)
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		host := fmt.Sprintf("%s.db.%s.svc", name, ns)
		eventually(t, 30*time.Second, host+" to resolve to the pod's IP", func() (bool, string) {
			addrs, err := net.DefaultResolver.LookupHost(ctx, host)
			return err == nil && len(addrs) == 1 && addrs[0] == pod.Status.PodIP, fmt.Sprint(addrs, err)
		})
		dir, err := cluster.VolumePath(ctx, ns, "data-"+name)
		require.NoError(t, err)
		st, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o777), st.Mode().Perm(), "a provisioned volume is writable by the pod's user")
	}
	// Pods started on the nodes: every bridge keeps its own address (the gateway's, which the
	// running pods' neighbour entries hold).
	for _, n := range cluster.Nodes {
		now, given, err := n.BridgeAddresses()
		require.NoError(t, err)
		require.Equal(t, given, now, "node %s's bridge address", n.Name)
	}
}

// Stopping a node kills its kubelet, containerd and containers and drops its traffic;
// restarting it brings its pods back with new sandboxes.
func TestAStoppedNodeTakesItsContainersDownAndComesBack(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	node := cluster.Nodes[len(cluster.Nodes)-1]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "main", Image: pauseImage,
			ImagePullPolicy: corev1.PullNever}}},
	}
	_, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var pid int
	eventually(t, time.Minute, "the pod running", func() (bool, string) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "pinned", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pid, err = cluster.ContainerPID(p, "main")
		return err == nil, fmt.Sprint(err)
	})
	require.NoError(t, node.Stop())
	require.False(t, alive(pid), "the node's container died with it")
	require.False(t, node.Running())
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(node.IP, "10250"), 300*time.Millisecond)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "the node's kubelet answers no more")

	require.NoError(t, cluster.RestartNode(ctx, node))
	eventually(t, 2*time.Minute, "the pod running again on the restarted node", func() (bool, string) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "pinned", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		newPID, err := cluster.ContainerPID(p, "main")
		return err == nil && newPID != pid, fmt.Sprint(newPID, err)
	})
	require.False(t, alive(pid))
}

// alive reports whether a process exists and has not exited (a killed process whose
// parent died too may stay a zombie for a while).
func alive(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
