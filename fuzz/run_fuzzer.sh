#!/usr/bin/env bash
# Runs one libFuzzer target for a while (fuzz/CMakeLists.txt registers it with ctest;
# scripts/fuzz.sh long uses it too).
# Usage: run_fuzzer.sh BINARY WORK_DIR DICT SECONDS SEED_DIR... [-- extra libFuzzer flags]
# New inputs go to WORK_DIR/corpus (seed directories are only read); a crash, leak or
# timeout leaves its input in WORK_DIR/ (crash-*, leak-*, timeout-*) and fails the run.
set -euo pipefail
bin=$1 work=$2 dict=$3 seconds=$4
shift 4
seeds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [ -d "$1" ] && seeds+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
mkdir -p "$work/corpus"
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192
      -print_final_stats=1 -artifact_prefix="$work/")
[ -n "$dict" ] && args+=(-dict="$dict")
exec "$bin" "${args[@]}" "$@" "$work/corpus" "${seeds[@]}"
