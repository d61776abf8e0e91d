#!/usr/bin/env bash
# Prints, for each test named in ctest's LastTestsFailed.log, the lines of its output in
# LastTest.log that say why it failed (gtest failures, their expected and actual values,
# timeouts), so that the end of a long log names the cause.
# Usage: ctest-failures.sh LastTest.log LastTestsFailed.log
set -euo pipefail
log=$1
failed=$2
[ -f "$log" ] && [ -f "$failed" ] || exit 0
echo "=== Why the failed tests failed (from $log) ==="
while IFS=: read -r number name; do
  [ -n "$name" ] || continue
  echo "--- $number: $name"
  # A test's section starts with "<number>/<total> Testing: <name>" and ends at the next.
  awk -v want="$number/" '
    /^[0-9]+\/[0-9]+ Testing: / { inside = (index($0, want) == 1) }
    inside' "$log" |
    grep -E 'Failure|Expected|Which is|Value of|Actual|actual|error|Error|Timeout|timed out|\[  FAILED' |
    head -40
done <"$failed"
