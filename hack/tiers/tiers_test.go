package tiers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A makefile whose "bad" tier fails the way go test does: an assertion report, log noise
// after it, then the FAIL lines.
const makefile = `ok:
	@echo fine
bad:
	@printf '    x_test.go:12: INSTALL took 1s\n'
	@printf '        \tError Trace:\t/a/x_test.go:20\n        \tError:      \tNot equal\n'
	@printf '        \tTest:       \tTestX\n        \tMessages:   \tthe upgrade moved no primary\n'
	@for i in $$(seq 1 3000); do echo 'time="t" level=info msg=noise'; done
	@printf -- '--- FAIL: TestX (1.00s)\nFAIL\n'
	@printf 'test/e2e/x_test.go:72:15: QF1008: could remove embedded field (staticcheck)\n'
	@exit 2
never:
	@echo never
slow:
	@printf 'test/e2e\tTestX\tCore\t2.0\tpass\n' >> "$$DOLPHIN_TEST_TABLE"
	@sleep 2
`

func TestAFailingTierEndsWithItsReasonAndTheTable(t *testing.T) {
	out, err := runTiers(t, "ok", "bad", "never")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "run-tiers exits non-zero when a tier fails")
	require.Equal(t, 1, exit.ExitCode())

	// What a report keeping the last 40 lines would show.
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	end := strings.Join(lines[len(lines)-40:], "\n")
	require.Contains(t, end, "== why bad failed")
	require.Contains(t, end, "Messages:   \tthe upgrade moved no primary")
	require.Contains(t, end, "x_test.go:12: INSTALL took 1s")
	require.Contains(t, end, "--- FAIL: TestX")
	why := end[strings.Index(end, "== why"):]
	require.Contains(t, why, "test/e2e/x_test.go:72:15: QF1008", "a linter's finding is repeated")
	require.NotContains(t, why, "level=info", "log noise is not repeated")
	require.Regexp(t, `bad +\d+  FAILED \(exit 2\)`, end)
	require.Regexp(t, `never +-  not run`, end)
	require.Contains(t, end, "tiers: 1 passed, 1 failed, 1 not run")
	require.NotContains(t, string(out), "never\n", "no tier runs after a failure")
}

func TestPassingTiersPrintNoReason(t *testing.T) {
	out, err := runTiers(t, "ok", "never")
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "== why")
	require.Contains(t, string(out), "tiers: 2 passed, 0 failed, 0 not run")
}

func TestARunOverItsBudgetSaysSoAfterTheGroundTestsTable(t *testing.T) {
	out, err := runTiers(t, "--budget", "1", "slow")
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `== ground tests ==\n.*\ntest/e2e +TestX +Core +2.0  pass\n`, string(out))
	require.Regexp(t, `WARNING: this run took \d+ s, over its budget of 1 s`, string(out))

	out, err = runTiers(t, "--budget", "100", "ok")
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "WARNING")
	require.NotContains(t, string(out), "== ground tests ==", "no ground tier ran")
}

// runTiers runs run-tiers.sh with args in a folder holding makefile.
func runTiers(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o644))
	script, err := filepath.Abs("../run-tiers.sh")
	require.NoError(t, err)
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}
