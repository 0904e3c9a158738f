package resources

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func cluster(mutate ...func(*mysqlv1beta1.MySQLCluster)) *mysqlv1beta1.MySQLCluster {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}}
	c.Spec.Instances = new(int32(3))
	for _, m := range mutate {
		m(c)
	}
	c.Default()
	return c
}

func container(t *testing.T, s *appsv1.StatefulSet, name string) corev1.Container {
	t.Helper()
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func TestStatefulSet(t *testing.T) {
	img := ImagesFromEnv(func(string) string { return "" })
	for name, tc := range map[string]struct {
		mutate func(*mysqlv1beta1.MySQLCluster)
		check  func(*testing.T, *appsv1.StatefulSet)
	}{
		"defaults": {nil, func(t *testing.T, s *appsv1.StatefulSet) {
			if *s.Spec.Replicas != 3 || s.Spec.ServiceName != "db-instances" || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Errorf("spec: %+v", s.Spec)
			}
			m := container(t, s, "mysqld")
			if m.Image != "docker.io/library/mysql:8.4.6" {
				t.Errorf("image %s", m.Image)
			}
			sc := m.SecurityContext
			if !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("container security context %+v", sc)
			}
			if ps := s.Spec.Template.Spec.SecurityContext; !*ps.RunAsNonRoot || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context %+v", ps)
			}
			if m.StartupProbe == nil || m.ReadinessProbe == nil || m.LivenessProbe == nil {
				t.Error("mysqld needs startup, readiness and liveness probes")
			}
			if p := s.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
				p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Error("the defaults keep volumes, of a deleted cluster and of a removed instance")
			}
			if s.Spec.Template.Spec.Affinity.PodAntiAffinity == nil || len(s.Spec.Template.Spec.TopologySpreadConstraints) != 1 {
				t.Error("default anti-affinity and zone spread are missing")
			}
			if dc := s.Spec.Template.Spec.DNSConfig; dc == nil || len(dc.Options) != 2 || dc.Options[0].Name != "timeout" ||
				*dc.Options[0].Value != "1" || dc.Options[1].Name != "attempts" || *dc.Options[1].Value != "2" {
				t.Errorf("mysqld's name lookups need short tries: %+v", dc)
			}
			if len(s.Spec.Template.Spec.Containers) != 1 || len(s.Spec.Template.Spec.InitContainers) != 1 {
				t.Error("one mysqld container and one init container without monitoring")
			}
			q := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
			if q.String() != "10Gi" {
				t.Errorf("volume %s", q.String())
			}
			if !hasVolume(s, "tls") {
				t.Error("TLS is on by default: the certificate volume is missing")
			}
		}},
		"a pinned release and an override": {func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version = "9.7.9" }, func(t *testing.T, s *appsv1.StatefulSet) {
			if img := container(t, s, "mysqld").Image; img != "docker.io/library/mysql:9.7.9" {
				t.Errorf("image %s", img)
			}
		}},
		"deletion policy Delete removes volumes with the set": {func(c *mysqlv1beta1.MySQLCluster) { c.Spec.DeletionPolicy = mysqlv1beta1.DeletionPolicyDelete }, func(t *testing.T, s *appsv1.StatefulSet) {
			if s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				t.Error("volumes must go with the StatefulSet")
			}
		}},
		"whenScaled Delete removes a removed instance's volume": {func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Storage.WhenScaled = mysqlv1beta1.DeletionPolicyDelete }, func(t *testing.T, s *appsv1.StatefulSet) {
			if p := s.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled != appsv1.DeletePersistentVolumeClaimRetentionPolicyType ||
				p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("retention %+v", p)
			}
		}},
		"monitoring adds the exporter": {func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Monitoring.Exporter.Enabled = true }, func(t *testing.T, s *appsv1.StatefulSet) {
			e := container(t, s, ContainerExporter)
			if e.Ports[0].ContainerPort != ExporterPort {
				t.Errorf("exporter %+v", e)
			}
			// The instance's own DNS name, which its certificate holds (ExporterCnf).
			want := []string{"--config.my-cnf=" + ConfigDir + "/" + ExporterConfigKey,
				"--mysqld.address=$(POD_NAME).db-instances.prod.svc:3306", "--web.listen-address=:9104"}
			if !slices.Equal(e.Args, want) {
				t.Errorf("exporter args %q, want %q", e.Args, want)
			}
			var mounts []string
			for _, m := range e.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
			if !slices.Equal(mounts, []string{ConfigDir, TLSDir}) {
				t.Errorf("exporter mounts %q: it needs its settings and the CA", mounts)
			}
		}},
		"the user's scheduling wins": {func(c *mysqlv1beta1.MySQLCluster) {
			c.Spec.PodTemplate.Affinity = &corev1.Affinity{}
			c.Spec.PodTemplate.PriorityClassName = "db-critical"
			c.Spec.PodTemplate.Metadata.Labels = map[string]string{"team": "payments", LabelInstance: "spoof"}
		}, func(t *testing.T, s *appsv1.StatefulSet) {
			ps := s.Spec.Template.Spec
			if ps.Affinity.PodAntiAffinity != nil || ps.PriorityClassName != "db-critical" {
				t.Errorf("pod spec %+v", ps)
			}
			if l := s.Spec.Template.Labels; l["team"] != "payments" || l[LabelInstance] != "db" {
				t.Errorf("user labels are added but never replace the selector's: %v", l)
			}
		}},
		"TLS off": {func(c *mysqlv1beta1.MySQLCluster) { c.Spec.TLS.Enabled = new(false) }, func(t *testing.T, s *appsv1.StatefulSet) {
			if hasVolume(s, "tls") {
				t.Error("no certificate volume without TLS")
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			var m []func(*mysqlv1beta1.MySQLCluster)
			if tc.mutate != nil {
				m = append(m, tc.mutate)
			}
			c := cluster(m...)
			tc.check(t, StatefulSet(c, StatefulSetInput{Images: img, ConfigHash: ConfigHash(c)}))
		})
	}
}

