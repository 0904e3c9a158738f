package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/backup"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// BackupDataFinalizer is on a completed backup stored in S3 until its stored objects
// are deleted: deleting the MySQLBackup (by hand or by retention) deletes its data.
const BackupDataFinalizer = "mysql.dolphin-operator.io/backup-data"

// storeTimeout bounds one pass's requests to an object store.
const storeTimeout = 30 * time.Second

// holdsData says whether the backup's data is ours to delete: completed, in S3.
func holdsData(st mysqlv1beta1.MySQLBackupStatus) bool {
	return st.Phase == mysqlv1beta1.BackupPhaseCompleted && st.Target != nil && st.Target.S3 != nil
}

// keepData puts the finalizer on a backup that holds data, before its status says so.
func (r *MySQLBackupReconciler) keepData(ctx context.Context, b *mysqlv1beta1.MySQLBackup) error {
	if controllerutil.ContainsFinalizer(b, BackupDataFinalizer) {
		return nil
	}
	patch := client.MergeFrom(b.DeepCopy())
	controllerutil.AddFinalizer(b, BackupDataFinalizer)
	if err := r.Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("while adding the finalizer: %w", err)
	}
	return nil
}

// deleteData deletes a deleted backup's stored objects, then lets the backup go. A store
// that cannot be reached keeps the backup (the error says why, and the pass is retried);
// removing the finalizer by hand gives the data up.
func (r *MySQLBackupReconciler) deleteData(ctx context.Context, b *mysqlv1beta1.MySQLBackup) error {
	if !controllerutil.ContainsFinalizer(b, BackupDataFinalizer) {
		return nil
	}
	if holdsData(b.Status) {
		if err := r.deleteStored(ctx, b); err != nil {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, objectstore.Reason(err), "DeleteData", "%v", err)
			return err
		}
	}
	patch := client.MergeFrom(b.DeepCopy())
	controllerutil.RemoveFinalizer(b, BackupDataFinalizer)
	if err := r.Patch(ctx, b, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("while removing the finalizer: %w", err))
	}
	return nil
}

func (r *MySQLBackupReconciler) deleteStored(ctx context.Context, b *mysqlv1beta1.MySQLBackup) error {
	st, err := r.store(ctx, b.Namespace, b.Status.Target.S3)
	if err != nil {
		return err
	}
	key := resources.BackupKey(b, b.Status.Target)
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	// The manifest first: without it the data is an incomplete backup, never a complete
	// one, should the second delete not happen.
	return st.Delete(sctx, backup.ManifestKey(key), key)
}

// store is the client of an S3 target, with the credentials of its Secrets.
func (r *MySQLBackupReconciler) store(ctx context.Context, ns string, t *mysqlv1beta1.S3Target) (*objectstore.Store, error) {
	return openStore(ctx, r, ns, t)
}

// openStore is the client of an S3 target in namespace ns, with the credentials of its
// Secrets as rd reads them.
func openStore(ctx context.Context, rd client.Reader, ns string, t *mysqlv1beta1.S3Target) (*objectstore.Store, error) {
	creds := &corev1.Secret{}
	if err := rd.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.CredentialsSecret.Name}, creds); err != nil {
		return nil, fmt.Errorf("the credentials Secret %s: %w", t.CredentialsSecret.Name, err)
	}
	cfg := objectstore.Config{Endpoint: t.Endpoint, Region: t.Region, Bucket: t.Bucket, PathStyle: t.ForcePathStyle,
		AccessKeyID: string(creds.Data[resources.KeyS3AccessKeyID]), SecretAccessKey: string(creds.Data[resources.KeyS3SecretAccessKey])}
	if t.CASecret != nil {
		ca := &corev1.Secret{}
		if err := rd.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.CASecret.Name}, ca); err != nil {
			return nil, fmt.Errorf("the CA Secret %s: %w", t.CASecret.Name, err)
		}
		cfg.CABundle = ca.Data[t.CASecret.Key]
	}
	return objectstore.New(cfg)
}
