// Command testrun runs a `go test -json` command, prints its output as `go test -v`
// would, and ends with a table of every test it ran: package, test, level (the line
// ground.Level logs), seconds and result. With --table it also appends the table's rows,
// tab-separated, to a file (hack/run-tiers.sh prints them all at the end of `make test`).
// It exits with the command's status, or 1 when a test or package failed.
//
//	go run ./hack/testrun --table FILE -- go test -json ./test/e2e/...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	table := flag.String("table", "", "a file to append the per-test rows to (tab-separated)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: testrun [--table FILE] -- go test -json ...")
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *table, os.Stdout))
}

func run(args []string, table string, out io.Writer) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testrun: %v\n", err)
		return 1
	}
	rows, failed := Read(stdout, out)
	err = cmd.Wait()
	fmt.Fprintln(out)
	fmt.Fprint(out, Format(rows))
	if table != "" {
		if err := appendRows(table, rows); err != nil {
			fmt.Fprintf(os.Stderr, "testrun: %v\n", err)
			return 1
		}
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintf(os.Stderr, "testrun: %v\n", err)
		return 1
	case failed:
		return 1
	}
	return 0
}

// event is one line of `go test -json` (test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Row is one top-level test's outcome.
type Row struct {
	Package, Test, Level, Result string
	Seconds                      float64
}

// levelMark is how ground.Level names a test's level in its log.
const levelMark = "test level: "

// Read copies each event's output to out and returns the top-level tests' rows in the
// order they ended, and whether anything failed. Lines that are not JSON (a build's
// errors) are copied as they are.
func Read(r io.Reader, out io.Writer) ([]Row, bool) {
	var rows []Row
	failed := false
	levels := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			fmt.Fprint(out, e.Output)
			if i := strings.Index(e.Output, levelMark); i >= 0 && e.Test != "" {
				test, _, _ := strings.Cut(e.Test, "/")
				top := e.Package + " " + test
				if _, seen := levels[top]; !seen {
					levels[top] = strings.Fields(e.Output[i+len(levelMark):] + " ?")[0]
					levels[top] = strings.TrimSuffix(levels[top], ":")
				}
			}
		case "pass", "fail", "skip":
			if e.Action == "fail" {
				failed = true
			}
			if e.Test == "" || strings.Contains(e.Test, "/") {
				continue
			}
			rows = append(rows, Row{Package: e.Package, Test: e.Test, Level: levels[key], Result: e.Action, Seconds: e.Elapsed})
		case "build-fail":
			failed = true
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testrun: reading the events: %v\n", err)
		failed = true
	}
	return rows, failed
}

// Format is the table of rows, with the sum of their seconds.
func Format(rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "== tests ==\n%-34s %-64s %-5s %8s  %s\n", "package", "test", "level", "seconds", "result")
	total := 0.0
	counts := map[string]int{}
	for _, r := range rows {
		lvl := r.Level
		if lvl == "" {
			lvl = "-"
		}
		fmt.Fprintf(&b, "%-34s %-64s %-5s %8.1f  %s\n", shortPackage(r.Package), r.Test, lvl, r.Seconds, r.Result)
		total += r.Seconds
		counts[r.Result]++
	}
	fmt.Fprintf(&b, "%-34s %-64s %-5s %8.1f\n", "total", "", "", total)
	fmt.Fprintf(&b, "tests: %d passed, %d failed, %d skipped\n", counts["pass"], counts["fail"], counts["skip"])
	return b.String()
}

func shortPackage(p string) string {
	return strings.TrimPrefix(p, "github.com/dolphin-operator/dolphin/")
}

func appendRows(path string, rows []Row) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("while opening %s: %w", path, err)
	}
	for _, r := range rows {
		fmt.Fprintf(f, "%s\t%s\t%s\t%.1f\t%s\n", shortPackage(r.Package), r.Test, r.Level, r.Seconds, r.Result)
	}
	return f.Close()
}