func hasVolume(s *appsv1.StatefulSet, name string) bool {
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func TestStatefulSetKeepsExistingClaimTemplates(t *testing.T) {
	c := cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Storage.Size = new(resource.MustParse("50Gi")) })
	old := []corev1.PersistentVolumeClaim{dataClaimTemplate(cluster())}
	s := StatefulSet(c, StatefulSetInput{ClaimTemplates: old})
	q := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
	if q.String() != "10Gi" {
		t.Errorf("claim templates are immutable: kept size should be 10Gi, got %s", q.String())
	}
}

// The API server gives a stored claim template a status (phase Pending). A StatefulSet
// built from the live one must equal the first one built, or every new cluster's
// StatefulSet is applied twice.
func TestAClaimTemplatesStatusIsNotApplied(t *testing.T) {
	c := cluster()
	first := StatefulSet(c, StatefulSetInput{})
	live := first.DeepCopy().Spec.VolumeClaimTemplates
	live[0].Status.Phase = corev1.ClaimPending
	again := StatefulSet(c, StatefulSetInput{ClaimTemplates: live})
	if !reflect.DeepEqual(first, again) {
		t.Errorf("the StatefulSet built from the stored claim template differs from the first: %+v", again.Spec.VolumeClaimTemplates)
	}
	if live[0].Status.Phase != corev1.ClaimPending {
		t.Error("the builder changed its input")
	}
}

func TestTheExporterVerifiesMySQLsCertificateWhenTheClusterHasTLS(t *testing.T) {
	withTLS := ConfigMap(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Monitoring.Exporter.Enabled = true })).Data[ExporterConfigKey]
	if !strings.Contains(withTLS, "[client]\nuser="+ExporterUser+"\nssl-ca="+TLSDir+"/ca.crt\n") {
		t.Errorf("exporter settings with TLS:\n%s", withTLS)
	}
	if strings.Contains(withTLS, "password") || strings.Contains(withTLS, "skip") {
		t.Errorf("no password in a ConfigMap, no skipped verification:\n%s", withTLS)
	}
	without := ConfigMap(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Monitoring.Exporter.Enabled = true
		c.Spec.TLS.Enabled = new(false)
	})).Data[ExporterConfigKey]
	if strings.Contains(without, "ssl-ca") {
		t.Errorf("without TLS there is no CA to name:\n%s", without)
	}
}

