package v1beta1

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

func TestValidatorReportsEveryProblemAtOnce(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Spec.Instances = new(int32(12))
	c.Default()
	c.Spec.MySQL.Version = "5.7"
	c.Spec.MySQL.Config = map[string]string{"server_id": "1"}
	_, err := (&MySQLClusterValidator{}).ValidateCreate(t.Context(), c)
	if err == nil {
		t.Fatal("an invalid cluster was accepted")
	}
	for _, want := range []string{"spec.instances", "spec.mysql.version", "spec.mysql.config[server_id]", `MySQLCluster.mysql.dolphin-operator.io "db" is invalid`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s: %v", want, err)
		}
	}
}

func TestBackupValidatorRefusesMovingABackup(t *testing.T) {
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "db"}}
	b.Default()
	moved := b.DeepCopy()
	moved.Spec.Cluster = "other"
	_, err := (&MySQLBackupValidator{}).ValidateUpdate(t.Context(), b, moved)
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("changing a backup's cluster must be refused, got %v", err)
	}
}

func TestARecoveryTargetOutsideTheWindowIsRefusedWithTheWindow(t *testing.T) {
	at := func(h, m int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 12, 2, h, m, 0, 0, time.UTC)} }
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
		Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "shop"}, Status: mysqlv1beta1.MySQLBackupStatus{CompletedAt: at(2, 0)}}
	source := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}}
	source.Status.Backup.FirstRecoverableTime, source.Status.Backup.LastRecoverableTime = at(1, 0), at(5, 0)
	s := runtime.NewScheme()
	if err := mysqlv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	v := &MySQLClusterValidator{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(b, source).Build()}
	for _, tc := range []struct {
		name            string
		backup          string
		target          *metav1.Time
		refused, warned string
	}{
		{name: "inside", backup: "nightly", target: at(3, 0)},
		{name: "before the backup", backup: "nightly", target: at(1, 30), refused: "before MySQLBackup nightly completed (2026-12-02T02:00:00Z)"},
		{name: "after the window", backup: "nightly", target: at(6, 0),
			refused: "outside the window MySQLCluster shop can recover to: 2026-12-02T01:00:00Z to 2026-12-02T05:00:00Z"},
		{name: "no such backup yet", backup: "later", target: at(6, 0), warned: "checked when the restore runs"},
		{name: "stored backups", target: at(6, 0), warned: "checked when the restore runs, against the stored backups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
			c.Spec.Instances = new(int32(1))
			c.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: tc.backup, TargetTime: tc.target}}
			if tc.backup == "" {
				c.Spec.Bootstrap.FromBackup.Source = &mysqlv1beta1.BackupSource{Cluster: "shop", S3: mysqlv1beta1.S3Target{Bucket: "b",
					CredentialsSecret: corev1.LocalObjectReference{Name: "s3"}}}
			}
			c.Default()
			warnings, err := v.ValidateCreate(t.Context(), c)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) ||
				!strings.Contains(err.Error(), "spec.bootstrap.fromBackup.targetTime")):
				t.Fatalf("want refused with %q, got %v", tc.refused, err)
			}
			if got := strings.Join(warnings, "; "); !strings.Contains(got, tc.warned) || (tc.warned == "" && got != "") {
				t.Errorf("warnings %q, want %q", got, tc.warned)
			}
		})
	}
}

