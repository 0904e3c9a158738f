package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the cluster admin and
// impersonates the ServiceAccount namespace/name with the groups the API server gives
// ServiceAccount tokens, so a process using it gets exactly the ServiceAccount's RBAC: what
// a role forgets to grant is forbidden, as it would be in a real pod.
func (c *Cluster) ServiceAccountKubeconfig(namespace, name string) (string, error) {
	kc := c.kubeconfig("system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
	path := filepath.Join(c.cfg.Dir, "kubeconfig-sa-"+namespace+"-"+name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("while writing the ServiceAccount kubeconfig: %w", err)
	}
	return path, nil
}

// RunAsPod runs binary in the place of one container of a (fake) pod: with the container's
// arguments, its environment resolved as the kubelet would (values and downward-API field
// references), each volume mount replaced by a folder of its own (in arguments and values
// alike) holding what the volume would (a Secret's or ConfigMap's keys, an emptyDir
// nothing), and KUBECONFIG acting as the pod's ServiceAccount. The folders sit under one
// root at their mount paths, and TMPDIR is that root's /tmp, so a program that finds a
// mount through os.TempDir() (controller-runtime's default webhook certificate folder,
// /tmp/k8s-webhook-server/serving-certs, where OLM mounts its certificate) finds it too.
// The pod must have its IP: the process then answers for the pod inside the harness's
// network namespace.
func (c *Cluster) RunAsPod(ctx context.Context, pod *corev1.Pod, container, binary string) (*Process, error) {
	var ctr *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			ctr = &pod.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return nil, fmt.Errorf("pod %s/%s has no container %q", pod.Namespace, pod.Name, container)
	}
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s has no IP yet", pod.Namespace, pod.Name)
	}
	root := filepath.Join(c.cfg.Dir, "pods", pod.Namespace+"_"+pod.Name, container)
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	var replacer []string
	fs := filepath.Join(root, "fs")
	for _, m := range ctr.VolumeMounts {
		dir := mountDir(fs, m)
		if err := fillVolume(ctx, cs, pod, m.Name, dir); err != nil {
			return nil, err
		}
		replacer = append(replacer, m.MountPath, dir)
	}
	mounts := strings.NewReplacer(replacer...)
	env, err := podEnv(ctx, cs, pod, ctr, mounts)
	if err != nil {
		return nil, err
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(pod.Namespace, sa)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(fs, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("while creating %s: %w", tmp, err)
	}
	env = append(env, "KUBECONFIG="+kubeconfig, "TMPDIR="+tmp)
	args := make([]string, len(ctr.Args))
	for i, a := range ctr.Args {
		args[i] = mounts.Replace(a)
	}
	p, err := c.Run(pod.Name+"-"+container, binary, env, args...)
	if err != nil {
		return nil, err
	}
	go syncVolumes(cs, pod, ctr, fs, p)
	return p, nil
}

// syncVolumes keeps the process's volumes up to date as the kubelet does (a rotated
// certificate reaches a running container), every two seconds until the process ends. A
// Secret that is briefly gone leaves the files as they were, as with the kubelet.
func syncVolumes(cs kubernetes.Interface, pod *corev1.Pod, ctr *corev1.Container, fs string, p *Process) {
	for p.Exited() == nil {
		time.Sleep(2 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, m := range ctr.VolumeMounts {
			_ = fillVolume(ctx, cs, pod, m.Name, mountDir(fs, m))
		}
		cancel()
	}
}

// mountDir is where a played container's mount lives: its mount path under the root fs.
func mountDir(fs string, m corev1.VolumeMount) string {
	return filepath.Join(fs, filepath.Clean("/"+m.MountPath))
}

// ForbiddenCalls returns the lines of the process's log that report an API call refused
// by RBAC: for a process run by RunAsPod, a right its ServiceAccount lacks.
func (p *Process) ForbiddenCalls() ([]string, error) {
	log, err := os.ReadFile(p.LogPath())
	if err != nil {
		return nil, fmt.Errorf("while reading the log of %s: %w", p.p.name, err)
	}
	var refused []string
	for line := range strings.SplitSeq(string(log), "\n") {
		if strings.Contains(line, "forbidden") {
			refused = append(refused, line)
		}
	}
	return refused, nil
}

// fillVolume makes dir hold what the pod's volume name would show its container. A
// projected ServiceAccount token is left out: the process authenticates through KUBECONFIG.
func fillVolume(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, name, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("while creating %s: %w", dir, err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		var err error
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			err = writeSecret(ctx, cs, pod.Namespace, v.Secret.SecretName, v.Secret.Items, dir)
		case v.ConfigMap != nil:
			err = writeConfigMap(ctx, cs, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, dir)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case err != nil:
				case src.Secret != nil:
					err = writeSecret(ctx, cs, pod.Namespace, src.Secret.Name, src.Secret.Items, dir)
				case src.ConfigMap != nil:
					err = writeConfigMap(ctx, cs, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, dir)
				case src.DownwardAPI != nil:
					for _, it := range src.DownwardAPI.Items {
						if it.FieldRef != nil && it.FieldRef.FieldPath == "metadata.namespace" {
							err = writeKeys(dir, map[string][]byte{"ns": []byte(pod.Namespace)}, []corev1.KeyToPath{{Key: "ns", Path: it.Path}})
						}
					}
				}
			}
		default:
			return fmt.Errorf("volume %s of pod %s/%s: only emptyDir, Secret, ConfigMap and projected volumes are played here",
				name, pod.Namespace, pod.Name)
		}
		if err != nil {
			return fmt.Errorf("volume %s of pod %s/%s: %w", name, pod.Namespace, pod.Name, err)
		}
		return nil
	}
	return fmt.Errorf("pod %s/%s mounts volume %s, which it does not have", pod.Namespace, pod.Name, name)
}

