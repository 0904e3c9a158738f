#!/usr/bin/env bash
# run-tiers.sh [--budget SECONDS] TIER...: runs each make target in order, stops at the first
# that fails, and ends with the per-test table of the tiers that run go test through
# hack/testrun (the ground tiers) and a table of how long each tier took (what `make test`
# prints last), with a warning line when the run took longer than its budget. When a tier fails,
# the lines that say why (go test's failures and assertion reports) are printed again just
# before the table: a failing test's log dumps can run to thousands of lines, and a CI
# report that keeps only the end of the output would otherwise lose the reason.
set -uo pipefail
budget=0
if [ "${1:-}" = --budget ]; then budget=$2; shift 2; fi
declare -a names=() secs=() results=()
failed=0
start_all=$(date +%s)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export DOLPHIN_TEST_TABLE="$logs/tests.tsv"

# why LOG: the failure lines of a go test run (and the findings of vet and lint), at most
# 80, long lines cut.
why() {
  awk '
    /^[[:space:]]*Error Trace:/ { block = 1 }
    block { print; if (/^[[:space:]]*Messages:/ || ++n > 12) { block = 0; n = 0 }; next }
    /^[[:space:]]*--- FAIL/ || /^panic: / || /^FAIL[[:space:]]/ || /\*\*\* \[/ { print; next }
    /^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: / && !/level=/ { print; next }
    /^[^[:space:]]+\.go:[0-9]+:[0-9]+: / { print }
  ' "$1" | cut -c1-400 | tail -n 80
}

for tier in "$@"; do
  start=$(date +%s)
  make --no-print-directory "$tier" 2>&1 | tee "$logs/$tier.log"
  rc=${PIPESTATUS[0]}
  names+=("$tier"); secs+=($(( $(date +%s) - start )))
  if [ $rc -ne 0 ]; then
    results+=("FAILED (exit $rc)"); failed=1
    echo
    echo "== why $tier failed (its failure lines, repeated) =="
    why "$logs/$tier.log"
    break
  fi
  results+=("ok")
done
if [ -s "$DOLPHIN_TEST_TABLE" ]; then
  echo
  echo "== ground tests =="
  printf '%-20s %-64s %-5s %8s  %s\n' package test level seconds result
  awk -F'\t' '{ printf "%-20s %-64s %-5s %8s  %s\n", $1, $2, ($3 == "" ? "-" : $3), $4, $5 }' "$DOLPHIN_TEST_TABLE"
fi
echo
echo "== test tiers =="
printf '%-20s %8s  %s\n' tier seconds result
for i in "${!names[@]}"; do printf '%-20s %8s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"; done
for tier in "${@:$(( ${#names[@]} + 1 ))}"; do printf '%-20s %8s  %s\n' "$tier" - "not run"; done
total=$(( $(date +%s) - start_all ))
printf '%-20s %8s\n' total "$total"
if [ "$budget" -gt 0 ] && [ "$total" -gt "$budget" ]; then
  echo "WARNING: this run took ${total} s, over its budget of ${budget} s (docs/development.md)"
fi
passed=0; for r in "${results[@]}"; do [ "$r" = ok ] && passed=$((passed + 1)); done
echo "tiers: $passed passed, $failed failed, $(( $# - ${#names[@]} )) not run"
exit $failed