// TestUnpinningAReleaseThatWouldRunAnOlderOneIsRefused: the operator's 9.7 image is 9.7.3,
// so moving a cluster running 9.7.4 from "9.7.4" back to "9.7" would downgrade it.
func TestUnpinningAReleaseThatWouldRunAnOlderOneIsRefused(t *testing.T) {
	env := map[string]string{"RELATED_IMAGE_MYSQL_9_7": "registry.local/mysql:9.7.3"}
	v := &MySQLClusterValidator{Images: resources.ImagesFromEnv(func(k string) string { return env[k] })}
	old := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	old.Spec.Instances = new(int32(3))
	old.Default()
	old.Spec.MySQL.Version, old.Status.Version = "9.7.4", "9.7.4"
	for _, tc := range []struct {
		version, image, refused string
	}{
		{"9.7", "", "spec.mysql.version"},
		{"9.7.2", "", "spec.mysql.version"},
		{"9.7.4", "mine/mysql:9.7.1", "spec.mysql.image"},
		{"9.7.5", "", ""},
		{"9.7", "mine/mysql@sha256:abc", ""},
	} {
		c := old.DeepCopy()
		c.Spec.MySQL.Version, c.Spec.MySQL.Image = tc.version, tc.image
		_, err := v.ValidateUpdate(t.Context(), old, c)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s %s: refused: %v", tc.version, tc.image, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "cannot downgrade")):
			t.Errorf("%s %s: want a refusal naming %s, got %v", tc.version, tc.image, tc.refused, err)
		}
	}

	// A spec that already resolves older (the operator's image went back) takes changes
	// that leave the release as it is.
	stale := old.DeepCopy()
	stale.Spec.MySQL.Version = "9.7"
	scaled := stale.DeepCopy()
	scaled.Spec.Instances = new(int32(5))
	if _, err := v.ValidateUpdate(t.Context(), stale, scaled); err != nil {
		t.Errorf("a change that keeps the release was refused: %v", err)
	}
}

func TestOperationAnnotationsMustNameInstances(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Spec.Instances = new(int32(3))
	c.Default()
	fenced := c.DeepCopy()
	fenced.Annotations = map[string]string{mysqlv1beta1.AnnotationFencedInstances: "db-2, db-1,db-2", mysqlv1beta1.AnnotationFailover: "db-0"}
	if _, err := (&MySQLClusterValidator{}).ValidateUpdate(t.Context(), c, fenced); err != nil {
		t.Fatalf("instances of the cluster must be accepted: %v", err)
	}
	if got := fenced.FencedInstances(); strings.Join(got, " ") != "db-2 db-1" {
		t.Errorf("FencedInstances = %q, want db-2 then db-1 once each", got)
	}
	bad := c.DeepCopy()
	bad.Annotations = map[string]string{mysqlv1beta1.AnnotationFencedInstances: "db-1,db-3", mysqlv1beta1.AnnotationFailover: "other-0"}
	_, err := (&MySQLClusterValidator{}).ValidateUpdate(t.Context(), c, bad)
	for _, want := range []string{`metadata.annotations[mysql.dolphin-operator.io/fenced-instances]: Invalid value: "db-1,db-3": "db-3" is not an instance of this cluster (db-0 to db-2)`,
		`metadata.annotations[mysql.dolphin-operator.io/failover]: Invalid value: "other-0": must name the primary to replace`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %s, got %v", want, err)
		}
	}
	// A scale-down that would leave a fenced instance behind is refused until it is unfenced.
	smaller := fenced.DeepCopy()
	smaller.Spec.Instances = new(int32(2))
	if _, err := (&MySQLClusterValidator{}).ValidateCreate(t.Context(), smaller); err == nil || !strings.Contains(err.Error(), `"db-2" is not an instance`) {
		t.Errorf("a fenced instance beyond spec.instances must be refused, got %v", err)
	}
}

// auditLines captures the audit lines written while the test runs.
func auditLines(t *testing.T) *[]string {
	t.Helper()
	var lines []string
	was := AuditLog
	AuditLog = funcr.NewJSON(func(obj string) { lines = append(lines, obj) }, funcr.Options{})
	t.Cleanup(func() { AuditLog = was })
	return &lines
}