func TestConfigHashFollowsOnlyTheEffectiveConfig(t *testing.T) {
	base := ConfigHash(cluster())
	if base != ConfigHash(cluster()) {
		t.Fatal("the same config must hash the same")
	}
	if base == ConfigHash(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.MySQL.Config = map[string]string{"back_log": "500"}
	})) {
		t.Error("a setting read at start must change the hash")
	}
	if base != ConfigHash(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.MySQL.Config = map[string]string{"max_connections": "500", "Long-Query-Time": "2"}
	})) {
		t.Error("online settings are set on the running instances and must not roll the pods")
	}
	if !strings.Contains(ConfigMap(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.MySQL.Config = map[string]string{"max_connections": "500"}
	})).Data[ConfigFileKey], "max_connections = 500") {
		t.Error("my.cnf carries online settings too, for the next start")
	}
	if got := OnlineConfig(cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.MySQL.Config = map[string]string{"max_connections": "500", "Long-Query-Time": "2", "back_log": "9"}
	})); len(got) != 2 || got["max_connections"] != "500" || got["long_query_time"] != "2" {
		t.Errorf("online settings by variable name: %v", got)
	}
	if base != ConfigHash(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Instances = new(int32(5)) })) {
		t.Error("scaling does not change my.cnf and must not roll the pods")
	}
	if _, ok := ConfigMap(cluster()).Data[ExporterConfigKey]; ok {
		t.Error("without the exporter, no exporter settings (they would roll the pods)")
	}
	cnf := MyCnf(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Config = map[string]string{"max_connections": "500"} }))
	for _, want := range []string{"[mysqld]", "max_connections = 500", "gtid_mode = ON", "super_read_only = ON", "require_secure_transport = ON"} {
		if !strings.Contains(cnf, want) {
			t.Errorf("my.cnf lacks %q:\n%s", want, cnf)
		}
	}
}

func TestServices(t *testing.T) {
	c := cluster()
	for _, tc := range []struct {
		svc      *corev1.Service
		name     string
		role     Role
		headless bool
	}{
		{HeadlessService(c), "db-instances", "", true},
		{PrimaryService(c), "db-primary", RolePrimary, false},
		{ReplicasService(c), "db-replicas", RoleReplica, false},
	} {
		if tc.svc.Name != tc.name || tc.svc.Spec.Selector[LabelRole] != string(tc.role) || tc.svc.Spec.Selector[LabelInstance] != "db" {
			t.Errorf("%s: %+v", tc.name, tc.svc.Spec)
		}
		if (tc.svc.Spec.ClusterIP == corev1.ClusterIPNone) != tc.headless {
			t.Errorf("%s: clusterIP %q", tc.name, tc.svc.Spec.ClusterIP)
		}
		if p := tc.svc.Spec.Ports[0]; p.Port != 3306 || p.TargetPort.StrVal != "mysql" {
			t.Errorf("%s: port %+v", tc.name, p)
		}
	}
	if MetricsService(c) != nil {
		t.Error("no metrics Service without the exporter")
	}
	if MetricsService(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Monitoring.Exporter.Enabled = true })) == nil {
		t.Error("the exporter needs its Service")
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	if PodDisruptionBudget(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Instances = new(int32(1)) })) != nil {
		t.Error("a single instance must get no budget: it would block every drain")
	}
	if p := PodDisruptionBudget(cluster()); p == nil || p.Spec.MaxUnavailable.IntVal != 1 {
		t.Errorf("got %+v", p)
	}
}

