// Package storageversion moves stored custom resources to their CRD's storage version and
// then trims the CRD's status.storedVersions to that one version.
//
// Why: the API server keeps each object in etcd in the version that was the storage version
// when it was last written, and lists every such version in status.storedVersions. A release
// may stop serving an old version only once no object is stored in it; the API server refuses
// to drop a version that storedVersions still lists, and OLM refuses such a CRD update. So
// after an upgrade changes the storage version, the operator rewrites each object (an update
// with no change re-encodes it in the storage version) and then records that only the storage
// version is left. The same work kube-storage-version-migrator does, kept to our CRDs.
package storageversion

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// CRDs are Dolphin's; the rights below are for exactly these.
var CRDs = []string{"mysqlclusters.mysql.dolphin-operator.io", "mysqlbackups.mysql.dolphin-operator.io"}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=mysqlclusters.mysql.dolphin-operator.io;mysqlbackups.mysql.dolphin-operator.io
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update,resourceNames=mysqlclusters.mysql.dolphin-operator.io;mysqlbackups.mysql.dolphin-operator.io
// +kubebuilder:rbac:groups=mysql.dolphin-operator.io,resources=mysqlclusters;mysqlbackups,verbs=list;update

// Migrator migrates the stored objects of CRDs. As a manager Runnable it runs once per start
// of the elected leader, which after an upgrade is the new version's operator.
type Migrator struct {
	// Reader reads without a cache: CRDs and whole lists are read once, and a cache would
	// need the right to watch every CRD in the cluster.
	Reader client.Reader
	// Writer updates objects and the CRD's status.
	Writer client.Client
	// CRDs to migrate, by name.
	CRDs []string
	// Discovery, when set, guards against rewriting too early: the API server switches to a
	// new storage version a moment after the CRD update, and says so in discovery's
	// storageVersionHash; until it does, an update would re-encode in the old version.
	Discovery discovery.DiscoveryInterface
	// Retry is the wait between attempts while one fails (the conversion webhook a list
	// needs may not answer yet); default 10 s.
	Retry time.Duration
	// Recorder, when set, receives an Event on the CRD for each migration done (Normal,
	// StorageVersionMigrated) and for a migration that keeps failing (Warning,
	// StorageVersionMigrationFailed: the first failure, then every WarnEvery).
	Recorder events.EventRecorder
}

// Event reasons of the migrator, on the CRD (a cluster-scoped object: the Events go to the
// default namespace).
const (
	ReasonMigrated        = "StorageVersionMigrated"
	ReasonMigrationFailed = "StorageVersionMigrationFailed"
	// WarnEvery is how often a failing migration repeats its Warning.
	WarnEvery = 10 * time.Minute
)

// Result is what one migration of a CRD did.
type Result struct {
	// Rewritten is how many objects were rewritten in the storage version.
	Rewritten int
	// Dropped are the versions removed from status.storedVersions (none: nothing to do).
	Dropped []string
	// Storage is the CRD's storage version.
	Storage string
}

