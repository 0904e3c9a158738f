package cli

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// backupOperator stands in for the operator's backup controller: each read of a backup
// moves it one phase on, to Completed or, with fail, Failed.
func backupOperator(fail bool) *interceptor.Funcs {
	var n atomic.Int32
	return &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		b, ok := obj.(*mysqlv1beta1.MySQLBackup)
		if !ok {
			return nil
		}
		switch n.Add(1) {
		case 2:
			b.Status.Phase = mysqlv1beta1.BackupPhasePending
		case 3:
			b.Status.Phase, b.Status.StartedAt = mysqlv1beta1.BackupPhaseRunning, at(time.Second)
		case 5:
			if fail {
				b.Status.Phase = mysqlv1beta1.BackupPhaseFailed
				b.Status.Conditions = []metav1.Condition{{Type: mysqlv1beta1.BackupConditionFailed, Status: metav1.ConditionTrue,
					Reason: "StoreUnreachable", Message: "the bucket answered 403 Forbidden"}}
				break
			}
			size := resource.MustParse("1536Mi")
			b.Status = mysqlv1beta1.MySQLBackupStatus{Phase: mysqlv1beta1.BackupPhaseCompleted, StartedAt: at(time.Second),
				CompletedAt: at(83 * time.Second), Method: mysqlv1beta1.BackupMethodPhysical, Source: "db-1",
				Location: "s3://backups/ns/db/base/" + b.Name, Size: &size, SHA256: "9f2c", GTIDSet: uuid + ":1-42",
				MySQLVersion: "9.7.4", Conditions: []metav1.Condition{{Type: mysqlv1beta1.BackupConditionComplete,
					Status: metav1.ConditionTrue, Reason: "Completed", Message: "1.5 GiB in 82s"}}}
		default:
			return nil
		}
		return c.Update(ctx, b)
	}}
}

func TestBackupCreatesAMySQLBackupAndWaitsForItsResult(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, backupOperator(false), objs...)
	h.o.now = ticking()
	require.Equal(t, ExitOK, h.run("backup", "db", "--method", "Physical"), h.err.String())
	golden(t, "backup.txt", h.out.String())
	b := &mysqlv1beta1.MySQLBackup{}
	require.NoError(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-20261205-120000"}, b))
	require.Equal(t, "db", b.Spec.Cluster)
	require.Equal(t, mysqlv1beta1.BackupMethodPhysical, b.Spec.Method)

	// The same name again is refused; another name is taken.
	h = newHarness(t, sql, backupOperator(false), append(objs, b)...)
	require.Equal(t, ExitRefused, h.run("backup", "db", "--name", b.Name))
	require.Contains(t, h.err.String(), "exists in ns already")
}

func TestBackupThatFailsExitsOneWithTheOperatorsReason(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, backupOperator(true), objs...)
	require.Equal(t, ExitFailed, h.run("backup", "db", "--name", "nightly"))
	require.Contains(t, h.err.String(), "backup ns/nightly failed (StoreUnreachable: the bucket answered 403 Forbidden)")
}

func TestBackupUsageAndAnOperatorThatDoesNotAnswer(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	require.Equal(t, ExitUsage, h.run("backup", "db", "--method", "Snapshot"))
	require.Contains(t, h.err.String(), `--method "Snapshot": want Physical or Logical`)
	require.Equal(t, ExitNotFound, h.run("backup", "nope"))

	h.o.now = ticking()
	require.Equal(t, ExitTimeout, h.run("backup", "db", "--name", "unseen"))
	require.Contains(t, h.err.String(), "the operator has not taken it up in 30s (no status.phase): is it running?")
	h.err.Reset()
	require.Equal(t, ExitOK, h.run("backup", "db", "--name", "nowait", "--wait=false"), h.err.String())
}

func completedBackup(name, cluster string) *mysqlv1beta1.MySQLBackup {
	return &mysqlv1beta1.MySQLBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       mysqlv1beta1.MySQLBackupSpec{Cluster: cluster},
		Status: mysqlv1beta1.MySQLBackupStatus{Phase: mysqlv1beta1.BackupPhaseCompleted, MySQLVersion: "9.7.4",
			GTIDSet: uuid + ":1-42"},
	}
}

func TestRestorePrintsANewClusterFromTheBackupsCluster(t *testing.T) {
	objs, sql := degradedWorld()
	c := objs[0].(*mysqlv1beta1.MySQLCluster)
	c.Spec.Primary, c.Spec.Paused = "db-1", true
	c.Spec.MySQL.Version = "9.7"
	c.Spec.Storage.Size = new(resource.MustParse("50Gi"))
	h := newHarness(t, sql, nil, append(objs, completedBackup("nightly", "db"))...)
	require.Equal(t, ExitOK, h.run("restore", "db-copy", "--backup", "nightly", "--target-time", "2026-12-05T10:30:00Z"), h.err.String())
	golden(t, "restore.yaml", h.out.String())
	got := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, yaml.UnmarshalStrict(h.out.Bytes(), got))
	require.Equal(t, "db-copy", got.Name)
	require.Empty(t, got.Spec.Primary, "the new cluster picks its own primary")
	require.False(t, got.Spec.Paused)
	require.Equal(t, c.Spec.Storage.Size, got.Spec.Storage.Size)
	require.Equal(t, "nightly", got.Spec.Bootstrap.FromBackup.Name)
	require.Equal(t, time.Date(2026, 12, 5, 10, 30, 0, 0, time.UTC), got.Spec.Bootstrap.FromBackup.TargetTime.UTC())
	require.Nil(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, &mysqlv1beta1.MySQLCluster{}))
	require.Error(t, h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-copy"}, &mysqlv1beta1.MySQLCluster{}),
		"restore only prints")

	// The backup's cluster gone: its MySQL series and the defaults; JSON on request.
	h = newHarness(t, sql, nil, completedBackup("old", "gone"))
	require.Equal(t, ExitOK, h.run("restore", "back", "--backup", "old", "--target-gtid", uuid+":40", "-o", "json"), h.err.String())
	require.Contains(t, h.err.String(), "Cluster gone is gone")
	golden(t, "restore-gone.json", h.out.String())
}