func TestBackupClaim(t *testing.T) {
	if BackupClaim(cluster()) != nil {
		t.Error("no backups, no backup volume")
	}
	nightly := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "0 2 * * *"}
	})
	if claim := BackupClaim(nightly); claim == nil || claim.Name != "db-backup" {
		t.Errorf("backup claim %+v", claim)
	}
	existing := nightly.DeepCopy()
	existing.Spec.Backup.Target.PVC = &mysqlv1beta1.PVCTarget{ClaimName: "nas"}
	if BackupClaim(existing) != nil {
		t.Error("an existing claim is used, not created")
	}
}

func TestBackupJob(t *testing.T) {
	c := cluster()
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: c.Namespace,
		CreationTimestamp: metav1.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: c.Name, Timeout: &metav1.Duration{Duration: 10 * time.Minute}}}
	s3 := &mysqlv1beta1.BackupTarget{S3: &mysqlv1beta1.S3Target{Bucket: "bk", Prefix: "/prod/", Endpoint: "https://s3.example",
		ForcePathStyle: true, CredentialsSecret: corev1.LocalObjectReference{Name: "creds"},
		CASecret: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "root.pem"}}}
	job := BackupJob(BackupRun{Backup: b, Cluster: c, Target: s3, Source: "db-1", OperatorImage: "op:1",
		Images: ImagesFromEnv(func(string) string { return "" })})
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 660 {
		t.Errorf("a backup is run once, within its timeout and a minute: %+v", job.Spec)
	}
	pod := job.Spec.Template.Spec
	if pod.InitContainers[0].Image != "op:1" || pod.Containers[0].Image != ImagesFromEnv(func(string) string { return "" }).MySQLImage(c) {
		t.Errorf("the operator's binary into the cluster's MySQL image: %+v", pod)
	}
	args := strings.Join(pod.Containers[0].Command, " ")
	// No method: Physical, with a work volume for the copy.
	for _, want := range []string{"--key=prod/" + c.Namespace + "/db/base/20261202T030405Z-b1/data.tar.zst", "--method=Physical",
		"--work=/work", "--source-instance=db-1",
		"--source-host=db-1.db-instances." + c.Namespace + ".svc", "--user=dolphin-backup", "--timeout=10m0s", "--s3-bucket=bk",
		"--s3-endpoint=https://s3.example", "--s3-path-style", "--s3-ca-file=/etc/dolphin/s3-ca/ca.crt"} {
		if !strings.Contains(args, want) {
			t.Errorf("command %q lacks %q", args, want)
		}
	}
	secrets := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
	}
	want := map[string]string{"DOLPHIN_BACKUP_PASSWORD": "db-credentials/" + KeyBackupPassword,
		"AWS_ACCESS_KEY_ID": "creds/AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "creds/AWS_SECRET_ACCESS_KEY"}
	if !reflect.DeepEqual(secrets, want) {
		t.Errorf("env %v, want %v", secrets, want)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a backup pod needs no API access")
	}
	vol := BackupJob(BackupRun{Backup: b, Cluster: c, Target: &mysqlv1beta1.BackupTarget{PVC: &mysqlv1beta1.PVCTarget{ClaimName: "nas"}},
		Source: "db-0", OperatorImage: "op:1"})
	args = strings.Join(vol.Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(args, "--dir=/backup --claim=nas") || strings.Contains(args, "--s3") {
		t.Errorf("volume target: %q", args)
	}
}

func TestCredentialsAreGeneratedOnceAndKept(t *testing.T) {
	c := cluster()
	first, err := CredentialsSecret(c, nil, nil, RotationProgress{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range CredentialKeys {
		if len(first.Data[k]) != PasswordLength {
			t.Errorf("%s has %d characters", k, len(first.Data[k]))
		}
	}
	if bytes.Equal(first.Data[KeyRootPassword], first.Data[KeyAdminPassword]) {
		t.Error("every account gets its own password")
	}
	partial := first.DeepCopy()
	delete(partial.Data, KeyBackupPassword)
	second, err := CredentialsSecret(c, partial, nil, RotationProgress{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Data[KeyRootPassword], second.Data[KeyRootPassword]) {
		t.Error("an existing password must never change")
	}
	if len(second.Data[KeyBackupPassword]) != PasswordLength || bytes.Equal(second.Data[KeyBackupPassword], first.Data[KeyBackupPassword]) {
		t.Error("a missing password is generated anew")
	}
	if _, err := CredentialsSecret(c, nil, bytes.NewReader(nil), RotationProgress{}, time.Now()); err == nil {
		t.Error("a failing random source must be an error, not a weak password")
	}
}

func TestTLSSecretsIssueKeepAndRenew(t *testing.T) {
	c := cluster()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	first, err := TLSSecrets(c, nil, nil, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, first.Server.Data[corev1.TLSCertKey])
	for _, n := range []string{"db-primary.prod.svc", "db-replicas", "*.db-instances.prod.svc"} {
		if err := cert.VerifyHostname(strings.Replace(n, "*", "db-0", 1)); err != nil {
			t.Errorf("server certificate does not cover %s: %v", n, err)
		}
	}
	if !first.RenewAt.Equal(cert.NotAfter.Add(-RenewBefore)) {
		t.Errorf("renew at %s", first.RenewAt)
	}

	kept, err := TLSSecrets(c, first.CA, first.Server, now.Add(24*time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept.Server.Data[corev1.TLSCertKey], first.Server.Data[corev1.TLSCertKey]) {
		t.Error("a valid certificate must be kept")
	}

	renewed, err := TLSSecrets(c, first.CA, first.Server, cert.NotAfter.Add(-RenewBefore+time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(renewed.Server.Data[corev1.TLSCertKey], first.Server.Data[corev1.TLSCertKey]) {
		t.Error("a certificate inside its renewal window must be renewed")
	}
	if !bytes.Equal(renewed.CA.Data[KeyCACert], first.CA.Data[KeyCACert]) {
		t.Error("the CA is still valid and must be kept (clients trust it)")
	}

	if r, _ := TLSSecrets(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.TLS.SecretName = "mine" }), nil, nil, now, nil); r.CA != nil || r.Server != nil {
		t.Error("the user's certificate is not ours to issue")
	}
}

// TestANewCAIsTrustedAlongsideTheOneItReplaces: instances serve a certificate of the old CA
// until they reload, so ca.crt trusts both for CATransition.
func TestANewCAIsTrustedAlongsideTheOneItReplaces(t *testing.T) {
	c := cluster()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	first, err := TLSSecrets(c, nil, nil, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldCA := parseCert(t, first.CA.Data[KeyCACert])
	oldServer := parseCert(t, first.Server.Data[corev1.TLSCertKey])
	trusts := func(r TLSResult, cert *x509.Certificate, at time.Time) bool {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(r.Server.Data[KeyCACert]) {
			t.Fatal("ca.crt holds no certificate")
		}
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, DNSName: "db-primary.prod.svc"})
		return err == nil
	}
	if got := certCount(first.Server.Data[KeyCACert]); got != 1 || first.CA.Data[KeyPreviousCACert] != nil {
		t.Errorf("a first CA trusts itself only: %d certificates, previous %q", got, first.CA.Data[KeyPreviousCACert])
	}

	cases := []struct {
		name           string
		ca, server     *corev1.Secret
		at             time.Time
		newCA, oldKept bool
	}{
		{"the CA in its renewal window is replaced and still trusted", first.CA, first.Server, oldCA.NotAfter.Add(-RenewBefore + time.Hour), true, true},
		{"a deleted CA Secret: the CA the instances were given is still trusted", nil, first.Server, start.Add(time.Hour), true, true},
		{"both Secrets deleted: nothing to keep", nil, nil, start.Add(time.Hour), true, false},
		{"an expired old CA is not kept", first.CA, first.Server, oldCA.NotAfter.Add(time.Hour), true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := TLSSecrets(c, tc.ca, tc.server, tc.at, nil)
			if err != nil {
				t.Fatal(err)
			}
			newCA := parseCert(t, r.CA.Data[KeyCACert])
			if newCA.Equal(oldCA) != !tc.newCA {
				t.Fatalf("new CA %v, want %v", !newCA.Equal(oldCA), tc.newCA)
			}
			if err := parseCert(t, r.Server.Data[corev1.TLSCertKey]).CheckSignatureFrom(newCA); err != nil {
				t.Errorf("the server certificate is the new CA's: %v", err)
			}
			if got := trusts(r, oldServer, oldServer.NotBefore.Add(time.Hour)); got != tc.oldKept {
				t.Errorf("ca.crt trusts the old CA's certificate: %v, want %v", got, tc.oldKept)
			}
			if !tc.oldKept {
				return
			}
			if !r.RenewAt.Equal(transitionEnd(newCA, oldCA)) || r.RenewAt.After(tc.at.Add(CATransition)) {
				t.Errorf("renew at %s: the bundle shrinks when the transition ends", r.RenewAt)
			}
			during, err := TLSSecrets(c, r.CA, r.Server, r.RenewAt.Add(-time.Minute), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(during.Server.Data[KeyCACert], r.Server.Data[KeyCACert]) {
				t.Error("during the transition both CAs stay trusted")
			}
			after, err := TLSSecrets(c, r.CA, r.Server, r.RenewAt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if certCount(after.Server.Data[KeyCACert]) != 1 || after.CA.Data[KeyPreviousCACert] != nil {
				t.Error("after the transition the old CA is no longer trusted")
			}
			if !bytes.Equal(after.Server.Data[corev1.TLSCertKey], r.Server.Data[corev1.TLSCertKey]) {
				t.Error("the server certificate is kept when the old CA goes")
			}
		})
	}
}

func certCount(p []byte) int {
	n := 0
	for b, rest := pem.Decode(p); b != nil; b, rest = pem.Decode(rest) {
		n++
	}
	return n
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestImagesFromEnv(t *testing.T) {
	env := map[string]string{"RELATED_IMAGE_MYSQL_8_4": "registry.local/mysql@sha256:abc", EnvExporterImage: "registry.local/exporter:1"}
	img := ImagesFromEnv(func(k string) string { return env[k] })
	if got := img.MySQLImage(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version = "8.4.3" })); got != "registry.local/mysql@sha256:abc" {
		t.Errorf("a digest-pinned image is used as given, got %s", got)
	}
	if got := img.MySQLImage(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Image = "mine:1" })); got != "mine:1" {
		t.Errorf("spec.mysql.image wins, got %s", got)
	}
	if img.Exporter != "registry.local/exporter:1" || img.MySQL["9.7"] != defaultImages.MySQL["9.7"] {
		t.Errorf("images %+v", img)
	}
}

func TestMonitoringObjects(t *testing.T) {
	if ServiceMonitor(cluster()) != nil || PrometheusRule(cluster()) != nil {
		t.Error("nothing without monitoring")
	}
	on := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Monitoring.Exporter.Enabled = true
		c.Spec.Monitoring.ServiceMonitor.Enabled = true
		c.Spec.Monitoring.PrometheusRule.Enabled = true
	})
	if sm := ServiceMonitor(on); sm == nil || sm.GetKind() != "ServiceMonitor" {
		t.Errorf("service monitor %v", sm)
	}
	pr := PrometheusRule(on)
	if pr == nil || !strings.Contains(strings.Join(alertNames(pr.Object), ","), "DolphinMySQLInstanceDown") {
		t.Errorf("rule %v", pr)
	}
}

