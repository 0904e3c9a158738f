package ground

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often Poll asks again.
const pollInterval = 200 * time.Millisecond

// Poll calls cond until it returns nil, the timeout passes or ctx ends; then it returns
// cond's last error.
func Poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// T is what WaitFor needs of a test; testing.TB has it (this package does not link
// testing into the commands that use it).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// WaitFor polls cond until it returns nil and returns how long that took. Past timeout it
// runs onTimeout (to add what it knows, e.g. the cluster's health) and fails the test with
// cond's last error.
func WaitFor(t T, timeout time.Duration, what string, cond func() error, onTimeout ...func()) time.Duration {
	t.Helper()
	start := time.Now()
	if err := Poll(context.Background(), timeout, cond); err != nil {
		for _, f := range onTimeout {
			f()
		}
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return time.Since(start)
}
