package mysqld

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// StartN starts n independent instances on free 127.0.0.1 ports, each in its own folder
// under t.TempDir() with a distinct server_id, and stops them when the test ends. It fails
// the test when MySQL is not provisioned: a test that needs MySQL never skips.
func StartN(t testing.TB, n int, extraArgs ...string) []*Instance {
	t.Helper()
	in, err := Locate()
	if err != nil {
		t.Fatalf("MySQL for tests: %v", err)
	}
	t.Logf("MySQL under test: %s", in.Version)
	base := t.TempDir()
	out := make([]*Instance, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			out[k], errs[k] = in.Start(context.Background(), Options{
				Dir:       filepath.Join(base, fmt.Sprintf("mysql-%d", k)),
				ServerID:  uint32(100 + k),
				ExtraArgs: extraArgs,
			})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for k, i := range out {
			if i == nil {
				continue
			}
			if t.Failed() {
				t.Logf("instance %d (%s, pid %d, %d starts), end of error.log:\n%s", k, i.Addr(), i.PID(), i.Starts(), i.ErrorLogTail(4000))
			}
			i.Stop()
		}
	})
	for k, err := range errs {
		if err != nil {
			t.Fatalf("starting MySQL instance %d: %v", k, err)
		}
	}
	return out
}