func alertNames(o map[string]any) []string {
	var out []string
	for _, g := range o["spec"].(map[string]any)["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			out = append(out, r.(map[string]any)["alert"].(string))
		}
	}
	return out
}

func TestEveryAlertHasARunbook(t *testing.T) {
	for _, a := range append(append([]Alert(nil), ClusterAlerts...), OperatorAlerts...) {
		if _, err := os.Stat(filepath.Join("..", "..", "docs", "runbooks", a.Name+".md")); err != nil {
			t.Errorf("alert %s has no runbook: %v", a.Name, err)
		}
	}
}

// A cluster's PrometheusRule reads that cluster's series only, in every selector.
func TestAClustersRulesSelectItsSeries(t *testing.T) {
	on := cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.Monitoring.PrometheusRule.Enabled = true })
	rules := PrometheusRule(on).Object["spec"].(map[string]any)["groups"].([]any)[0].(map[string]any)["rules"].([]any)
	require.Len(t, rules, len(ClusterAlerts))
	want := fmt.Sprintf(`namespace=%q,cluster=%q}`, on.Namespace, on.Name)
	for _, r := range rules {
		expr := r.(map[string]any)["expr"].(string)
		require.Equal(t, strings.Count(expr, "dolphin_"), strings.Count(expr, want), "every selector of %s", expr)
	}
	require.Contains(t, rules[0].(map[string]any)["expr"], `dolphin_cluster_phase{phase="Failed",`+want)
}

