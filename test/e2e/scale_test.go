package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dolphin-operator/dolphin/internal/resources"
	"github.com/dolphin-operator/dolphin/test/ground"
)

// A cluster scaled up gets an instance whose data volume is initialised by its init
// container. An initialisation cut short (the pod deleted, its node lost, the container
// killed for memory) left files that the next attempt took for an initialised folder,
// and mysqld could not start on them. Here the new instance's first initialisation is
// killed half-way: the instance must still join and replicate.
func TestAnInstanceWhoseInitialisationIsCutShortStillJoins(t *testing.T) {
	ground.Level(t, ground.Full)
	ctx := context.Background()
	ns := namespace(t)
	c, primary := readyPair(t, ns, "grow")
	_, err := dbOf(t, ns, primary).ExecContext(ctx, "CREATE DATABASE kept")
	require.NoError(t, err)

	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Instances = new(int32(3))
	require.NoError(t, k8s.Patch(ctx, c, patch))
	where := cutInitialisationShort(t, ns, "grow-2")
	t.Logf("grow-2's first initialisation killed with %s on its volume", where)

	readyCluster(t, ns, "grow")
	requireTopology(t, ns, primary, "grow-0", "grow-1", "grow-2")
	require.Contains(t, column(t, dbOf(t, ns, "grow-2"), "SHOW DATABASES"), "kept", "grow-2 holds the primary's data")
	pod := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "grow-2"}, pod))
	var init *corev1.ContainerStatus
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == "init" {
			init = &pod.Status.InitContainerStatuses[i]
		}
	}
	require.NotNil(t, init, "grow-2 has an init container")
	require.GreaterOrEqual(t, init.RestartCount, int32(1), "the init container ran again after the kill")
	require.NotNil(t, init.LastTerminationState.Terminated, "the killed run is the init container's last termination")
	require.Equal(t, int32(128+int(syscall.SIGKILL)), init.LastTerminationState.Terminated.ExitCode)
}

// cutInitialisationShort waits for the init container of pod to run mysqld --initialize
// and kills it once the mysql tablespace (mysql.ibd) exists on the volume while mysqld
// still runs, that is half-way: files written, the initialisation not finished. It returns
// the path the file was found at.
func cutInitialisationShort(t *testing.T, ns, name string) string {
	t.Helper()
	var pid int
	waitFor(t, 2*time.Minute, name+"'s init container to run mysqld", func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		p, err := g.ProcessPID(pod, "init", "mysqld")
		pid = p
		return err
	})
	// Seen through the process's own root: the pod's volume is mounted there.
	root := fmt.Sprintf("/proc/%d/root%s", pid, resources.DataDir)
	// Polled every 20 ms: the whole initialisation takes a few seconds.
	var found string
	for deadline := time.Now().Add(30 * time.Second); found == ""; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Fatalf("the initialisation ended before it could be cut short (pid %d: %v)", pid, err)
		}
		require.False(t, time.Now().After(deadline), "mysqld --initialize wrote no mysql.ibd in 30 s")
		matches, _ := filepath.Glob(filepath.Join(root, "mysql.ibd"))
		more, _ := filepath.Glob(filepath.Join(root, "*", "mysql.ibd"))
		if matches = append(matches, more...); len(matches) > 0 {
			found = matches[0][len(root):]
		}
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return resources.DataDir + found
}