func writeSecret(ctx context.Context, cs kubernetes.Interface, ns, name string, items []corev1.KeyToPath, dir string) error {
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return writeKeys(dir, s.Data, items)
}

func writeConfigMap(ctx context.Context, cs kubernetes.Interface, ns, name string, items []corev1.KeyToPath, dir string) error {
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return writeKeys(dir, data, items)
}

// writeKeys writes each key to its file name, or only the listed items to their paths.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	paths := map[string]string{}
	for k := range data {
		paths[k] = k
	}
	if len(items) > 0 {
		paths = map[string]string{}
		for _, it := range items {
			paths[it.Key] = it.Path
		}
	}
	for key, path := range paths {
		file := filepath.Join(dir, filepath.Clean("/"+path))
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return err
		}
		if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, data[key]) {
			continue
		}
		// Written aside and renamed into place: a reader never sees half a file.
		if err := os.WriteFile(file+".new", data[key], 0o600); err != nil {
			return err
		}
		if err := os.Rename(file+".new", file); err != nil {
			return err
		}
	}
	return nil
}

var fieldKey = regexp.MustCompile(`^metadata\.(annotations|labels)\['([^']+)'\]$`)

// podEnv resolves a container's environment the way the kubelet does for what fake pods can
// have: literal values, Secret keys and downward-API field references.
func podEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, ctr *corev1.Container, mounts *strings.Replacer) ([]string, error) {
	var env []string
	for _, e := range ctr.Env {
		value := mounts.Replace(e.Value)
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("env %s of %s: Secret %s: %w", e.Name, ctr.Name, ref.Name, err)
			}
			env = append(env, e.Name+"="+string(s.Data[ref.Key]))
			continue
		}
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("env %s of %s: only values, secretKeyRef and fieldRef are supported here", e.Name, ctr.Name)
			}
			path := e.ValueFrom.FieldRef.FieldPath
			switch path {
			case "metadata.namespace":
				value = pod.Namespace
			case "metadata.name":
				value = pod.Name
			case "status.podIP":
				value = pod.Status.PodIP
			case "spec.serviceAccountName":
				value = pod.Spec.ServiceAccountName
			case "spec.nodeName":
				value = pod.Spec.NodeName
			default:
				m := fieldKey.FindStringSubmatch(path)
				if m == nil {
					return nil, fmt.Errorf("env %s of %s: field %q is not supported here", e.Name, ctr.Name, path)
				}
				if m[1] == "annotations" {
					value = pod.Annotations[m[2]]
				} else {
					value = pod.Labels[m[2]]
				}
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

// PodOf waits for a pod matching the selector in namespace to have an IP and returns it.
func (c *Cluster) PodOf(ctx context.Context, namespace string, selector map[string]string) (*corev1.Pod, error) {
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return nil, fmt.Errorf("while creating a client: %w", err)
	}
	var found *corev1.Pod
	err = c.waitFor(ctx, fmt.Sprintf("a pod %v in %s with an IP", selector, namespace), 2*time.Minute,
		func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
				LabelSelector: labels.SelectorFromSet(selector).String()})
			if err != nil {
				return false, nil //nolint:nilerr // transient: keep polling until the timeout
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.Status.PodIP != "" && p.DeletionTimestamp == nil {
					found = p
					return true, nil
				}
			}
			return false, nil
		})
	return found, err
}
