package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/cli"
	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// requireFenceAndManualFailover drives the plugin's fence, unfence and failover on the
// two-instance cluster the plugin test made (cli-1 primary since its switchover, and
// spec.primary naming it): a fenced replica is read-only with its replication stopped and
// out of the replicas Service; unfenced, it replicates again. A failover is refused while
// the primary answers; with automatic failover off, a primary that stops answering
// (SIGSTOP) is replaced at once on request, and rejoins.
func requireFenceAndManualFailover(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	code, _, errOut := plugin(t, "-n", ns, "fence", "cli", "cli-0")
	require.Equal(t, cli.ExitRefused, code, errOut)
	require.Contains(t, errOut, "with cli-0 fenced, 0 replica(s) of cli would acknowledge commits")
	code, out, errOut := plugin(t, "-n", ns, "fence", "cli", "cli-0", "--force")
	t.Logf("fence:\n%s%s", out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "cli-0 is fenced: read-only, replication stopped, out of both Services")

	d := dbOf(t, ns, "cli-0")
	require.Equal(t, []string{"1"}, column(t, d, "SELECT @@global.super_read_only"))
	require.Equal(t, []string{"OFF"}, column(t, d, "SELECT SERVICE_STATE FROM performance_schema.replication_connection_status"))
	require.Equal(t, []string{"OFF"}, column(t, d, "SELECT SERVICE_STATE FROM performance_schema.replication_applier_status"))
	pod := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli-0"}, pod))
	require.Equal(t, string(resources.RoleNone), pod.Labels[resources.LabelRole], "out of the replicas Service")
	c := &mysqlv1beta1.MySQLCluster{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli"}, c))
	require.Equal(t, []string{"cli-0"}, c.Status.FencedInstances)
	degraded := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionDegraded)
	require.NotNil(t, degraded)
	require.Equal(t, mysqlv1beta1.ReasonInstanceFenced, degraded.Reason, degraded.Message)
	code, out, errOut = plugin(t, "-n", ns, "status", "cli")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Regexp(t, `(?m)^\s*cli-0\s+fenced\s`, out)

	code, out, errOut = plugin(t, "-n", ns, "unfence", "cli", "cli-0")
	t.Logf("unfence:\n%s%s", out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "cli-0 is back in service")
	require.Equal(t, []string{"ON"}, column(t, d, "SELECT SERVICE_STATE FROM performance_schema.replication_connection_status"))

	code, _, errOut = plugin(t, "-n", ns, "failover", "cli", "--force")
	require.Equal(t, cli.ExitRefused, code, errOut)
	require.Contains(t, errOut, "the operator refused: Manual failover from cli-1 refused: primary cli-1 answers")

	// Automatic failover off, the primary hung: only a request replaces it.
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli"}, c))
	c.Spec.Replication.Failover.Enabled = new(false)
	require.NoError(t, k8s.Update(ctx, c))
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli-1"}, pod))
	require.NoError(t, g.Signal(pod, "mysqld", "mysqld", syscall.SIGSTOP))
	t.Cleanup(func() { _ = g.Signal(pod, "mysqld", "mysqld", syscall.SIGCONT) }) // gone with its pod, normally
	waitFor(t, time.Minute, "the operator to report the primary unreachable, failover disabled", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli"}, c); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(c.Status.Conditions, mysqlv1beta1.ConditionReplicationHealthy); r == nil ||
			r.Reason != mysqlv1beta1.ReasonFailoverDisabled {
			return fmt.Errorf("ReplicationHealthy %v", r)
		}
		return nil
	})
	asked := time.Now()
	code, out, errOut = plugin(t, "-n", ns, "failover", "cli", "--force", "--timeout", "2m")
	t.Logf("failover (%s):\n%s%s", time.Since(asked).Round(100*time.Millisecond), out, errOut)
	require.Equal(t, cli.ExitOK, code, errOut)
	// Answered by the pass that promotes, or by the next one when a step after the promotion
	// (labelling a pod being deleted) failed and was retried.
	require.Regexp(t, `The operator reports: Manual failover from cli-1: (failover from cli-1: primary cli-1 lost: promoting cli-0|`+
		`the failover from cli-1 is done: cli-0 is the primary)`, out)
	waitFor(t, 30*time.Second, "cli-0 reported primary", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cli"}, c); err != nil {
			return err
		}
		if c.Status.CurrentPrimary != "cli-0" {
			return fmt.Errorf("primary %q", c.Status.CurrentPrimary)
		}
		return nil
	})
	require.NotContains(t, c.Annotations, mysqlv1beta1.AnnotationFailover, "the operator withdrew the request")

	// The evicted primary's pod comes back; spec.primary still names it, so once it
	// replicates the operator switches back to it.
	waitPrimary(t, ns, "cli", "cli-1")
	c = readyCluster(t, ns, "cli")
	var history []string
	for _, e := range c.Status.History {
		history = append(history, strings.TrimSpace(e.Action+" "+e.Instance+" "+e.From))
	}
	t.Logf("status.history: %v", history)
	for _, want := range []string{"Bootstrap cli-0", "Switchover cli-1 cli-0", "Isolate cli-0", "Evict cli-1",
		"Failover cli-0 cli-1"} {
		require.Contains(t, history, want)
	}
	require.Equal(t, "Switchover cli-1 cli-0", history[len(history)-1], "the switch back to spec.primary came last")
	requireAudited(t, ns)
}

