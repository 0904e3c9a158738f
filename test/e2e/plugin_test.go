package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/cli"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// plugin runs bin/kubectl-dolphin (make plugin) against the ground, as its admin unless
// args say otherwise (--as), and returns its exit code, stdout and stderr.
func plugin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return pluginIn(t, "", args...)
}

// pluginIn runs the plugin as plugin does, with stdin as its standard input.
func pluginIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(ground.RepoRoot(), "bin", "kubectl-dolphin"),
		append([]string{"--kubeconfig", g.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running kubectl-dolphin %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// Normalisers of what differs from run to run: the namespace, GTID sets (server UUIDs and
// counts), times, ages, node names.
var (
	gtidSet   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9:,-]+`)
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	age       = regexp.MustCompile(`\b\d+(d|h|m|s)(\d+(h|m|s))?\b`)
	nodeName  = regexp.MustCompile(`\bnode-?\d+\b`)
	columns   = regexp.MustCompile(` {2,}`)
)

func normalize(s, ns string) string {
	s = strings.ReplaceAll(s, ns, "NS")
	s = gtidSet.ReplaceAllString(s, "GTIDS")
	s = timestamp.ReplaceAllString(s, "TIME")
	s = age.ReplaceAllString(s, "AGE")
	return nodeName.ReplaceAllString(s, "NODE")
}

// normalizeTable normalizes a table and its column widths, which follow what normalize
// replaces.
func normalizeTable(s, ns string) string { return columns.ReplaceAllString(normalize(s, ns), "  ") }

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./test/e2e -run %s -update writes it", t.Name())
	require.Equal(t, string(want), got)
}

// TestPluginShowsSwitchesOverAndReportsACluster drives a two-instance cluster with
// kubectl-dolphin: status (table and JSON, against golden files), a switchover, a backup
// and a new cluster from the manifest restore prints, a report that holds none of the
// cluster's passwords, and the errors of a missing cluster and of a
// user RBAC does not let patch clusters or exec into pods.
func TestPluginShowsSwitchesOverAndReportsACluster(t *testing.T) {
	ground.Level(t, ground.Full)
	ns := namespace(t)
	c, _ := readyPair(t, ns, "cli")
	_, err := dbOf(t, ns, "cli-0").Exec("CREATE DATABASE plugin")
	require.NoError(t, err)

	var r cli.Report
	waitFor(t, time.Minute, "the replica to have applied the primary's transactions, as status says", func() error {
		code, out, errOut := plugin(t, "-n", ns, "status", "cli", "-o", "json")
		if code != cli.ExitOK {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		r = cli.Report{}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return err
		}
		if len(r.Members) != 2 || r.Members[1].Behind == nil || *r.Members[1].Behind != 0 || r.Ready != "True" {
			return fmt.Errorf("not caught up: %s", out)
		}
		return nil
	})
	require.Equal(t, "cli-0", r.Primary)
	p, rep := r.Members[0], r.Members[1]
	require.Equal(t, "primary", p.Role)
	require.NotNil(t, p.SQL, p.SQLError)
	require.True(t, p.SQL.SemiSyncSource)
	require.Equal(t, 1, p.SQL.SemiSyncClients)
	require.False(t, p.SQL.SuperReadOnly)
	require.Equal(t, "replica", rep.Role)
	require.NotNil(t, rep.SQL, rep.SQLError)
	require.Equal(t, ground.InstanceHost(ns, "cli", "cli-0"), rep.SQL.Source)
	require.Equal(t, "ON", rep.SQL.IOThread)
	require.Equal(t, "ON", rep.SQL.SQLThread)
	require.True(t, rep.SQL.SemiSyncReplica)
	require.True(t, rep.SQL.SuperReadOnly)
	require.Zero(t, *rep.Errant)
	require.Equal(t, p.SQL.GTIDExecuted, rep.SQL.GTIDExecuted)

	code, out, errOut := plugin(t, "-n", ns, "status", "cli")
	require.Equal(t, cli.ExitOK, code, errOut)
	golden(t, "plugin-status.txt", normalizeTable(out, ns))
	_, out, _ = plugin(t, "-n", ns, "status", "cli", "-o", "json")
	golden(t, "plugin-status.json", normalize(out, ns))
	code, out, errOut = plugin(t, "-n", ns, "status")
	require.Equal(t, cli.ExitOK, code, errOut)
	golden(t, "plugin-list.txt", normalizeTable(out, ns))

	code, out, errOut = plugin(t, "-n", ns, "switchover", "cli", "--to", "cli-1", "--timeout", "3m")
	t.Logf("switchover:\n%s%s", out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Regexp(t, `The operator reports: cli-1 is the primary: switching over from cli-0 to cli-1; writes were refused for \S+ `+
		`\(from fencing cli-0 until cli-1 was promoted and labelled primary\)`, out)
	waitPrimary(t, ns, "cli", "cli-1")

	requireMySQLSession(t, ns)
	requireBackupAndRestore(t, c)
	requireReportHoldsNoSecret(t, c)
	requireFenceAndManualFailover(t, ns)
	requirePluginErrors(t, ns)
	requireDeletionRemovesEverything(t, c)
}

// requireMySQLSession runs the client through the plugin on the primary (cli-1 since the
// switchover) and on an instance named, with -e and with statements on stdin, and an SQL
// error's exit.
func requireMySQLSession(t *testing.T, ns string) {
	t.Helper()
	code, out, errOut := plugin(t, "-n", ns, "mysql", "cli", "--", "-N", "-e", "SELECT @@hostname, @@super_read_only")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Equal(t, "cli-1\t0\n", out)
	code, out, errOut = pluginIn(t, "SELECT @@hostname, @@super_read_only;\nSHOW DATABASES LIKE 'plugin';\n",
		"-n", ns, "mysql", "cli", "--instance", "cli-0", "--", "-N")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Equal(t, "cli-0\t1\nplugin\n", out)
	code, _, errOut = plugin(t, "-n", ns, "mysql", "cli", "--", "-e", "SELECT * FROM plugin.nothing")
	require.Equal(t, cli.ExitFailed, code)
	require.Contains(t, errOut, "ERROR 1146")
	require.Contains(t, errOut, "the mysql client in cli-1 exited with 1")
}

// requireBackupAndRestore backs the cluster up with the plugin to a volume the operator
// makes, then creates the cluster `restore` prints (one instance, as a user may edit it)
// and finds the database written before the backup in it.
func requireBackupAndRestore(t *testing.T, c *mysqlv1beta1.MySQLCluster) {
	t.Helper()
	ctx := context.Background()
	cur := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), cur))
	patch := client.MergeFrom(cur.DeepCopy())
	// No schedule (suspended): only the backups asked for, to the target.
	cur.Spec.Backup = &mysqlv1beta1.BackupSpec{Suspend: true, Target: &mysqlv1beta1.BackupTarget{
		PVC: &mysqlv1beta1.PVCTarget{Size: new(resourceQuantity("200Mi"))}}}
	require.NoError(t, k8s.Patch(ctx, cur, patch))

	code, out, errOut := plugin(t, "-n", c.Namespace, "backup", c.Name, "--name", "cli-now", "--method", "Logical", "--timeout", "4m")
	t.Logf("backup:\n%s%s", out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	b := &mysqlv1beta1.MySQLBackup{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "cli-now"}, b))
	require.Equal(t, mysqlv1beta1.BackupPhaseCompleted, b.Status.Phase)
	require.Contains(t, out, "Backup "+c.Namespace+"/cli-now Completed in ")
	require.Contains(t, out, "Location: "+b.Status.Location)
	require.Contains(t, out, "GTID set: "+b.Status.GTIDSet)

	code, out, errOut = plugin(t, "-n", c.Namespace, "restore", "cli-copy", "--backup", "cli-now")
	require.Equal(t, cli.ExitOK, code, errOut)
	restored := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), restored), out)
	require.Equal(t, "cli-now", restored.Spec.Bootstrap.FromBackup.Name)
	restored.Spec.Instances = new(int32(1))
	require.NoError(t, k8s.Create(ctx, restored))
	readyCluster(t, c.Namespace, "cli-copy")
	var found string
	require.NoError(t, dbOf(t, c.Namespace, "cli-copy-0").QueryRowContext(ctx, "SHOW DATABASES LIKE 'plugin'").Scan(&found))
	require.Equal(t, "plugin", found)
	// Backups outlive their cluster (docs/backup.md): the backup, its Job and pod go with
	// the MySQLBackup, before the cluster's deletion is checked.
	require.NoError(t, k8s.Delete(ctx, restored))
	require.NoError(t, k8s.Delete(ctx, b))
	waitFor(t, 2*time.Minute, "the restored cluster and the backup to be gone", func() error {
		for _, obj := range []client.Object{restored, b} {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there (%w)", obj.GetName(), err)
			}
		}
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, c.Name+"-0") && !strings.HasPrefix(p.Name, c.Name+"-1") {
				return fmt.Errorf("pod %s still there", p.Name)
			}
		}
		return nil
	})
}

// requireReportHoldsNoSecret writes a report of the cluster and greps every file of it for
// each value of the cluster's credentials Secret.
func requireReportHoldsNoSecret(t *testing.T, c *mysqlv1beta1.MySQLCluster) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "report.tar.gz")
	code, out, errOut := plugin(t, "-n", c.Namespace, "report", c.Name, "-f", file)
	require.Equal(t, cli.ExitOK, code, errOut)
	t.Logf("report: %s", out)
	files := map[string]string{}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[strings.TrimPrefix(h.Name, "report/")] = string(b)
	}
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.CredentialsSecretName(c)}, secret))
	require.NotEmpty(t, secret.Data)
	for name, data := range files {
		for key, v := range secret.Data {
			require.NotContains(t, data, string(v), "%s holds the value of %s", name, key)
		}
	}
	require.Contains(t, files["status.txt"], "INSTANCE")
	require.NotEmpty(t, files["logs/cli-0/mysqld.log"])
	require.Contains(t, files["events.yaml"], "reason: Switchover", "the switchover's Event")
	var operatorLines string
	for name, data := range files {
		if strings.HasPrefix(name, "operator/") {
			operatorLines += data
		}
	}
	require.Contains(t, operatorLines, `"`+c.Namespace+`/`+c.Name+`"`, "the operator's lines about the cluster")
	t.Logf("MANIFEST.txt:\n%s", files["MANIFEST.txt"])
}

// requirePluginErrors checks the words and exit codes of a missing cluster and of a user
// who may read clusters and pods but not patch clusters nor exec into pods.
func requirePluginErrors(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	code, _, errOut := plugin(t, "-n", ns, "status", "nope")
	require.Equal(t, cli.ExitNotFound, code)
	require.Equal(t, fmt.Sprintf("Error: MySQLCluster \"nope\" not found in namespace %s\n", ns), errOut)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{mysqlv1beta1.GroupVersion.Group}, Resources: []string{"mysqlclusters"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "viewer"}}}
	for _, o := range []client.Object{sa, role, binding} {
		require.NoError(t, k8s.Create(ctx, o))
	}
	as := "--as=system:serviceaccount:" + ns + ":viewer"
	code, _, errOut = plugin(t, "-n", ns, as, "switchover", "cli", "--to", "cli-0")
	require.Equal(t, cli.ExitForbidden, code, errOut)
	require.Contains(t, errOut, fmt.Sprintf(`refused: you may not patch mysqlclusters cli in namespace %s (RBAC: grant the verb "patch" on "mysqlclusters")`, ns))

	code, out, errOut := plugin(t, "-n", ns, as, "status", "cli")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, `cli-0: not read: pods/exec refused (RBAC: grant "create" on "pods/exec")`)
}