// Start migrates every CRD, retrying each until it succeeds or ctx ends. It implements
// manager.Runnable.
func (m *Migrator) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("storage-version")
	wait := m.Retry
	if wait == 0 {
		wait = 10 * time.Second
	}
	for _, name := range m.CRDs {
		var warned time.Time
		for {
			res, err := m.Migrate(ctx, name)
			if err == nil {
				if len(res.Dropped) > 0 {
					log.Info("Migrated stored objects to the storage version", "crd", name, "objects", res.Rewritten,
						"storage", res.Storage, "dropped", res.Dropped)
					m.event(name, corev1.EventTypeNormal, ReasonMigrated,
						"Rewrote %d objects in storage version %s; status.storedVersions no longer lists %s",
						res.Rewritten, res.Storage, strings.Join(res.Dropped, ", "))
				}
				break
			}
			log.Error(err, "Storage version migration failed; retrying", "crd", name, "in", wait)
			if time.Since(warned) >= WarnEvery {
				warned = time.Now()
				m.event(name, corev1.EventTypeWarning, ReasonMigrationFailed,
					"Storage version migration failed (retried every %s): %v", wait, err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
	<-ctx.Done()
	return nil
}

// event records an Event on the CRD name, when there is a recorder.
func (m *Migrator) event(name, kind, reason, note string, args ...any) {
	if m.Recorder == nil {
		return
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	m.Recorder.Eventf(crd, nil, kind, reason, "Migrate", note, args...)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one replica migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }

// Migrate rewrites every object of the CRD name in its storage version when storedVersions
// lists another, then sets storedVersions to the storage version alone. It reports what it
// did; nothing is written when only the storage version is listed.
func (m *Migrator) Migrate(ctx context.Context, name string) (Result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return Result{}, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	storage := StorageVersion(crd)
	if storage == "" {
		return Result{}, fmt.Errorf("CRD %s has no storage version", name)
	}
	res := Result{Storage: storage}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return res, nil
	}
	if err := m.servedAsStored(crd, storage); err != nil {
		return res, err
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}
	n, err := m.rewriteAll(ctx, gvk)
	res.Rewritten = n
	if err != nil {
		return res, err
	}
	// Every object listed above was written after the storage version changed, and every
	// object written since is in it too: the older versions are gone from etcd.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if StorageVersion(crd) != storage {
			return fmt.Errorf("CRD %s changed its storage version during the migration", name)
		}
		res.Dropped = slices.DeleteFunc(slices.Clone(crd.Status.StoredVersions), func(v string) bool { return v == storage })
		crd.Status.StoredVersions = []string{storage}
		return m.Writer.Status().Update(ctx, crd)
	})
	if err != nil {
		return res, fmt.Errorf("recording %s as the only stored version of %s: %w", storage, name, err)
	}
	return res, nil
}

// rewriteAll updates every object of the list kind gvk unchanged, a page at a time.
func (m *Migrator) rewriteAll(ctx context.Context, gvk schema.GroupVersionKind) (int, error) {
	n := 0
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := m.Reader.List(ctx, list, client.Limit(100), client.Continue(cont)); err != nil {
			return n, fmt.Errorf("listing %s: %w", gvk, err)
		}
		for i := range list.Items {
			if err := m.rewrite(ctx, &list.Items[i]); err != nil {
				return n, err
			}
			n++
		}
		if cont = list.GetContinue(); cont == "" {
			return n, nil
		}
	}
}

// rewrite updates obj with what it holds; on a conflict it rereads it (someone else's write
// has re-encoded it already, but an update costs little and keeps the reasoning simple).
func (m *Migrator) rewrite(ctx context.Context, obj *unstructured.Unstructured) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := m.Writer.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			if getErr := m.Reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); getErr != nil {
				return getErr
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: nothing left to migrate
	}
	if err != nil {
		return fmt.Errorf("rewriting %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// servedAsStored checks, when a discovery client is set, that the API server already stores
// the CRD's objects in version storage.
func (m *Migrator) servedAsStored(crd *apiextensionsv1.CustomResourceDefinition, storage string) error {
	if m.Discovery == nil {
		return nil
	}
	gv := crd.Spec.Group + "/" + storage
	resources, err := m.Discovery.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("discovering %s: %w", gv, err)
	}
	want := storageVersionHash(crd.Spec.Group, storage, crd.Spec.Names.Kind)
	for _, r := range resources.APIResources {
		if r.Name == crd.Spec.Names.Plural {
			if r.StorageVersionHash != want {
				return fmt.Errorf("the API server does not store %s in %s yet (storage version hash %q, want %q)",
					crd.Name, storage, r.StorageVersionHash, want)
			}
			return nil
		}
	}
	return fmt.Errorf("the API server does not serve %s in %s", crd.Spec.Names.Plural, gv)
}

// storageVersionHash is the API server's hash of the group/version/kind it stores a resource
// in, as its discovery publishes it (k8s.io/apiserver's discovery.StorageVersionHash, which
// this copies rather than pull the API server's packages into the operator).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// StorageVersion is the name of the CRD version marked storage, or "".
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
