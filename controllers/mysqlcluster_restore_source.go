package controllers

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// The backup a restore reads: a MySQLBackup's status says what it is; without the object
// (fromBackup.source), the manifest stored beside its data says the same, since the
// backup's pod wrote both from one report and the manifest last.

// maxStoredManifests bounds how many manifests one pass reads while it looks for the
// newest stored backup that reaches the target (newest first).
const maxStoredManifests = 20

// restoreSource finds the backup spec.bootstrap.fromBackup names, or says why the
// restore waits for it (or cannot go on).
func (r *MySQLClusterReconciler) restoreSource(ctx context.Context, c *mysqlv1beta1.MySQLCluster, s *mysqlv1beta1.RestoreStatus) (resources.RestoreSource, *restoreState, error) {
	if src := c.Spec.Bootstrap.FromBackup.Source; src != nil {
		found, rs := r.storedBackup(ctx, c, src, s)
		return found, rs, nil
	}
	b := &mysqlv1beta1.MySQLBackup{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: s.Backup}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return resources.RestoreSource{}, waiting(s, mysqlv1beta1.ReasonBackupNotFound,
				fmt.Sprintf("MySQLBackup %s does not exist in namespace %s", s.Backup, c.Namespace), false), nil
		}
		return resources.RestoreSource{}, nil, fmt.Errorf("while reading MySQLBackup %s: %w", s.Backup, err)
	}
	if rs := unrestorable(b, s); rs != nil {
		return resources.RestoreSource{}, rs, nil
	}
	return resources.SourceOfBackup(b), nil, nil
}

