package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// sourceCluster is restoringCluster restored from the backups cluster "shop" stored in
// bucket "b" (an endpoint nothing listens on unless set).
func sourceCluster(endpoint string) *mysqlv1beta1.MySQLCluster {
	c := restoringCluster()
	c.Spec.Bootstrap.FromBackup = &mysqlv1beta1.BootstrapFromBackup{Source: &mysqlv1beta1.BackupSource{Cluster: "shop",
		S3: mysqlv1beta1.S3Target{Bucket: "b", Prefix: "/dr/", Endpoint: endpoint, ForcePathStyle: true,
			CredentialsSecret: corev1.LocalObjectReference{Name: "s3"}}}}
	return c
}

func TestStoredBackupsAreTheFoldersWithAManifestNewestFirst(t *testing.T) {
	c := sourceCluster("")
	base := storedBase(c, c.Spec.Bootstrap.FromBackup.Source)
	require.Equal(t, "dr/ns/shop/base/", base)
	c.Spec.Bootstrap.FromBackup.Source.Namespace = "prod"
	require.Equal(t, "dr/prod/shop/base/", storedBase(c, c.Spec.Bootstrap.FromBackup.Source))
	objects := []objectstore.Info{
		{Key: base + "20261201T020000Z-nightly/data.tar.zst"},
		{Key: base + "20261201T020000Z-nightly/data.tar.zst.manifest.json"},
		{Key: base + "20261203T020000Z-nightly/dump.sql.zst"}, // no manifest: incomplete
		{Key: base + "20261202T020000Z-nightly/dump.sql.zst"},
		{Key: base + "20261202T020000Z-nightly/dump.sql.zst.manifest.json"},
		{Key: base + "stray.manifest.json"},
		{Key: base + "20261204T020000Z-x/deeper/data.tar.zst.manifest.json"},
	}
	require.Equal(t, []string{"20261202T020000Z-nightly", "20261201T020000Z-nightly"}, storedFolders(base, objects, ""))
	require.Equal(t, []string{"20261201T020000Z-nightly"}, storedFolders(base, objects, "20261201T020000Z-nightly"))
	require.Empty(t, storedFolders(base, objects, "20261203T020000Z-nightly"))
}

func TestAStoredBackupReachesATargetAsAMySQLBackupWould(t *testing.T) {
	const uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	done := time.Date(2026, 12, 1, 2, 5, 0, 0, time.UTC)
	b := resources.RestoreSource{GTIDSet: uuid + ":1-9", CompletedAt: &metav1.Time{Time: done}}
	for _, tc := range []struct {
		name string
		f    mysqlv1beta1.BootstrapFromBackup
		want bool
	}{
		{name: "no target", want: true},
		{name: "after it completed", f: mysqlv1beta1.BootstrapFromBackup{TargetTime: &metav1.Time{Time: done.Add(time.Second)}}, want: true},
		{name: "as it completed", f: mysqlv1beta1.BootstrapFromBackup{TargetTime: &metav1.Time{Time: done}}, want: true},
		{name: "before it completed", f: mysqlv1beta1.BootstrapFromBackup{TargetTime: &metav1.Time{Time: done.Add(-time.Second)}}},
		{name: "a later transaction", f: mysqlv1beta1.BootstrapFromBackup{TargetGTID: uuid + ":10"}, want: true},
		{name: "a transaction it holds", f: mysqlv1beta1.BootstrapFromBackup{TargetGTID: uuid + ":9"}},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, reaches(&tc.f, b)) })
	}
}

func TestARestoreFromAStoreItCannotReadSaysWhyAndWaits(t *testing.T) {
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: "ns"},
		Data: map[string][]byte{resources.KeyS3AccessKeyID: []byte("k"), resources.KeyS3SecretAccessKey: []byte("s")}}
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		reason string
	}{
		{name: "no credentials Secret", reason: mysqlv1beta1.ReasonBackupTargetNotFound},
		// Port 1 of the loopback address refuses at once.
		{name: "a store that refuses", secret: creds, reason: mysqlv1beta1.ReasonStorageUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{sourceCluster("http://127.0.0.1:1")}
			if tc.secret != nil {
				objs = append(objs, tc.secret.DeepCopy())
			}
			r, _ := fakeReconciler(t, objs...)
			r.OperatorImage = "op:1"
			c, res := reconcileCluster(t, r)
			got := restored(c)
			require.Equal(t, tc.reason, got.Reason, got.Message)
			require.Positive(t, res.RequeueAfter, "looked at again")
			require.Equal(t, mysqlv1beta1.PhaseProvisioning, c.Status.Phase)
			require.False(t, hasStatefulSet(t, r))
		})
	}
}
