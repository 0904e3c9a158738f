package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// myCnfChecked are my.cnf settings whose value SHOW VARIABLES must show as written (the
// rest are paths and plugin lists MySQL reports in other forms, or change at run time).
var myCnfChecked = []string{"gtid_mode", "enforce_gtid_consistency", "log_replica_updates", "relay_log_recovery",
	"require_secure_transport", "rpl_semi_sync_source_wait_point", "sync_binlog", "innodb_flush_log_at_trx_commit",
	"skip_name_resolve", "skip_replica_start", "max_connections"}

// requireRealPod checks that an instance runs as the operator's pod spec says: the init
// container's accounts, my.cnf (the operator's settings and the user's), the identity
// from the pod, readiness after mysqld answered, and the security context in force.
func requireRealPod(t *testing.T, c *mysqlv1beta1.MySQLCluster, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	d := dbOf(t, c.Namespace, pod.Name)
	accounts := column(t, d, "SELECT CONCAT(user, '@', host) FROM mysql.user WHERE user LIKE 'dolphin-%' OR user = 'root' ORDER BY 1")
	require.Equal(t, []string{resources.AdminUser + "@%", resources.BackupUser + "@%", resources.ExporterUser + "@%",
		resources.ProbeUser + "@localhost", resources.ReplicationUser + "@%", resources.UsersUser + "@%", "root@localhost"},
		accounts, "the init container created the accounts, and root on the local socket only")

	cm := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ConfigMapName(c)}, cm))
	written := parseMyCnf(cm.Data[resources.ConfigFileKey])
	require.Equal(t, userMaxConnections, written["max_connections"], "the user's setting is in my.cnf")
	for _, k := range myCnfChecked {
		var value string
		require.NoError(t, d.QueryRowContext(ctx,
			"SELECT VARIABLE_VALUE FROM performance_schema.global_variables WHERE VARIABLE_NAME = ?", k).Scan(&value), k)
		require.Equal(t, normalise(written[k]), normalise(value), "%s on %s: my.cnf says %q", k, pod.Name, written[k])
	}
	var serverID int
	var reportHost string
	require.NoError(t, d.QueryRowContext(ctx, "SELECT @@server_id, @@report_host").Scan(&serverID, &reportHost))
	require.Equal(t, fmt.Sprintf("100%s", pod.Labels["apps.kubernetes.io/pod-index"]), fmt.Sprint(serverID), "server_id from the pod's ordinal")
	require.Equal(t, ground.InstanceHost(c.Namespace, c.Name, pod.Name), reportHost, "report_host is the instance's DNS name")

	requireReadyAfterMysqldAnswered(t, pod)
	requireSecurityContext(t, pod)
	// The pod's DNS options reached the resolver configuration kubelet wrote.
	resolv, err := g.Exec(ctx, pod, "mysqld", "cat", "/etc/resolv.conf")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^options .*\btimeout:1\b`, resolv, "mysqld's name lookups time out after 1 s a try")
	require.Regexp(t, `(?m)^options .*\battempts:2\b`, resolv, "mysqld's name lookups are tried twice")
}

// requireReadyAfterMysqldAnswered compares the pod's Ready transition with the moment its
// mysqld logged "ready for connections": the probes, not the container's start, made it
// Ready.
func requireReadyAfterMysqldAnswered(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(g.RESTConfig())
	require.NoError(t, err)
	logs, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "mysqld"}).DoRaw(context.Background())
	require.NoError(t, err)
	var answered time.Time
	sc := bufio.NewScanner(strings.NewReader(string(logs)))
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "ready for connections") && strings.Contains(line, "port: 3306") {
			answered, err = time.Parse(time.RFC3339Nano, strings.Fields(line)[0])
			require.NoError(t, err, line)
		}
	}
	require.False(t, answered.IsZero(), "mysqld of %s logged no 'ready for connections':\n%s", pod.Name, logs)
	var ready metav1.Time
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			ready = cond.LastTransitionTime
		}
	}
	require.False(t, ready.IsZero(), "%s is Ready", pod.Name)
	// The condition's time has whole seconds.
	require.False(t, ready.Time.Before(answered.Truncate(time.Second)),
		"%s became Ready at %s, before its mysqld answered at %s", pod.Name, ready.Time, answered)
	t.Logf("%s: mysqld answered at %s, pod Ready at %s", pod.Name, answered.Format(time.StampMilli), ready.Format(time.Stamp))
}

// requireSecurityContext checks, inside the running container and on mysqld's process,
// what the pod's security context asks for: uid/gid 999, a read-only root, no
// capabilities, no privilege escalation, the runtime's seccomp filter.
func requireSecurityContext(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	out, err := g.Exec(ctx, pod, "mysqld", "id", "-u")
	require.NoError(t, err)
	require.Equal(t, "999", strings.TrimSpace(out), "mysqld runs as uid 999")
	_, err = g.Exec(ctx, pod, "mysqld", "sh", "-c", "echo x > /written-by-e2e")
	require.ErrorContains(t, err, "Read-only file system", "the root file system is read-only")
	pid, err := g.ProcessPID(pod, "mysqld", "mysqld") // mysqld itself, not the shell that runs it
	require.NoError(t, err)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	status := string(raw)
	fields := map[string]string{}
	for line := range strings.Lines(status) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	require.Equal(t, "2", fields["Seccomp"], "mysqld runs under a seccomp filter (RuntimeDefault)")
	require.Equal(t, "1", fields["NoNewPrivs"], "no privilege escalation")
	require.Equal(t, "0000000000000000", fields["CapEff"], "every capability dropped")
}

// requireKilledMysqldRejoins kills a replica's mysqld with SIGKILL from its node: kubelet
// must restart the container, and the instance must come back as a replica and apply new
// transactions.
func requireKilledMysqldRejoins(t *testing.T, c *mysqlv1beta1.MySQLCluster, name string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod))
	restarts := restartCount(pod, "mysqld")
	require.NoError(t, g.Signal(pod, "mysqld", "mysqld", syscall.SIGKILL))
	killed := time.Now()
	took := waitFor(t, 2*time.Minute, name+"'s mysqld restarted by kubelet and Ready", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if n := restartCount(pod, "mysqld"); n != restarts+1 {
			return fmt.Errorf("%d restarts", n)
		}
		if !podReady(pod) {
			return fmt.Errorf("not Ready")
		}
		return nil
	})
	t.Logf("%s: killed mysqld restarted and Ready %s after the kill", name, took.Round(10*time.Millisecond))
	primary := dbOf(t, c.Namespace, c.Status.CurrentPrimary)
	_, err := primary.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS after_kill")
	require.NoError(t, err)
	replica := dbOf(t, c.Namespace, name)
	waitFor(t, time.Minute, name+" to replicate a write made after its restart", func() error {
		var n int
		if err := replica.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'after_kill'").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
	readyCluster(t, c.Namespace, c.Name)
	t.Logf("%s rejoined %s after the kill", name, time.Since(killed).Round(10*time.Millisecond))
}

func restartCount(pod *corev1.Pod, container string) int32 {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			return st.RestartCount
		}
	}
	return -1
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// parseMyCnf reads "key = value" lines.
func parseMyCnf(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// normalise reads MySQL's boolean spellings alike.
func normalise(v string) string {
	switch strings.ToUpper(v) {
	case "ON", "1", "TRUE":
		return "ON"
	case "OFF", "0", "FALSE":
		return "OFF"
	}
	return v
}

// clusterOf is the cluster a StatefulSet pod belongs to (its name less the ordinal).
func clusterOf(pod string) string { return pod[:strings.LastIndex(pod, "-")] }

// dbOf opens a root connection to an instance (closed at the test's end).
func dbOf(t *testing.T, ns, pod string) *sql.DB {
	t.Helper()
	d, err := g.DB(context.Background(), ns, clusterOf(pod), pod)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// column runs query and returns its one column's values.
func column(t *testing.T, d *sql.DB, query string) []string {
	t.Helper()
	rows, err := d.QueryContext(context.Background(), query)
	require.NoError(t, err)
	var values []string
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		values = append(values, v)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	return values
}