func asUser(t *testing.T, op admissionv1.Operation, user string, groups ...string) context.Context {
	return admission.NewContextWithRequest(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req-1", Operation: op, UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}}})
}

func TestEveryDecisionIsAuditedWithItsUserAndTheFieldsItChanges(t *testing.T) {
	lines := auditLines(t)
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Spec.Instances = new(int32(3))
	c.Default()
	v := &MySQLClusterValidator{}
	_, err := v.ValidateCreate(asUser(t, admissionv1.Create, "alice", "dba", "system:authenticated"), c)
	require.NoError(t, err)

	changed := c.DeepCopy()
	changed.Spec.Primary = "db-1"
	changed.Spec.MySQL.Config = map[string]string{"max_connections": "500"}
	changed.Annotations = map[string]string{mysqlv1beta1.AnnotationFencedInstances: "db-2"}
	changed.Status.CurrentPrimary = "db-1" // not audited: status does not pass the webhook
	_, err = v.ValidateUpdate(asUser(t, admissionv1.Update, "bob"), c, changed)
	require.NoError(t, err)

	shrunk := c.DeepCopy()
	shrunk.Spec.Instances = new(int32(0))
	_, err = v.ValidateUpdate(asUser(t, admissionv1.Update, "mallory"), c, shrunk)
	require.Error(t, err)

	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "db"}}
	b.Default()
	_, err = (&MySQLBackupValidator{}).ValidateCreate(asUser(t, admissionv1.Create, "system:serviceaccount:ns:cron"), b)
	require.NoError(t, err)

	_, err = v.ValidateDelete(asUser(t, admissionv1.Delete, "carol"), c)
	require.NoError(t, err)
	_, err = (&MySQLBackupValidator{}).ValidateDelete(asUser(t, admissionv1.Delete, "carol"), b)
	require.NoError(t, err)

	require.Len(t, *lines, 6, "one line per decision: %v", *lines)
	decoded := make([]map[string]any, len(*lines))
	for i, l := range *lines {
		require.NoError(t, json.Unmarshal([]byte(l), &decoded[i]), l)
		require.Equal(t, "admission-audit", decoded[i]["logger"], l)
		require.Equal(t, "Admission decision", decoded[i]["msg"], l)
		require.Equal(t, "req-1", decoded[i]["uid"], l)
	}
	require.Equal(t, map[string]any{"kind": "MySQLCluster", "namespace": "ns", "name": "db", "allowed": true, "operation": "CREATE",
		"user": "alice", "groups": []any{"dba", "system:authenticated"}}, pick(decoded[0], "kind", "namespace", "name", "allowed",
		"operation", "user", "groups"))
	require.NotContains(t, decoded[0], "changed")
	require.Equal(t, []any{"metadata.annotations[mysql.dolphin-operator.io/fenced-instances]", "spec.mysql.config.max_connections",
		"spec.primary"}, decoded[1]["changed"])
	require.Equal(t, "bob", decoded[1]["user"])
	require.Equal(t, false, decoded[2]["allowed"])
	require.Equal(t, []any{"spec.instances"}, decoded[2]["changed"])
	require.Contains(t, decoded[2]["reason"], "spec.instances")
	require.Equal(t, "MySQLBackup", decoded[3]["kind"])
	require.Equal(t, "system:serviceaccount:ns:cron", decoded[3]["user"])
	for k, kind := range []string{"MySQLCluster", "MySQLBackup"} {
		d := decoded[4+k]
		require.Equal(t, map[string]any{"kind": kind, "allowed": true, "operation": "DELETE", "user": "carol"},
			pick(d, "kind", "allowed", "operation", "user"))
		require.NotContains(t, d, "changed")
	}
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestTheDefaulterGivesOnlyANewClusterTheFinalizer(t *testing.T) {
	admit := func(op admissionv1.Operation, finalizers ...string) []string {
		c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Finalizers: finalizers}}
		ctx := t.Context()
		if op != "" {
			ctx = admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}})
		}
		require.NoError(t, (&MySQLClusterDefaulter{}).Default(ctx, c))
		require.NotEmpty(t, c.Spec.MySQL.Version, "the spec is defaulted whatever the operation")
		return c.Finalizers
	}
	require.Equal(t, []string{mysqlv1beta1.ClusterFinalizer}, admit(admissionv1.Create), "a created cluster carries the finalizer")
	require.Equal(t, []string{"other", mysqlv1beta1.ClusterFinalizer}, admit(admissionv1.Create, "other"),
		"another's finalizer stays beside it")
	require.Equal(t, []string{mysqlv1beta1.ClusterFinalizer}, admit(admissionv1.Create, mysqlv1beta1.ClusterFinalizer),
		"a finalizer already there is not repeated")
	require.Empty(t, admit(admissionv1.Update), "an update does not put back a finalizer that was removed")
	require.Empty(t, admit(""), "without an admission request nothing says it is a create")
}
