package cli

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// fakeLogs answers each container's log by "namespace/pod/container".
type fakeLogs map[string]string

func (f fakeLogs) Logs(_ context.Context, ns, pod, container string, previous bool, _ int64) ([]byte, error) {
	key := ns + "/" + pod + "/" + container
	if previous {
		key += "/previous"
	}
	l, ok := f[key]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods/log"}, pod)
	}
	return []byte(l), nil
}

// untar reads a report into file name → content.
func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = string(b)
	}
}

func TestReportHoldsTheClusterAndNoSecretValue(t *testing.T) {
	const password, s3key = "Zq8#generated-root-password-41", "AKIAs3-secret-access-key-77"
	objs, sql := degradedWorld()
	c := objs[0].(*mysqlv1beta1.MySQLCluster)
	c.Spec.Backup = &mysqlv1beta1.BackupSpec{Target: &mysqlv1beta1.BackupTarget{S3: &mysqlv1beta1.S3Target{Bucket: "b",
		CredentialsSecret: corev1.LocalObjectReference{Name: "s3-creds"}}}}
	labels := resources.Labels(c, resources.ComponentDatabase)
	objs = append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.CredentialsSecretName(c), Labels: labels},
			Data: map[string][]byte{resources.KeyRootPassword: []byte(password)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s3-creds"},
			Data: map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte(s3key)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.ConfigMapName(c), Labels: labels},
			Data: map[string]string{"my.cnf": "[mysqld]\ngtid_mode=ON\n"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-instances", Labels: labels},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.PrimaryLeaseName(c)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("db-0")}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"}, Reason: "Switchover",
			InvolvedObject: corev1.ObjectReference{Kind: "MySQLCluster", Name: "db", Namespace: "ns"}, Message: "db-0 is the primary"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e2"}, Reason: "Killing",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "someone-else", Namespace: "ns"}, Message: "not ours"},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "dolphin-system", Name: "dolphin-controller-manager-abc",
			Labels: map[string]string{"app.kubernetes.io/name": "dolphin-operator"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager"}}}},
	)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "db-1" {
			p.Status.ContainerStatuses[0].RestartCount = 1
		}
	}
	h := newHarness(t, sql, nil, objs...)
	h.o.logs = fakeLogs{
		"ns/db-0/mysqld":          "2026-12-05T11:00:00Z [System] ready for connections\n",
		"ns/db-1/mysqld":          "mysqld started; root password is " + password + "\n",
		"ns/db-1/mysqld/previous": "before the restart: " + base64.StdEncoding.EncodeToString([]byte(password)) + "\n",
		"dolphin-system/dolphin-controller-manager-abc/manager": `{"msg":"Topology","MySQLCluster":"ns/db","state":"Healthy"}` + "\n" +
			`{"msg":"Topology","MySQLCluster":"ns/other","state":"Healthy"}` + "\n" +
			`{"msg":"Reconciler error","MySQLCluster":{"name":"db","namespace":"ns"},"error":"s3: ` + s3key + `"}` + "\n",
	}
	out := filepath.Join(t.TempDir(), "r.tar.gz")
	require.Equal(t, ExitOK, h.run("report", "db", "-f", out), h.err.String())
	require.Contains(t, h.out.String(), "Wrote "+out)

	files := untar(t, out)
	var all strings.Builder
	for name, data := range files {
		all.WriteString(name + "\n" + data)
	}
	for _, secret := range []string{password, s3key, base64.StdEncoding.EncodeToString([]byte(password))} {
		require.NotContains(t, all.String(), secret, "the report holds no Secret value")
	}
	get := func(name string) string {
		t.Helper()
		data, ok := files["r/"+name]
		require.True(t, ok, "%s in the report; it has %v", name, keys(files))
		return data
	}
	require.Contains(t, get("cluster/db.yaml"), "kind: MySQLCluster")
	require.Contains(t, get("secrets/db-credentials.yaml"), "REDACTED (30 bytes)")
	require.Contains(t, get("configmaps/db-config.yaml"), "gtid_mode=ON")
	require.Contains(t, get("lease/db-primary.yaml"), "holderIdentity: db-0")
	require.Contains(t, get("networkpolicies/db-instances.yaml"), "kind: NetworkPolicy")
	require.Contains(t, get("pods/db-0.yaml"), "kind: Pod")
	require.Contains(t, get("logs/db-0/mysqld.log"), "ready for connections")
	require.Equal(t, "mysqld started; root password is REDACTED\n", get("logs/db-1/mysqld.log"))
	require.Equal(t, "before the restart: REDACTED\n", get("logs/db-1/mysqld.previous.log"))
	require.Contains(t, get("events.yaml"), "db-0 is the primary")
	require.NotContains(t, get("events.yaml"), "not ours")
	op := get("operator/dolphin-system/dolphin-controller-manager-abc/manager.log")
	require.Contains(t, op, `"MySQLCluster":"ns/db"`)
	require.Contains(t, op, `"error":"s3: REDACTED"`)
	require.NotContains(t, op, "ns/other")
	require.Contains(t, get("status.txt"), "INSTANCE  ROLE")
	require.Contains(t, get("MANIFEST.txt"), "logs/db-2/mysqld.log: pods/log db-2 not found in namespace ns",
		"what could not be read is listed")
}

func TestReportOfAMissingClusterWritesNothing(t *testing.T) {
	h := newHarness(t, fakeSQL{}, nil)
	h.o.logs = fakeLogs{}
	out := filepath.Join(t.TempDir(), "r.tar.gz")
	require.Equal(t, ExitNotFound, h.run("report", "nope", "-f", out))
	require.NoFileExists(t, out)
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