// The pod's shell scripts parse as POSIX shell (sh -n reads without running).
func TestScriptsParse(t *testing.T) {
	for name, script := range map[string]string{"mysqld": mysqldScript, "init": initScript} {
		out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput()
		if err != nil {
			t.Errorf("%s script: %v: %s", name, err, out)
		}
	}
}

func TestScheduledBackup(t *testing.T) {
	c := cluster(func(c *mysqlv1beta1.MySQLCluster) {
		c.Spec.Backup = &mysqlv1beta1.BackupSpec{Schedule: "0 2 * * *", Method: mysqlv1beta1.BackupMethodPhysical}
	})
	due := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	b := ScheduledBackup(c, due)
	if b.Name != "db-20261202-0200" || b.Annotations[AnnotationScheduledAt] != "2026-12-02T02:00:00Z" ||
		b.Spec.Cluster != "db" || b.Spec.Method != mysqlv1beta1.BackupMethodPhysical || len(b.OwnerReferences) != 0 {
		t.Errorf("got %+v", b)
	}
}

func TestAClustersReleaseIsResolvedFromItsVersionOrItsImage(t *testing.T) {
	env := map[string]string{"RELATED_IMAGE_MYSQL_8_4": "registry.local/mysql@sha256:abc", "RELATED_IMAGE_MYSQL_9_7": "registry.local/mysql:9.7.3-oracle"}
	img := ImagesFromEnv(func(k string) string { return env[k] })
	for name, tc := range map[string]struct {
		version, image string
		want           string // "" when unknown
	}{
		"a series resolves to its image's tag":      {"9.7", "", "9.7.3"},
		"a pinned release is itself":                {"9.7.4", "", "9.7.4"},
		"a digest-pinned series image is unknown":   {"8.4", "", ""},
		"a custom image's tag":                      {"9.7", "mine/mysql:9.7.5", "9.7.5"},
		"a custom image wins over a pinned release": {"9.7.4", "mine/mysql:9.7.2", "9.7.2"},
		"a custom image without a release":          {"9.7", "mine/mysql:latest", ""},
		"a custom image of an unsupported series":   {"9.7", "mine/mysql:8.0.40", ""},
	} {
		c := cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version, c.Spec.MySQL.Image = tc.version, tc.image })
		v, ok := img.Release(c)
		got := ""
		if ok {
			got = v.String()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	if v, ok := ImagesFromEnv(func(string) string { return "" }).Release(cluster(func(c *mysqlv1beta1.MySQLCluster) { c.Spec.MySQL.Version = "8.4" })); !ok || v.String() != "8.4.6" {
		t.Errorf("the default 8.4 image runs %v (%v)", v, ok)
	}
}

