package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const (
	// StorageClassName is the cluster's default StorageClass, served by the provisioner.
	StorageClassName = "standard"
	provisionerName  = "localcluster.dolphin-operator.io/hostpath"
)

// prepareNodeAndStorage registers the fake node, the default StorageClass and the volume
// provisioner, and waits until the node is Ready and the controller-manager has made the
// default ServiceAccount (pods cannot be created before).
func (c *Cluster) prepareNodeAndStorage(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return fmt.Errorf("while creating a client: %w", err)
	}
	if err := c.createStorageClass(ctx, cs); err != nil {
		return err
	}
	if c.cfg.Nodes > 0 {
		return poll(ctx, "the default ServiceAccount", 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        kwokNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": kwokNodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok"},
		},
	}
	pods := c.cfg.KwokPods
	if pods <= 0 {
		pods = 250
	}
	// A CPU and 4 GiB a pod: what the pods request (an operator's sidecars do) never keeps
	// one from being scheduled before the pod count does.
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(pods), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(pods)<<32, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("while creating the fake node: %w", err)
	}
	return poll(ctx, "a Ready fake node and the default ServiceAccount", 2*time.Minute,
		func(ctx context.Context) (bool, error) {
			if err := c.Healthy(); err != nil {
				return false, err
			}
			n, err := cs.CoreV1().Nodes().Get(ctx, kwokNodeName, metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				return false, nil //nolint:nilerr // not there yet: poll again until the timeout
			}
			_, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
}

// createStorageClass creates the default StorageClass and starts its provisioner.
func (c *Cluster) createStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	immediate := storagev1.VolumeBindingImmediate
	deletePolicy := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     &deletePolicy,
		VolumeBindingMode: &immediate,
		// Lets tests (and users) grow volumes; hostPath has no size to change.
		AllowVolumeExpansion: new(true),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("while creating the StorageClass: %w", err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.provision = &provisioner{cs: cs, dir: filepath.Join(c.cfg.Dir, "volumes"), log: c.logf}
	c.provision.start(pctx)
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// provisioner binds every pending claim of the default class to a new hostPath
// PersistentVolume under the cluster's folder, and deletes released volumes with their
// data (reclaim policy Delete). It plays the part of a CSI driver's external provisioner:
// it creates the PV pre-bound to the claim and the controller-manager completes the bind.
type provisioner struct {
	cs  kubernetes.Interface
	dir string
	log func(string, ...any)
}

func (p *provisioner) start(ctx context.Context) {
	f := informers.NewSharedInformerFactory(p.cs, 0)
	_, _ = f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.claim(ctx, o) },
		UpdateFunc: func(_, o any) { p.claim(ctx, o) },
	})
	_, _ = f.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.volume(ctx, o) },
		UpdateFunc: func(_, o any) { p.volume(ctx, o) },
	})
	f.Start(ctx.Done())
}

func (p *provisioner) claim(ctx context.Context, o any) {
	pvc, ok := o.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending ||
		pvc.DeletionTimestamp != nil || pvc.Spec.StorageClassName == nil ||
		*pvc.Spec.StorageClassName != StorageClassName {
		return
	}
	name := "pvc-" + string(pvc.UID)
	path := filepath.Join(p.dir, name)
	// World-writable, as local-path volumes are: a pod running as any user (mysqld runs
	// as 999) can use it, and kubelet applies no fsGroup to hostPath volumes.
	if err := os.MkdirAll(path, 0o777); err != nil || os.Chmod(path, 0o777) != nil {
		p.log("provisioner: creating %s: %v", path, err)
		return
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	dirType := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClassName,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirType}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		p.log("provisioner: creating PV for %s/%s: %v", pvc.Namespace, pvc.Name, err)
	}
}

func (p *provisioner) volume(ctx context.Context, o any) {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisionerName ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return
	}
	if pv.Spec.HostPath != nil {
		if err := os.RemoveAll(pv.Spec.HostPath.Path); err != nil {
			p.log("provisioner: removing %s: %v", pv.Spec.HostPath.Path, err)
			return
		}
	}
	if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		p.log("provisioner: deleting PV %s: %v", pv.Name, err)
	}
}

// VolumePath returns the folder behind a bound claim, or "" when it has none yet.
func (c *Cluster) VolumePath(ctx context.Context, namespace, claim string) (string, error) {
	cs, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return "", fmt.Errorf("while creating a client: %w", err)
	}
	return volumePath(ctx, cs, namespace, claim)
}

func volumePath(ctx context.Context, cs kubernetes.Interface, namespace, claim string) (string, error) {
	pvc, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("while reading claim %s/%s: %w", namespace, claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", nil
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("while reading volume %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("volume %s of claim %s/%s is not a hostPath volume", pv.Name, namespace, claim)
	}
	return pv.Spec.HostPath.Path, nil
}
