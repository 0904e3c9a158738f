// Package apply is the one way the operator writes a child object: server-side apply with
// a fixed field manager, forcing ownership of the fields it sets, and skipped entirely
// when nothing it owns would change, so that a reconcile of a settled cluster writes
// nothing at all.
//
// "Nothing would change" is decided on what the cache already holds, without a request:
// the child carries the hash of the last applied object (a change of the desired object,
// including a field removed from it, changes the hash), and every field the desired object
// sets must have the same value in the live object (a field someone else changed is put
// back). Fields the API server or other controllers add are not ours and do not count.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	// FieldManager names the operator in every object's managedFields.
	FieldManager = "dolphin-operator"
	// AnnotationHash holds the hash of the object as last applied.
	AnnotationHash = "mysql.dolphin-operator.io/applied-hash"
)

// Applier applies children of an owner.
type Applier struct {
	Client client.Client
	Scheme *runtime.Scheme
}

// Apply makes the live object match desired in every field desired sets, with owner as
// its controller. It reports whether it sent a request.
func (a *Applier) Apply(ctx context.Context, owner, desired client.Object) (bool, error) {
	if err := controllerutil.SetControllerReference(owner, desired, a.Scheme); err != nil {
		return false, fmt.Errorf("while setting the owner of %s: %w", desired.GetName(), err)
	}
	u, err := a.toUnstructured(desired)
	if err != nil {
		return false, err
	}
	hash, err := hashOf(u)
	if err != nil {
		return false, err
	}
	setAnnotation(u, AnnotationHash, hash)

	live, err := a.live(ctx, desired, u)
	if err != nil {
		return false, err
	}
	if live != nil && live.GetAnnotations()[AnnotationHash] == hash && Subset(u.Object, live.Object) {
		return false, nil
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("while applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return true, nil
}

// Delete removes obj (name and namespace set, of the kind to delete) if it exists and
// owner controls it; an object the operator does not control is left alone. It reports
// whether it sent a request.
func (a *Applier) Delete(ctx context.Context, owner, obj client.Object) (bool, error) {
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("while reading %s: %w", obj.GetName(), err)
	}
	if !metav1IsControlledBy(obj, owner) {
		return false, nil
	}
	if err := a.Client.Delete(ctx, obj, client.Preconditions{UID: new(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("while deleting %s: %w", obj.GetName(), err)
	}
	return true, nil
}

func metav1IsControlledBy(obj, owner client.Object) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller && r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// live reads the current object from the client (the manager's cache), as unstructured;
// nil when it does not exist.
func (a *Applier) live(ctx context.Context, desired client.Object, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var current client.Object
	if _, ok := desired.(*unstructured.Unstructured); ok {
		cu := &unstructured.Unstructured{}
		cu.SetGroupVersionKind(u.GroupVersionKind())
		current = cu
	} else {
		obj, err := a.Scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("while making a %s: %w", u.GetKind(), err)
		}
		current = obj.(client.Object)
	}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(desired), current); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("while reading %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return a.toUnstructured(current)
}

// toUnstructured converts o with its kind set, without status (applied through the main
// resource it is ignored) and without creationTimestamp (a typed zero value).
func (a *Applier) toUnstructured(o client.Object) (*unstructured.Unstructured, error) {
	gvk, err := a.gvk(o)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("while converting %s: %w", o.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func (a *Applier) gvk(o client.Object) (schema.GroupVersionKind, error) {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GroupVersionKind(), nil
	}
	gvks, _, err := a.Scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("the scheme does not know %T: %w", o, err)
	}
	return gvks[0], nil
}

func hashOf(u *unstructured.Unstructured) (string, error) {
	raw, err := json.Marshal(u.Object) // maps marshal with sorted keys: the same object, the same bytes
	if err != nil {
		return "", fmt.Errorf("while hashing %s: %w", u.GetName(), err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:12]), nil
}

func setAnnotation(u *unstructured.Unstructured, k, v string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	u.SetAnnotations(a)
}

// Subset reports whether every value set in want is present and equal in have: maps
// key by key, lists item by item (each wanted item matches some item of have), scalars
// by value (numbers by numeric value). A nil in want expresses no opinion.
func Subset(want, have any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if wv == nil {
					continue
				}
				return false
			}
			if !Subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) < len(w) {
			return false
		}
		for i, wv := range w {
			// Lists we set keep their order; look at the same index first.
			if i < len(h) && Subset(wv, h[i]) {
				continue
			}
			if !containsSubset(h, wv) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(want, have)
	}
}

func containsSubset(list []any, want any) bool {
	for _, h := range list {
		if Subset(want, h) {
			return true
		}
	}
	return false
}

func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