// auditLine is what the admission webhook's audit line says of one decision.
type auditLine struct {
	Logger    string   `json:"logger"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Operation string   `json:"operation"`
	User      string   `json:"user"`
	Allowed   bool     `json:"allowed"`
	Changed   []string `json:"changed"`
}

// requireAudited checks the webhook's audit trail of cluster cli: every change the plugin
// test made to its spec and annotations appears once, with who made it (the test's user, or
// the operator withdrawing the failover requests).
func requireAudited(t *testing.T, ns string) {
	t.Helper()
	operator := "system:serviceaccount:" + ground.OperatorNamespace + ":dolphin-controller-manager"
	var got []string
	user := ""
	for line := range strings.SplitSeq(g.FullOperatorLogs(context.Background()), "\n") {
		var a auditLine
		if !strings.Contains(line, `"admission-audit"`) || json.Unmarshal([]byte(line), &a) != nil ||
			a.Logger != "admission-audit" || a.Namespace != ns || a.Name != "cli" || len(a.Changed) == 0 {
			continue
		}
		require.True(t, a.Allowed, line)
		require.Equal(t, "UPDATE", a.Operation, line)
		who := "operator"
		if a.User != operator {
			if user == "" {
				user = a.User
			}
			require.Equal(t, user, a.User, "every other change is the test's: %s", line)
			who = "test"
		}
		got = append(got, who+" "+strings.Join(a.Changed, ","))
	}
	fenced := regexp.QuoteMeta("metadata.annotations[" + mysqlv1beta1.AnnotationFencedInstances + "]")
	failover := regexp.QuoteMeta("metadata.annotations[" + mysqlv1beta1.AnnotationFailover + "]")
	// In the order the test made them: the switchover, the backup target requireBackupAndRestore
	// gives the cluster (with the defaults that come with it), fence and unfence, a refused
	// and a done failover request, each withdrawn by the operator, and the test turning
	// automatic failover off in between.
	want := []string{`test spec\.primary`, `test spec\.backup\.\S+`, "test " + fenced, "test " + fenced, "test " + failover,
		"operator " + failover, `test spec\.replication\.failover\.enabled`, "test " + failover, "operator " + failover}
	t.Logf("audited as %s: %v", user, got)
	require.Len(t, got, len(want))
	for k := range want {
		require.Regexp(t, "^"+want[k]+"$", got[k])
	}
}
