package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A package whose Core test passes with a subtest, whose Full test is skipped, and whose
// third test fails.
const events = `{"Action":"start","Package":"github.com/dolphin-operator/dolphin/test/e2e"}
{"Action":"run","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA"}
{"Action":"output","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA","Output":"    a_test.go:10: test level: Core\n"}
{"Action":"output","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA/sub","Output":"    a_test.go:12: test level: Full\n"}
{"Action":"pass","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA/sub","Elapsed":1}
{"Action":"pass","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestA","Elapsed":12.34}
{"Action":"output","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestB","Output":"    b_test.go:9: test level: Full: not in this run (DOLPHIN_TEST_LEVEL=core); ` + "`make test-all`" + ` runs it\n"}
{"Action":"skip","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestB","Elapsed":0}
not json: a build error
{"Action":"fail","Package":"github.com/dolphin-operator/dolphin/test/e2e","Test":"TestC","Elapsed":3}
{"Action":"fail","Package":"github.com/dolphin-operator/dolphin/test/e2e","Elapsed":16}
`

func TestTheTableHoldsEachTopLevelTestWithItsLevel(t *testing.T) {
	var out strings.Builder
	rows, failed := Read(strings.NewReader(events), &out)
	require.True(t, failed)
	require.Equal(t, []Row{
		{Package: "github.com/dolphin-operator/dolphin/test/e2e", Test: "TestA", Level: "Core", Result: "pass", Seconds: 12.34},
		{Package: "github.com/dolphin-operator/dolphin/test/e2e", Test: "TestB", Level: "Full", Result: "skip"},
		{Package: "github.com/dolphin-operator/dolphin/test/e2e", Test: "TestC", Result: "fail", Seconds: 3},
	}, rows)
	require.Contains(t, out.String(), "=== RUN   TestA\n    a_test.go:10: test level: Core\n")
	require.Contains(t, out.String(), "not json: a build error\n")
	table := Format(rows)
	require.Contains(t, table, "test/e2e")
	require.Regexp(t, `TestA\s+Core\s+12.3  pass`, table)
	require.Contains(t, table, "tests: 1 passed, 1 failed, 1 skipped\n")
}