func TestRestoreRefusals(t *testing.T) {
	objs, sql := degradedWorld()
	running := completedBackup("running", "db")
	running.Status.Phase = mysqlv1beta1.BackupPhaseRunning
	h := newHarness(t, sql, nil, append(objs, completedBackup("nightly", "db"), running)...)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore", "x"}, ExitUsage, "--backup: name the MySQLBackup"},
		{[]string{"restore", "x", "--backup", "nightly", "--target-time", "yesterday"}, ExitUsage, "want RFC 3339"},
		{[]string{"restore", "x", "--backup", "nightly", "--target-gtid", "42"}, ExitUsage, "<server uuid>:<number>"},
		{[]string{"restore", "x", "--backup", "nightly", "--target-gtid", uuid + ":4", "--target-time", "2026-12-05T10:30:00Z"}, ExitUsage, "at most one"},
		{[]string{"restore", "x", "--backup", "missing"}, ExitNotFound, "mysqlbackups missing not found"},
		{[]string{"restore", "x", "--backup", "running"}, ExitRefused, `is "Running", not Completed`},
		{[]string{"restore", "db", "--backup", "nightly"}, ExitRefused, "the backup's own cluster"},
	} {
		h.err.Reset()
		require.Equal(t, c.code, h.run(c.args...), "%v: %s", c.args, h.err.String())
		require.Contains(t, h.err.String(), c.want, "%v", c.args)
	}
}

// fakeShell records the session asked for and answers with err.
type fakeShell struct {
	pod  string
	args []string
	tty  bool
	err  error
}

func (f *fakeShell) Client(_ context.Context, pod *corev1.Pod, args []string, _ genericiooptions.IOStreams, tty bool) error {
	f.pod, f.args, f.tty = pod.Name, args, tty
	return f.err
}

func TestMySQLOpensTheClientOnThePrimaryOrTheInstanceNamed(t *testing.T) {
	objs, sql := degradedWorld()
	h := newHarness(t, sql, nil, objs...)
	shell := &fakeShell{}
	h.o.shell = shell
	require.Equal(t, ExitOK, h.run("mysql", "db", "--", "-e", "SELECT 1"), h.err.String())
	require.Equal(t, "db-0", shell.pod)
	require.Equal(t, []string{"-e", "SELECT 1"}, shell.args)
	require.False(t, shell.tty, "not a terminal")

	require.Equal(t, ExitOK, h.run("mysql", "db", "--instance", "db-1"), h.err.String())
	require.Equal(t, "db-1", shell.pod)
	require.Empty(t, shell.args)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mysql", "db", "extra"}, ExitUsage, "after --"},
		{[]string{"mysql", "db", "--instance", "db-7"}, ExitNotFound, `"db-7" is not an instance of db`},
		{[]string{"mysql", "nope"}, ExitNotFound, "not found"},
	} {
		h.err.Reset()
		require.Equal(t, c.code, h.run(c.args...), "%v: %s", c.args, h.err.String())
		require.Contains(t, h.err.String(), c.want)
	}

	// The client's failure (it printed why), and an exec RBAC refuses.
	shell.err = utilexec.CodeExitError{Err: errors.New("command terminated with exit code 1"), Code: 1}
	h.err.Reset()
	require.Equal(t, ExitFailed, h.run("mysql", "db", "--", "-e", "SELECT nope"))
	require.Contains(t, h.err.String(), "the mysql client in db-0 exited with 1")
	shell.err = errors.New(`unable to upgrade connection: pods "db-0" is forbidden: User "dev" cannot create resource "pods/exec"`)
	require.Equal(t, ExitForbidden, h.run("mysql", "db"))
	require.Contains(t, h.err.String(), `grant the verb "create" on "pods/exec"`)

	// No primary known, and a primary whose pod is not running.
	objs, sql = degradedWorld()
	objs[0].(*mysqlv1beta1.MySQLCluster).Status.CurrentPrimary = ""
	h = newHarness(t, sql, nil, objs...)
	h.o.shell = shell
	require.Equal(t, ExitRefused, h.run("mysql", "db"))
	objs, sql = degradedWorld()
	objs[1].(*corev1.Pod).Status.Phase = corev1.PodPending
	h = newHarness(t, sql, nil, objs...)
	h.o.shell = shell
	require.Equal(t, ExitRefused, h.run("mysql", "db"))
	require.Contains(t, h.err.String(), "db-0 is Pending")
}
