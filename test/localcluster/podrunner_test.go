package localcluster_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dolphin-operator/dolphin/test/mysqld"
)

// podDB connects to the mysqld answering on a pod's IP, as the operator will.
func podDB(t *testing.T, ns, pod string) *sql.DB {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	require.NoError(t, err)
	dsn := fmt.Sprintf("root:%s@tcp(%s)/?timeout=2s", mysqld.RootPassword, net.JoinHostPort(p.Status.PodIP, "3306"))
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPodRunnerGivesEachMySQLPodARealServerOnItsIP(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "db", "mysql", 2, true), metav1.CreateOptions{})
	require.NoError(t, err)

	for _, pod := range []string{"db-0", "db-1"} {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		_, err := runner.Instance(wctx, ns, pod)
		cancel()
		require.NoError(t, err, "mysqld for %s", pod)
		db := podDB(t, ns, pod)
		var host, bound string
		require.NoError(t, db.QueryRow("SELECT @@hostname, @@bind_address").Scan(&host, &bound))
		require.Equal(t, pod, host, "the server on the pod's IP is the pod's own")
		p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, p.Status.PodIP, bound)
	}
}

func TestPodRunnerKeepsDataAcrossAPodRestartAndRestartsACrashedServer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "keep", "mysql", 1, true), metav1.CreateOptions{})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	inst, err := runner.Instance(wctx, ns, "keep-0")
	require.NoError(t, err)

	db := podDB(t, ns, "keep-0")
	for _, s := range []string{"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)", "INSERT INTO app.t VALUES (42)"} {
		_, err := db.Exec(s)
		require.NoError(t, err)
	}

	// A crash: the runner starts mysqld again, as a kubelet restarts a container.
	pid := inst.PID()
	require.NoError(t, inst.Kill())
	eventually(t, time.Minute, "mysqld to be restarted", func() (bool, string) {
		return inst.PID() != 0 && inst.PID() != pid, fmt.Sprintf("pid %d", inst.PID())
	})
	require.NoError(t, inst.WaitReady(wctx))

	// A pod deleted and recreated by its StatefulSet gets a new server on the same volume.
	old, err := kube.CoreV1().Pods(ns).Get(ctx, "keep-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctx, "keep-0", metav1.DeleteOptions{}))
	eventually(t, time.Minute, "the old server to stop", func() (bool, string) {
		return inst.PID() == 0, fmt.Sprintf("pid %d", inst.PID())
	})
	eventually(t, 2*time.Minute, "a new keep-0", func() (bool, string) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "keep-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != old.UID && p.Status.PodIP != "", string(p.Status.Phase)
	})
	_, err = runner.Instance(wctx, ns, "keep-0")
	require.NoError(t, err)
	var id int
	require.NoError(t, podDB(t, ns, "keep-0").QueryRow("SELECT id FROM app.t").Scan(&id))
	require.Equal(t, 42, id, "the data lives on the pod's volume")
}
