package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/metrics"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// forgetTimeout bounds pre-delete work: deletion never hangs on an unreachable mysqld.
const forgetTimeout = 15 * time.Second

// claimFenceRecheck is how soon a deletion that waits for the StatefulSet controller to
// observe the Retain claim policy looks again.
const claimFenceRecheck = time.Second

// finalize keeps what the deletion policy retains, tells the topology manager, and lets
// the cluster go. Children it owns are removed by the garbage collector afterwards.
func (r *MySQLClusterReconciler) finalize(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, mysqlv1beta1.ClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	c.Default()
	if c.Spec.DeletionPolicy != mysqlv1beta1.DeletionPolicyDelete {
		kept, err := r.keepDataClaims(ctx, c)
		if err != nil || !kept {
			return ctrl.Result{RequeueAfter: claimFenceRecheck}, err
		}
		if err := r.orphanRetained(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
	} else if err := r.deleteUnusedRestoreClaim(ctx, c); err != nil {
		return ctrl.Result{}, err
	}
	fctx, cancel := context.WithTimeout(ctx, forgetTimeout)
	defer cancel()
	if err := r.Topology.Forget(fctx, c); err != nil {
		// Deletion goes on: a cluster whose mysqld is gone must still be deletable.
		log.Error(err, "Pre-delete work failed; deleting anyway")
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, mysqlv1beta1.ReasonDeletionInProgress, "Delete",
			"Pre-delete work failed, deleting anyway: %v", err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.RemoveFinalizer(c, mysqlv1beta1.ClusterFinalizer)
	if err := r.Patch(ctx, c, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("while removing the finalizer: %w", err))
	}
	metrics.ForgetCluster(c) // after the topology loop stopped: no pass sets them again
	r.archives.forget(c.UID)
	r.warned.forget(c.UID)
	log.Info("Released MySQLCluster for deletion", "deletionPolicy", c.Spec.DeletionPolicy)
	return ctrl.Result{}, nil
}

// keepDataClaims makes sure no data volume goes with the StatefulSet when the policy
// keeps them. A cluster switched to Retain just before its deletion may still have a
// StatefulSet whose claim policy says Delete, or one whose controller has not seen the
// change yet and still owns the claims; the garbage collector would then delete every
// volume with the StatefulSet. So the StatefulSet is set to Retain here, the deletion
// waits until its controller has observed that generation (after which it adds no owner
// reference to a claim), and then the claims' references to it are removed. It reports
// whether the claims are safe.
func (r *MySQLClusterReconciler) keepDataClaims(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (bool, error) {
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, sts); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(fmt.Errorf("while reading the StatefulSet: %w", err))
	}
	policy := sts.Spec.PersistentVolumeClaimRetentionPolicy
	if policy == nil || policy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		patch := client.MergeFrom(sts.DeepCopy())
		if sts.Spec.PersistentVolumeClaimRetentionPolicy == nil {
			sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			}
		}
		sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		if err := r.Patch(ctx, sts, patch); err != nil {
			return false, fmt.Errorf("while setting the StatefulSet's claim policy to Retain: %w", err)
		}
		return false, nil
	}
	if sts.Status.ObservedGeneration < sts.Generation {
		logf.FromContext(ctx).V(1).Info("Waiting for the StatefulSet controller to observe the Retain claim policy",
			"generation", sts.Generation, "observedGeneration", sts.Status.ObservedGeneration)
		return false, nil
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return false, fmt.Errorf("while listing the data volumes: %w", err)
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if !metaOwnedBy(claim, sts) {
			continue
		}
		patch := client.MergeFromWithOptions(claim.DeepCopy(), client.MergeFromWithOptimisticLock{})
		refs := claim.OwnerReferences[:0]
		for _, ref := range claim.OwnerReferences {
			if ref.UID != sts.UID {
				refs = append(refs, ref)
			}
		}
		claim.OwnerReferences = refs
		if err := r.Patch(ctx, claim, patch); err != nil {
			return false, fmt.Errorf("while releasing the volume %s from the StatefulSet: %w", claim.Name, err)
		}
	}
	return true, nil
}

// orphanRetained removes the cluster's owner reference from the Secrets and the backup
// volume, so the garbage collector keeps them. The data volumes are kept by
// keepDataClaims.
func (r *MySQLClusterReconciler) orphanRetained(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error {
	keep := []client.Object{
		&corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}, &corev1.PersistentVolumeClaim{},
	}
	names := []string{resources.CredentialsSecretName(c), resources.CASecretName(c), resources.TLSSecretName(c),
		resources.BackupClaimName(c)}
	for k, obj := range keep {
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: names[k]}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("while reading %s: %w", names[k], err)
		}
		if !metaOwnedBy(obj, c) {
			continue
		}
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		if err := controllerutil.RemoveOwnerReference(c, obj, r.Scheme); err != nil {
			return fmt.Errorf("while releasing %s: %w", names[k], err)
		}
		if err := r.Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("while releasing %s: %w", names[k], err)
		}
	}
	return nil
}

// metaOwnedBy reports whether obj carries an owner reference to owner.
func metaOwnedBy(obj client.Object, owner client.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}
