package ground

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// TestUser is the tests' own account over TCP. The operator gives root the local socket
// only, and its own accounts no access to data, so the harness, a client from outside
// the pods, makes this account once per cluster: on the primary, as root over the socket
// (kubectl exec, as `kubectl dolphin mysql` does), binary-logged so that the replicas have
// it too, unless it logs in already (data restored from a cluster that had it). It has
// TestPassword and every privilege on *.* without GRANT OPTION. Production clusters have
// no such account; see docs/design/test-ground.md.
const TestUser = "e2e"

// TestPassword is TestUser's password: the same on every cluster, so that restored data
// that has the account needs no new transaction for it.
const TestPassword = "e2eHarnessPassword1"

// testAccounts are the clusters the harness made TestUser on, by the UID of their
// credentials Secret (a cluster made again under the same name has another).
var testAccounts sync.Map

// socketScript runs statements (expanded by the container's shell) as root over the mysql
// container's socket. They reach mysql on its standard input: a password in them stays
// out of every command line, as the password itself stays in the container's environment.
func socketScript(statements string) string {
	return `MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql --no-defaults --protocol=socket --socket=` +
		resources.SocketPath + " -uroot --connect-timeout=5 -N -B <<SQL\n" + statements + ";\nSQL\n"
}

// rootOnSocket runs the statements given as its first argument (socketScript).
var rootOnSocket = socketScript("$1")

// ensureTestAccount makes TestUser on the cluster's writable instance and waits (at most
// 30 s) until every other running instance has it.
func (g *Ground) ensureTestAccount(ctx context.Context, cs kubernetes.Interface, c *mysqlv1beta1.MySQLCluster, creds *corev1.Secret) error {
	pods, err := cs.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(resources.SelectorLabels(c)).String()})
	if err != nil {
		return fmt.Errorf("while listing %s's pods: %w", c.Name, err)
	}
	var primary *corev1.Pod
	var others []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		out, err := g.Exec(ctx, p, resources.ContainerMySQL, "sh", "-c", rootOnSocket, "sh", "SELECT @@super_read_only")
		switch {
		case err == nil && strings.TrimSpace(out) == "0":
			primary = p
		case err == nil:
			others = append(others, p)
		}
	}
	if primary == nil {
		return errors.New("no writable instance to make the tests' account on (yet)")
	}
	account := "'" + TestUser + "'@'%'"
	stmt := "CREATE USER IF NOT EXISTS " + account + " IDENTIFIED BY '" + TestPassword + "'; ALTER USER " + account +
		" IDENTIFIED BY '" + TestPassword + "'; GRANT ALL PRIVILEGES ON *.* TO " + account
	if out, err := g.Exec(ctx, primary, resources.ContainerMySQL, "sh", "-c", socketScript(stmt)); err != nil {
		return fmt.Errorf("while making the tests' account on %s: %w (%s)", primary.Name, err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range others {
		for time.Now().Before(deadline) {
			out, err := g.Exec(ctx, p, resources.ContainerMySQL, "sh", "-c", rootOnSocket, "sh",
				"SELECT COUNT(*) FROM mysql.user WHERE user = '"+TestUser+"'")
			if err == nil && strings.TrimSpace(out) == "1" {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	testAccounts.Store(creds.UID, true)
	return nil
}