// storedBackup lists the source's stored backups and reads their manifests, newest
// first, until one fits (the one named, or the newest that reaches the recovery target).
// What the store answers is reported, and looked at again on a later pass.
func (r *MySQLClusterReconciler) storedBackup(ctx context.Context, c *mysqlv1beta1.MySQLCluster, src *mysqlv1beta1.BackupSource, s *mysqlv1beta1.RestoreStatus) (resources.RestoreSource, *restoreState) {
	store, err := openStore(ctx, r, c.Namespace, &src.S3)
	if err != nil {
		return resources.RestoreSource{}, waiting(s, storeReason(err), "the backups' store: "+err.Error(), false)
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	base := storedBase(c, src)
	objects, err := store.List(sctx, base)
	if err != nil {
		return resources.RestoreSource{}, waiting(s, storeReason(err), err.Error(), false)
	}
	folders := storedFolders(base, objects, src.Backup)
	if len(folders) == 0 {
		what := "no complete backup (data and manifest)"
		if src.Backup != "" {
			what = "no complete backup " + src.Backup
		}
		return resources.RestoreSource{}, waiting(s, mysqlv1beta1.ReasonBackupNotFound,
			fmt.Sprintf("%s under %s", what, store.URL(base)), false)
	}
	f := c.Spec.Bootstrap.FromBackup
	var passed []string
	for k, folder := range folders {
		if k == maxStoredManifests {
			break
		}
		m, err := readStoredManifest(sctx, store, base+folder)
		if err != nil {
			reason := mysqlv1beta1.ReasonBackupCorrupted // a manifest that is not the data's
			if f := (*backup.Failure)(nil); errors.As(err, &f) {
				reason = f.Reason
			}
			return resources.RestoreSource{}, waiting(s, reason, fmt.Sprintf("stored backup %s: %v", folder, err),
				reason == mysqlv1beta1.ReasonBackupCorrupted)
		}
		found := fromManifest(src, c.Namespace, folder, m, store.URL(m.Key))
		if src.Backup != "" || reaches(f, found) {
			return found, nil
		}
		passed = append(passed, folder)
	}
	return resources.RestoreSource{}, waiting(s, mysqlv1beta1.ReasonTargetNotRecoverable, fmt.Sprintf(
		"none of the newest %d stored backups under %s reaches the target (%s): %s",
		len(passed), store.URL(base), targetText(f), strings.Join(passed, ", ")), true)
}

// storedBase is the folder the source's backups are stored under (resources.BackupKey).
func storedBase(c *mysqlv1beta1.MySQLCluster, src *mysqlv1beta1.BackupSource) string {
	ns := src.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	return strings.TrimPrefix(path.Join(strings.Trim(src.S3.Prefix, "/"), ns, src.Cluster, "base")+"/", "/")
}

// storedFolders are the folders under base that hold a manifest (a complete backup),
// newest first (a folder's name begins with its creation time), or only the one wanted.
func storedFolders(base string, objects []objectstore.Info, wanted string) []string {
	var out []string
	for _, o := range objects {
		folder, file, ok := strings.Cut(strings.TrimPrefix(o.Key, base), "/")
		if !ok || strings.Contains(file, "/") || !strings.HasSuffix(file, ".manifest.json") {
			continue
		}
		if wanted == "" || folder == wanted {
			out = append(out, folder)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return slices.Compact(out)
}

// readStoredManifest reads the one manifest of the stored backup in folder and checks it
// describes data beside it.
func readStoredManifest(ctx context.Context, store *objectstore.Store, folder string) (backup.Manifest, error) {
	for _, file := range []string{"data.tar.zst", "dump.sql.zst"} {
		key := folder + "/" + file
		m, ok, err := backup.ReadManifest(ctx, store, key)
		switch {
		case err != nil:
			return m, err
		case !ok:
			continue
		case m.Key != key:
			return m, fmt.Errorf("its manifest describes %s, not %s", m.Key, key)
		case m.SHA256 == "" || m.GTIDSet == "" || m.CompletedAt.IsZero():
			return m, fmt.Errorf("its manifest lacks the data's SHA-256, GTID set or completion time")
		}
		switch mysqlv1beta1.BackupMethod(m.Method) {
		case mysqlv1beta1.BackupMethodPhysical, mysqlv1beta1.BackupMethodLogical:
			return m, nil
		}
		return m, fmt.Errorf("its manifest names an unknown method %q", m.Method)
	}
	return backup.Manifest{}, fmt.Errorf("no manifest beside data.tar.zst or dump.sql.zst")
}

// fromManifest is a stored backup, as its manifest describes it, read through the
// source's store from location (which may not be where it was written: a replicated
// bucket behind another endpoint).
func fromManifest(src *mysqlv1beta1.BackupSource, ns, folder string, m backup.Manifest, location string) resources.RestoreSource {
	if src.Namespace != "" {
		ns = src.Namespace
	}
	return resources.RestoreSource{Name: folder, Namespace: ns, Cluster: src.Cluster,
		Target: &mysqlv1beta1.BackupTarget{S3: src.S3.DeepCopy()}, Key: m.Key, Location: location,
		Method: mysqlv1beta1.BackupMethod(m.Method), SHA256: m.SHA256, Size: m.Size, GTIDSet: m.GTIDSet,
		CompletedAt: &metav1.Time{Time: m.CompletedAt}}
}

// reaches says whether a recovery to the target can start from the backup (as
// unrecoverable judges it); without a target every backup does.
func reaches(f *mysqlv1beta1.BootstrapFromBackup, b resources.RestoreSource) bool {
	switch {
	case f.TargetGTID != "":
		held, err := gtidHeld(b.GTIDSet, f.TargetGTID)
		return err == nil && !held
	case f.TargetTime != nil:
		return b.CompletedAt != nil && !f.TargetTime.Before(b.CompletedAt)
	}
	return true
}

func targetText(f *mysqlv1beta1.BootstrapFromBackup) string {
	if f.TargetGTID != "" {
		return "transaction " + f.TargetGTID
	}
	if f.TargetTime != nil {
		return f.TargetTime.UTC().Format(time.RFC3339)
	}
	return "none"
}

// storeReason is the reason for a store that could not be opened or read.
func storeReason(err error) string {
	if apierrors.IsNotFound(err) {
		return mysqlv1beta1.ReasonBackupTargetNotFound // a credentials or CA Secret
	}
	return objectstore.Reason(err)
}