func TestTheApplicationSecretRotatesItsPasswordAndKeepsThePreviousOneForItsRetention(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: mysqlv1beta1.MySQLClusterSpec{Application: &mysqlv1beta1.ApplicationSpec{Database: "shop",
			PreviousPasswordRetention: &metav1.Duration{Duration: 10 * time.Minute}}}}
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	first, discard, err := ApplicationSecret(c, nil, nil, now)
	require.NoError(t, err)
	require.True(t, discard.IsZero())
	pw := string(first.Data[KeyAppPassword])
	require.Len(t, pw, PasswordLength)
	require.Equal(t, "shop", string(first.Data[KeyAppUsername]))
	require.Equal(t, "mysql://shop:"+pw+"@db-primary.ns.svc:3306/shop", string(first.Data[KeyAppURI]))
	require.Equal(t, "jdbc:mysql://db-primary.ns.svc:3306/shop", string(first.Data[KeyAppJDBCURI]))
	require.Equal(t, "db-replicas.ns.svc", string(first.Data[KeyAppReadOnlyHost]))
	require.NotContains(t, first.Data, KeyAppPreviousPassword)

	again, _, err := ApplicationSecret(c, first, nil, now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, first.Data, again.Data, "generated once")

	c.Annotations = map[string]string{mysqlv1beta1.AnnotationRotateApplicationPassword: "2026-12-06"}
	rotated, discard, err := ApplicationSecret(c, again, nil, now)
	require.NoError(t, err)
	require.NotEqual(t, pw, string(rotated.Data[KeyAppPassword]))
	require.Equal(t, pw, string(rotated.Data[KeyAppPreviousPassword]))
	require.Equal(t, now.Add(10*time.Minute), discard)
	require.Equal(t, map[string]string{AnnotationRotatedFor: "2026-12-06", AnnotationRotatedAt: "2026-12-06T04:00:00Z"},
		rotated.Annotations)

	later, discard, err := ApplicationSecret(c, rotated, nil, now.Add(9*time.Minute))
	require.NoError(t, err)
	require.Equal(t, rotated.Data, later.Data, "the same request is answered once; the previous password stays")
	require.Equal(t, now.Add(10*time.Minute), discard)

	done, discard, err := ApplicationSecret(c, later, nil, now.Add(10*time.Minute))
	require.NoError(t, err)
	require.True(t, discard.IsZero())
	require.NotContains(t, done.Data, KeyAppPreviousPassword, "dropped once its retention is over")
	require.Equal(t, rotated.Data[KeyAppPassword], done.Data[KeyAppPassword])

	c.Spec.Application = nil
	none, _, err := ApplicationSecret(c, done, nil, now)
	require.NoError(t, err)
	require.Nil(t, none)
}

