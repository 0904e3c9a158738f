package localcluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A process run as a pod's container sees the pod's environment (values and field
// references) and its Secret, ConfigMap and emptyDir volumes at the paths its arguments use,
// and a mount under /tmp where os.TempDir() finds it.
func TestRunAsPodPlaysEnvironmentAndVolumes(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "certs"},
		Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"},
		Data: map[string]string{"app.conf": "CONF"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "runner", Annotations: map[string]string{"who": "ANNOTATED"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "x",
				Args: []string{"-c", `echo "$NS $WHO $(cat /certs/tls.crt) $(cat /etc/app/renamed.conf) $(cat $TMPDIR/k8s-webhook-server/serving-certs/tls.key)" > /scratch/out; cat /scratch/out`},
				Env: []corev1.EnvVar{
					{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "WHO", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['who']"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}, {Name: "conf", MountPath: "/etc/app"},
					{Name: "scratch", MountPath: "/scratch"}, {Name: "certs", MountPath: "/tmp/k8s-webhook-server/serving-certs"}}}},
			Volumes: []corev1.Volume{
				{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs"}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "conf"},
					Items:                []corev1.KeyToPath{{Key: "app.conf", Path: "renamed.conf"}}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	pod = createWithIP(t, ns, pod)
	p, err := cluster.RunAsPod(ctx, pod, "main", "/bin/sh")
	require.NoError(t, err)
	want := ns + " ANNOTATED CERT CONF KEY"
	eventually(t, 10*time.Second, "the process to print what it saw", func() (bool, string) {
		out, _ := os.ReadFile(p.LogPath())
		return strings.Contains(string(out), want), string(out)
	})

	pod.Spec.Volumes = append(pod.Spec.Volumes[:0], corev1.Volume{Name: "certs",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	_, err = cluster.RunAsPod(ctx, pod, "main", "/bin/sh")
	require.ErrorContains(t, err, "only emptyDir, Secret, ConfigMap and projected", "an unsupported volume is refused by name")
}

// A Secret updated while the process runs reaches its files, as the kubelet syncs mounted
// Secrets (a rotated certificate must reach a running webhook server).
func TestRunAsPodKeepsSecretVolumesInSync(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	secret, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "certs"},
		Data: map[string][]byte{"tls.crt": []byte("FIRST")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := createWithIP(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "watcher"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "x",
				Args:         []string{"-c", `while true; do echo "seen $(cat /certs/tls.crt)"; sleep 0.2; done`},
				VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}}},
			Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs"}}}},
		},
	})
	p, err := cluster.RunAsPod(ctx, pod, "main", "/bin/sh")
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(time.Second) })
	seen := func(what string) func() (bool, string) {
		return func() (bool, string) {
			out, _ := os.ReadFile(p.LogPath())
			return strings.Contains(string(out), "seen "+what), string(out)
		}
	}
	eventually(t, 10*time.Second, "the first content", seen("FIRST"))
	secret.Data["tls.crt"] = []byte("SECOND")
	_, err = kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, 15*time.Second, "the updated content", seen("SECOND"))
}

// createWithIP creates pod in ns and returns it once kwok has given it an IP.
func createWithIP(t *testing.T, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the pod to get an IP", func() (bool, string) {
		pod, err = kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && pod.Status.PodIP != "", pod.Status.PodIP
	})
	return pod
}
