#!/usr/bin/env bash
# Benchmarks the Sinew model engine: prompt processing (ppP) and generation (tgN)
# tokens/s on stories260K and on ~125M-parameter random-weight llama models
# (F16, Q8_0, Q4_K) written at run time, with 1 and 2 threads. Given the path
# of llama.cpp's llama-bench, runs it on the same files in the same run and
# prints the ratio sinew / llama.cpp for every row. Each row names the kernels
# that ran (cpu-avx512, cpu-avx2, cpu-scalar): the best level the CPU has, or
# the one SINEW_CPU_LEVEL=scalar|avx2|avx512 caps it at, so that an AVX-512
# machine measures the AVX2 path too (llama-bench runs as it was built).
#
# usage: model-backend/bench/run_model_bench.sh [--llama-bench PATH] [--work-dir DIR]
#            [-t 1,2] [-p 128] [-n 32] [-r 3]
# env:   SINEW_BUILD_DIR (default build): where bin/sinew-model-bench was built.
# The random models (~470 MB) go to --work-dir (default: a temporary directory,
# removed at exit); an existing work dir is reused without rewriting them.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD_DIR=${SINEW_BUILD_DIR:-build}
BENCH="$BUILD_DIR/bin/sinew-model-bench"
LLAMA_BENCH=""
WORK=""
THREADS=1,2
N_PROMPT=128
N_GEN=32
REPS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bench) LLAMA_BENCH=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    -p) N_PROMPT=$2; shift 2 ;;
    -n) N_GEN=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ ! -x "$BENCH" ]; then
  echo "missing $BENCH: build first (scripts/build.sh)" >&2
  exit 1
fi
if [ -n "$LLAMA_BENCH" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "--llama-bench $LLAMA_BENCH is not an executable" >&2
  exit 1
fi
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /tmp/sinew-model-bench.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
if [ ! -f "$WORK/bench-Q4_K.gguf" ]; then
  "$BENCH" --write-random "$WORK"
fi
MODELS=("$ROOT/../shared/models/stories260K.gguf" "$WORK/bench-F16.gguf" "$WORK/bench-Q8_0.gguf"
        "$WORK/bench-Q4_K.gguf")
model_args=()
for m in "${MODELS[@]}"; do model_args+=(-m "$m"); done

echo "== sinew-model-bench (threads $THREADS, pp$N_PROMPT, tg$N_GEN, best of $REPS;" \
  "SINEW_CPU_LEVEL=${SINEW_CPU_LEVEL:-unset})" >&2
"$BENCH" "${model_args[@]}" -t "$THREADS" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" > "$WORK/sinew.tsv"

: > "$WORK/llama.jsonl"
if [ -n "$LLAMA_BENCH" ]; then
  echo "== $LLAMA_BENCH on the same files" >&2
  for m in "${MODELS[@]}"; do
    "$LLAMA_BENCH" -m "$m" -t "$THREADS" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -o json \
      > "$WORK/llama-one.json"
    python3 -c 'import json,sys; [print(json.dumps(dict(r, sinew_model=sys.argv[1]))) for r in json.load(open(sys.argv[2]))]' \
      "$(basename "$m")" "$WORK/llama-one.json" >> "$WORK/llama.jsonl"
  done
fi

python3 - "$WORK/sinew.tsv" "$WORK/llama.jsonl" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
theirs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    test = "pp%d" % r["n_prompt"] if r.get("n_gen", 0) == 0 else "tg%d" % r["n_gen"]
    theirs[(r["sinew_model"], int(r["n_threads"]), test)] = float(r["avg_ts"])
have_ref = bool(theirs)
hdr = "%-18s %-5s %8s %-11s %3s %-6s %12s" % ("model", "type", "params", "kernels", "thr", "test",
                                              "sinew t/s")
if have_ref:
    hdr += " %12s %7s" % ("llama.cpp", "ratio")
print(hdr)
for model, wtype, params, backend, threads, test, tps in rows:
    line = "%-18s %-5s %7.1fM %-11s %3s %-6s %12.2f" % (model, wtype, int(params) / 1e6, backend,
                                                       threads, test, float(tps))
    if have_ref:
        ref = theirs.get((model, int(threads), test))
        line += " %12s %7s" % (("%.2f" % ref, "%.2fx" % (float(tps) / ref)) if ref else ("n/a", "n/a"))
    print(line)
if not have_ref:
    print("(no --llama-bench given: no ratios)")
PY
