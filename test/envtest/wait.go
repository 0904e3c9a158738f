package envtest

import (
	"testing"
	"time"
)

// WaitFor polls cond until it returns nil and returns how long that took. Past timeout it
// runs onTimeout (to add what it knows, e.g. the control plane's health) and fails the test
// with cond's last error.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error, onTimeout ...func()) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < timeout {
		if err = cond(); err == nil {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, f := range onTimeout {
		f()
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	return 0
}
