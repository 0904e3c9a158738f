// Package suite is the TestMain of the test packages that run on the real-node ground
// (e2e, chaos, deploy): it enters the ground's namespaces and attaches to the ground that
// ground.EnvGround names (one ground, started once, runs several packages in turn) or,
// when none is named, starts one with the operator installed by `make deploy`, so that
// any test still runs alone with `go test -run`. Each test that ground.Level lets run is
// checked to leave the ground as it found it. When a test failed, it prints the end of
// the operator's log.
package suite

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/test/ground"
	"github.com/dolphin-operator/dolphin/test/localcluster"
)

// Main runs m on the shared ground (or a fresh one), setting *g and *k8s for the tests,
// then, when they passed, each of after (checks of the whole run, on the ground as the
// tests left it), and exits.
func Main(m *testing.M, g **ground.Ground, k8s *client.Client, after ...func(context.Context) error) {
	if err := localcluster.EnterNetNS(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(run(m, g, k8s, after))
}

func run(m *testing.M, g **ground.Ground, k8s *client.Client, after []func(context.Context) error) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	if *g, err = Ground(ctx); err != nil {
		return fail(err)
	}
	defer (*g).Stop()
	if *k8s, err = (*g).Client(); err != nil {
		return fail(err)
	}
	c := &checker{g: *g, k8s: *k8s}
	ground.EachTest(c.before)
	code := m.Run()
	for _, check := range after {
		if code != 0 {
			break
		}
		if err := check(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: after the tests: %v\n", err)
			code = 1
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "operator log (end):\n%s\n", (*g).OperatorLogs(context.Background()))
	}
	return code
}

// Ground attaches to the ground ground.EnvGround names or, when none is, starts one with
// the operator (and, when DOLPHIN_PREVIOUS_IMAGES lists them, the previous build's images
// on its nodes, for the upgrade test).
func Ground(ctx context.Context) (*ground.Ground, error) {
	if dir := os.Getenv(ground.EnvGround); dir != "" {
		fmt.Fprintf(os.Stderr, "suite: attaching to the ground in %s\n", dir)
		return ground.Attach(dir, ground.Options{Log: os.Stderr})
	}
	var more []string
	if list := os.Getenv("DOLPHIN_PREVIOUS_IMAGES"); list != "" {
		more = append(more, list)
	}
	return ground.Start(ctx, ground.Options{Log: os.Stderr, MoreImages: more})
}

// namespaces are the namespaces each running test made with Namespace, by test name.
var (
	namespacesMu sync.Mutex
	namespaces   = map[string][]string{}
)

// Namespace creates a namespace for one test (named prefix-…) where the restricted Pod
// Security level is enforced, so every pod the operator creates must meet it; it is
// deleted when the test ends.
func Namespace(t *testing.T, k8s client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	namespacesMu.Lock()
	if _, seen := namespaces[t.Name()]; !seen {
		t.Cleanup(func() { // the test's first cleanup runs last: the record goes with the test
			namespacesMu.Lock()
			defer namespacesMu.Unlock()
			delete(namespaces, t.Name())
		})
	}
	namespaces[t.Name()] = append(namespaces[t.Name()], ns.Name)
	namespacesMu.Unlock()
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// DeleteNamespaces deletes the MySQLBackups and then the namespaces the test made with
// Namespace, and waits until they are gone: a cleanup that must run before something their deletion needs goes (the
// S3 server their backups' finalizers delete objects from) calls it first.
func DeleteNamespaces(t *testing.T, k8s client.Client) {
	t.Helper()
	namespacesMu.Lock()
	list := slices.Clone(namespaces[t.Name()])
	namespacesMu.Unlock()
	ctx := context.Background()
	// The backups go first, while their store's credentials Secret is there: a backup's
	// finalizer needs it to delete the stored objects, and waits for ever without it.
	for _, name := range list {
		_ = k8s.DeleteAllOf(ctx, &mysqlv1beta1.MySQLBackup{}, client.InNamespace(name))
	}
	err := ground.Poll(ctx, namespacesGone, func() error {
		for _, name := range list {
			backups := &mysqlv1beta1.MySQLBackupList{}
			if err := k8s.List(ctx, backups, client.InNamespace(name)); err != nil {
				return err
			}
			if len(backups.Items) > 0 {
				return fmt.Errorf("namespace %s: %d backups left", name, len(backups.Items))
			}
		}
		return nil
	})
	for _, name := range list {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	if err == nil {
		err = ground.Poll(ctx, namespacesGone, func() error {
			for _, name := range list {
				err := k8s.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
				if err == nil {
					return fmt.Errorf("namespace %s still there", name)
				}
				if !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		t.Errorf("deleting the test's namespaces: %v", err)
	}
}