// The init script's application_grant, run by a shell, writes ApplicationGrantSQL for the
// database the variable names, and nothing without one.
func TestTheInitScriptGrantsTheApplicationDatabase(t *testing.T) {
	run := func(env ...string) string {
		cmd := exec.Command("sh", "-c", applicationGrantFunc+"application_grant")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sh: %v: %s", err, out)
		}
		return string(out)
	}
	want := os.Expand(ApplicationGrantSQL, func(string) string { return "shop_1" })
	if got := run(ApplicationDatabaseVar + "=shop_1"); got != want {
		t.Errorf("application_grant wrote %q, want %q", got, want)
	}
	if got := run(); got != "" {
		t.Errorf("without a database, application_grant wrote %q", got)
	}
}

// A password was set at its Secret's last rotation, else when the Secret was made, else
// now (the Secret is being made); an unreadable rotation time counts as none.
func TestPasswordsSetAt(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	made := metav1.NewTime(time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	secret := func(rotatedAt string, created metav1.Time) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
		if rotatedAt != "" {
			s.Annotations = map[string]string{AnnotationRotatedAt: rotatedAt}
		}
		return s
	}
	for _, tc := range []struct {
		name              string
		desired, existing *corev1.Secret
		want              time.Time
	}{
		{"being made", secret("", metav1.Time{}), nil, now},
		{"made earlier", secret("", metav1.Time{}), secret("", made), made.Time},
		{"rotated", secret("2026-12-01T09:30:00Z", metav1.Time{}), secret("", made), time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)},
		{"unreadable rotation", secret("yesterday", metav1.Time{}), secret("", made), made.Time},
		{"no desired Secret", nil, secret("", made), made.Time},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, tc.want.Equal(PasswordsSetAt(tc.desired, tc.existing, now)), "want %s", tc.want)
		})
	}
}
