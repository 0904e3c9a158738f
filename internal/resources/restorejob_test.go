package resources

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func TestRestoreJob(t *testing.T) {
	c := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: "nightly",
			Timeout: &metav1.Duration{Duration: 30 * time.Minute}}}
		c.Spec.PodTemplate.NodeSelector = map[string]string{"disk": "ssd"}
	})
	size := resource.MustParse("4096")
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: c.Namespace,
		CreationTimestamp: metav1.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "shop"},
		Status: mysqlv1beta1.MySQLBackupStatus{Phase: mysqlv1beta1.BackupPhaseCompleted, Method: mysqlv1beta1.BackupMethodLogical,
			SHA256: "feed", GTIDSet: "u:1-3", Size: &size,
			Target: &mysqlv1beta1.BackupTarget{PVC: &mysqlv1beta1.PVCTarget{}}}}
	job := RestoreJob(RestoreRun{Cluster: c, Backup: SourceOfBackup(b), OperatorImage: "op:1"})
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 31*60 {
		t.Errorf("a restore is run once, within its timeout and a minute: %+v", job.Spec)
	}
	pod := job.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Command, " ")
	for _, want := range []string{"/dolphin/manager restore", "--key=prod/shop/base/20261201T020000Z-nightly/dump.sql.zst",
		"--method=Logical", "--sha256=feed", "--size=4096", "--gtid-set=u:1-3", "--data=/var/lib/mysql", "--timeout=30m0s",
		"--dir=/backup --claim=shop-backup"} {
		if !strings.Contains(args, want) {
			t.Errorf("command %q lacks %q", args, want)
		}
	}
	claims := map[string]string{}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claims["data"] != "data-db-0" || claims["backup"] != "shop-backup" {
		t.Errorf("claims %v: the first instance's, and the backup cluster's backup volume", claims)
	}
	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	for _, v := range []string{"MYSQL_ROOT_PASSWORD", "DOLPHIN_ADMIN_PASSWORD", "DOLPHIN_REPLICATION_PASSWORD",
		"DOLPHIN_EXPORTER_PASSWORD", "DOLPHIN_BACKUP_PASSWORD", "DOLPHIN_USERS_PASSWORD", "DOLPHIN_PROBE_PASSWORD"} {
		if !strings.HasPrefix(env[v], "db-credentials/") {
			t.Errorf("%s from %q, want this cluster's credentials", v, env[v])
		}
	}
	if pod.NodeSelector["disk"] != "ssd" {
		t.Error("the restore runs where the instances may, where its volume stays")
	}
	if labels.SelectorFromSet(SelectorLabels(c)).Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("the restore's pod %v must not be one of the instances' (StatefulSet, Services, PodDisruptionBudget)", job.Spec.Template.Labels)
	}

	pvc := FirstDataClaim(c)
	want := dataClaimTemplate(c)
	if pvc.Name != "data-db-0" || pvc.Spec.Resources.Requests.Storage().Cmp(*c.Spec.Storage.Size) != 0 ||
		pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || len(pvc.OwnerReferences) != 0 || pvc.Labels[LabelInstance] != want.Labels[LabelInstance] {
		t.Errorf("the first claim as the StatefulSet would make it: %+v", pvc)
	}
}

// A recovery to a point in time reads the backup cluster's archive, beside the backup.
func TestARecoveryJobReadsTheBackupClustersArchive(t *testing.T) {
	target := metav1.Date(2026, 12, 1, 3, 4, 5, 0, time.UTC)
	c := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: "nightly", TargetTime: &target}}
	})
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod"},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "shop"},
		Status: mysqlv1beta1.MySQLBackupStatus{Phase: mysqlv1beta1.BackupPhaseCompleted, Method: mysqlv1beta1.BackupMethodPhysical,
			SHA256: "feed", GTIDSet: "u:1-3", Target: &mysqlv1beta1.BackupTarget{S3: &mysqlv1beta1.S3Target{Bucket: "b", Prefix: "/dr/",
				CredentialsSecret: corev1.LocalObjectReference{Name: "s3"}}}}}
	args := strings.Join(RestoreJob(RestoreRun{Cluster: c, Backup: SourceOfBackup(b), OperatorImage: "op:1"}).Spec.Template.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--target-time=2026-12-01T03:04:05Z", "--binlog-prefix=dr/prod/shop/binlog"} {
		if !strings.Contains(args, want) {
			t.Errorf("command %q lacks %q", args, want)
		}
	}
	c.Spec.Bootstrap.FromBackup.TargetTime, c.Spec.Bootstrap.FromBackup.TargetGTID = nil, "u:4"
	args = strings.Join(RestoreJob(RestoreRun{Cluster: c, Backup: SourceOfBackup(b), OperatorImage: "op:1"}).Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(args, "--target-gtid=u:4") || strings.Contains(args, "--target-time") || !strings.Contains(args, "--binlog-prefix=dr/prod/shop/binlog") {
		t.Errorf("a recovery to a transaction: %q", args)
	}
	c.Spec.Bootstrap.FromBackup.TargetGTID = ""
	args = strings.Join(RestoreJob(RestoreRun{Cluster: c, Backup: SourceOfBackup(b), OperatorImage: "op:1"}).Spec.Template.Spec.Containers[0].Command, " ")
	if strings.Contains(args, "--target-time") || strings.Contains(args, "--binlog-prefix") {
		t.Errorf("a restore without a target replays no archive: %q", args)
	}
}

func TestBackupPodsAreNotInstances(t *testing.T) {
	c := cluster()
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: c.Namespace}, Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: c.Name}}
	job := BackupJob(BackupRun{Backup: b, Cluster: c, Target: &mysqlv1beta1.BackupTarget{PVC: &mysqlv1beta1.PVCTarget{ClaimName: "nas"}},
		Source: "db-0", OperatorImage: "op:1"})
	if labels.SelectorFromSet(SelectorLabels(c)).Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("the backup's pod %v must not be one of the instances'", job.Spec.Template.Labels)
	}
}

func TestBackupMethodIsTheOneItRanWith(t *testing.T) {
	l, p := mysqlv1beta1.BackupMethodLogical, mysqlv1beta1.BackupMethodPhysical
	for _, tc := range []struct {
		spec, status, want mysqlv1beta1.BackupMethod
	}{
		{want: p},                     // the default
		{spec: l, want: l},            // asked for
		{status: l, want: l},          // ran as Logical before Physical was the default
		{spec: p, status: p, want: p}, // as it should be
	} {
		b := &mysqlv1beta1.MySQLBackup{Spec: mysqlv1beta1.MySQLBackupSpec{Method: tc.spec},
			Status: mysqlv1beta1.MySQLBackupStatus{Method: tc.status}}
		if got := BackupMethod(b); got != tc.want {
			t.Errorf("spec %q status %q: %q, want %q", tc.spec, tc.status, got, tc.want)
		}
	}
}
