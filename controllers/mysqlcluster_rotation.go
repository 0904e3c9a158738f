package controllers

import (
	"context"
	"fmt"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// rotationRecheck is how soon a rotation of the operator's passwords in progress is looked
// at again: the primary Lease's notes and the pods' restarts are not all seen through
// watches.
const rotationRecheck = 5 * time.Second

// rotationProgress gathers what the next step of a rotation of the operator's passwords
// waits for (resources.RotationProgress): the primary Lease's notes, and whether every pod
// of the cluster runs with the current passwords.
func (r *MySQLClusterReconciler) rotationProgress(ctx context.Context, c *mysqlv1beta1.MySQLCluster,
	existing *corev1.Secret) (resources.RotationProgress, error) {
	var p resources.RotationProgress
	rot := resources.CredentialsRotation(existing)
	if rot.Phase == "" {
		return p, nil
	}
	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PrimaryLeaseName(c)}, lease)
	switch {
	case err == nil:
		p.Retained, p.Discarded = lease.Annotations[resources.AnnotationPasswordsRetained], lease.Annotations[resources.AnnotationPasswordsDiscarded]
	case !apierrors.IsNotFound(err):
		return p, fmt.Errorf("while reading the primary Lease: %w", err)
	}
	if rot.Phase != resources.RotationRolling {
		return p, nil
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{
		resources.LabelInstance: c.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return p, fmt.Errorf("while listing the cluster's pods: %w", err)
	}
	at, err := time.Parse(time.RFC3339, existing.Annotations[resources.AnnotationRotatedAt])
	if err != nil {
		return p, fmt.Errorf("the credentials Secret's %s: %w", resources.AnnotationRotatedAt, err)
	}
	p.ConsumersUpdated = len(stalePods(pods.Items, rot.Ask, at)) == 0
	return p, nil
}

// stalePods are the cluster's pods that may still use the passwords a rotation replaced:
// a running instance or archiver pod that does not carry the rotation (its template's,
// AnnotationCredentials), and a Job's pod made before the new passwords were set (its
// environment was read then).
func stalePods(pods []corev1.Pod, ask string, setAt time.Time) []string {
	var out []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, job := p.Labels[batchv1.JobNameLabel]; job {
			if !p.CreationTimestamp.After(setAt) {
				out = append(out, p.Name)
			}
			continue
		}
		if p.Annotations[resources.AnnotationCredentials] != ask {
			out = append(out, p.Name)
		}
	}
	return out
}

// writeCredentials makes the credentials Secret, or updates it to desired's passwords and
// rotation annotations. An update carries the resourceVersion existing was read at: a
// rotation's step taken on a stale copy (a password generated twice, a swap undone) is
// refused by the API server instead, and the pass runs again.
func (r *MySQLClusterReconciler) writeCredentials(ctx context.Context, st *state, desired, existing *corev1.Secret) error {
	if existing == nil {
		return r.applyOrDelete(ctx, st, desired, nil)
	}
	// Keys and annotations that are not the operator's stay as they are.
	data, annotations := maps.Clone(existing.Data), maps.Clone(existing.Annotations)
	if data == nil {
		data = map[string][]byte{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, k := range resources.RotatedKeys {
		delete(data, resources.NextKey(k))
		delete(data, resources.PreviousKey(k))
	}
	for _, k := range resources.CredentialsAnnotations {
		delete(annotations, k)
	}
	maps.Copy(data, desired.Data)
	maps.Copy(annotations, desired.Annotations)
	if maps.EqualFunc(existing.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) &&
		maps.Equal(existing.Annotations, annotations) {
		return nil
	}
	updated := existing.DeepCopy()
	updated.Data, updated.Annotations = data, annotations
	if len(updated.Annotations) == 0 {
		updated.Annotations = nil
	}
	if err := r.Update(ctx, updated); err != nil {
		return fmt.Errorf("while updating Secret %s: %w", existing.Name, err)
	}
	st.changed = append(st.changed, "updated "+kindName(updated))
	r.announceRotation(st.cluster, resources.CredentialsRotation(existing), resources.CredentialsRotation(updated))
	return nil
}

// announceRotation emits an Event when a rotation moved from one phase to the next.
func (r *MySQLClusterReconciler) announceRotation(c *mysqlv1beta1.MySQLCluster, from, to resources.Rotation) {
	if from == to || r.Recorder == nil {
		return
	}
	var msg string
	switch to.Phase {
	case resources.RotationRetaining:
		msg = "Rotation %s of the operator's passwords started: the accounts take their new passwords and keep the old ones"
	case resources.RotationRolling:
		msg = "Rotation %s: every account accepts its new password; the pods restart onto it"
	case resources.RotationDiscarding:
		msg = "Rotation %s: every pod uses the new passwords; the old ones are being discarded"
	default:
		msg = "Rotation %s of the operator's passwords is done: the old passwords are discarded"
		to.Ask = from.Ask
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, mysqlv1beta1.ReasonPasswordRotation, "RotatePasswords", msg, to.Ask)
}
