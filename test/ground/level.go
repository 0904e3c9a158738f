package ground

import (
	"fmt"
	"os"
	"sync"
)

// TestLevel says which of the two test targets runs a ground test (docs/development.md).
type TestLevel int

const (
	// Core tests guard the product's promises: no acknowledged write lost and one writable
	// primary under a primary kill, a node loss and a partition; a cluster Ready on real
	// pods; an operator upgrade that restarts nothing; a backup restored with the same rows
	// and GTID set. `make test`, the gate, runs them; so does `make test-all`.
	Core TestLevel = iota
	// Full tests prove everything else; only `make test-all` runs them.
	Full
)

func (l TestLevel) String() string {
	if l == Core {
		return "Core"
	}
	return "Full"
}

// EnvLevel selects the levels a run holds: "core" runs Core tests only (make test); "all",
// or nothing, runs every test, so that `go test -run X` runs X whatever its level.
const EnvLevel = "DOLPHIN_TEST_LEVEL"

// Runs reports whether this run holds tests (or parts of one, such as chaos rounds) of
// level l.
func Runs(l TestLevel) bool { return l == Core || os.Getenv(EnvLevel) != "core" }

// LevelT is what Level needs of a test; testing.TB has it.
type LevelT interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

var (
	hooksMu sync.Mutex
	hooks   []func(LevelT)
)

// EachTest registers f to run for every test that Level lets run, at its start: the
// shared ground's suite (test/ground/suite) checks there that the test leaves the ground as
// it found it.
func EachTest(f func(LevelT)) {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	hooks = append(hooks, f)
}

// Level is the first line of every ground test: it names the test's level in the log
// (hack/testrun's table reads it), skips a Full test when the run holds Core tests only,
// with the target that runs it, and runs the EachTest hooks.
func Level(t LevelT, l TestLevel) {
	t.Helper()
	switch v := os.Getenv(EnvLevel); v {
	case "", "all":
	case "core":
		if l != Core {
			t.Skipf("%s", skipMessage(l))
		}
	default:
		t.Fatalf("%s=%q: want core or all", EnvLevel, v)
	}
	t.Logf("%s%s", levelMark, l)
	hooksMu.Lock()
	run := append([]func(LevelT){}, hooks...)
	hooksMu.Unlock()
	for _, f := range run {
		f(t)
	}
}

// levelMark starts the log line that names a test's level.
const levelMark = "test level: "

func skipMessage(l TestLevel) string {
	return fmt.Sprintf("%s%s: not in this run (%s=core); `make test-all` runs it", levelMark, l, EnvLevel)
}
