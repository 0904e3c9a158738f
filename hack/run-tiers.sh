#!/usr/bin/env bash
# run-tiers.sh TIER...: runs each make target in order, stops at the first that fails, and
# ends with a table of how long each took (what `make test` prints last).
set -uo pipefail
declare -a names=() secs=() results=()
failed=0
start_all=$(date +%s)
for tier in "$@"; do
  start=$(date +%s)
  make --no-print-directory "$tier"
  rc=$?
  names+=("$tier"); secs+=($(( $(date +%s) - start )))
  if [ $rc -ne 0 ]; then results+=("FAILED (exit $rc)"); failed=1; break; fi
  results+=("ok")
done
echo
echo "== test tiers =="
printf '%-20s %8s  %s\n' tier seconds result
for i in "${!names[@]}"; do printf '%-20s %8s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"; done
for tier in "${@:$(( ${#names[@]} + 1 ))}"; do printf '%-20s %8s  %s\n' "$tier" - "not run"; done
printf '%-20s %8s\n' total $(( $(date +%s) - start_all ))
passed=0; for r in "${results[@]}"; do [ "$r" = ok ] && passed=$((passed + 1)); done
echo "tiers: $passed passed, $(( $# - passed )) failed"
exit $failed
