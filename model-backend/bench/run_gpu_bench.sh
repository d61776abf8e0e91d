#!/usr/bin/env bash
# GPU benchmark of the Sinew model engine (run on a machine with a CUDA GPU; by
# scripts/device-check.sh there). Writes a random-weight 1.1B llama (embedding
# 2048, 16 layers, feed-forward 8192, 32 heads, 8 KV heads, 32,000-token
# vocabulary) in F16, Q8_0 and Q4_K, then measures pp512 and tg128 tokens/s on
# --device cuda:0 and reports each tg figure as a fraction of the memory-bandwidth
# limit (weight bytes read per token / bandwidth, 4.8 TB/s for an H200 unless
# --bandwidth-tbs says otherwise). Given llama.cpp's llama-bench (built with
# -DGGML_CUDA=ON), runs it on the same files in the same run and prints ratios.
#
# usage: model-backend/bench/run_gpu_bench.sh [--bin-dir DIR] [--work-dir DIR]
#            [--llama-bench PATH] [-p 512] [-n 128] [-r 3] [--bandwidth-tbs 4.8]
#            [--out FILE] [--device cuda:0]
# --bin-dir: where sinew-model-bench is (default: build/bin); --out: also write
# the table there; --device: cpu only to try the script itself without a GPU. Models (~4 GB) go to --work-dir (default: a temporary
# directory removed at exit); existing files there are reused.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN_DIR="$HERE/../../build/bin"
WORK=""
LLAMA_BENCH=""
N_PROMPT=512
N_GEN=128
REPS=3
BANDWIDTH=4.8
OUT_FILE=""
DEVICE=cuda:0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --llama-bench) LLAMA_BENCH=$2; shift 2 ;;
    -p) N_PROMPT=$2; shift 2 ;;
    -n) N_GEN=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    --bandwidth-tbs) BANDWIDTH=$2; shift 2 ;;
    --out) OUT_FILE=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
BENCH="$BIN_DIR/sinew-model-bench"
if [ ! -x "$BENCH" ]; then
  echo "missing $BENCH (build it, or give --bin-dir)" >&2
  exit 1
fi
if [ -n "$LLAMA_BENCH" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "--llama-bench $LLAMA_BENCH is not an executable" >&2
  exit 1
fi
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /tmp/sinew-gpu-bench.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
if [ ! -f "$WORK/llama1b-Q4_K.gguf" ]; then
  echo "== writing the 1.1B random llama models to $WORK" >&2
  "$BENCH" --write-llama-1b "$WORK"
fi
MODELS=("$WORK/llama1b-F16.gguf" "$WORK/llama1b-Q8_0.gguf" "$WORK/llama1b-Q4_K.gguf")

: > "$WORK/sinew.tsv"
for m in "${MODELS[@]}"; do
  echo "== sinew-model-bench --device $DEVICE $(basename "$m") (pp$N_PROMPT, tg$N_GEN, best of $REPS)" >&2
  "$BENCH" -m "$m" --device "$DEVICE" -t 1 -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" | tail -n +2 \
    >> "$WORK/sinew.tsv" || echo "sinew-model-bench failed on $m" >&2
done

: > "$WORK/llama.jsonl"
if [ -n "$LLAMA_BENCH" ]; then
  for m in "${MODELS[@]}"; do
    echo "== $LLAMA_BENCH -ngl 99 $(basename "$m")" >&2
    "$LLAMA_BENCH" -m "$m" -ngl 99 -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -o json \
      > "$WORK/llama-one.json" || { echo "llama-bench failed on $m" >&2; continue; }
    python3 -c 'import json,sys; [print(json.dumps(dict(r, sinew_model=sys.argv[1]))) for r in json.load(open(sys.argv[2]))]' \
      "$(basename "$m")" "$WORK/llama-one.json" >> "$WORK/llama.jsonl"
  done
fi

python3 - "$WORK/sinew.tsv" "$WORK/llama.jsonl" "$BANDWIDTH" <<'PY' | tee "${OUT_FILE:-/dev/null}"
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
theirs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    test = "pp%d" % r["n_prompt"] if r.get("n_gen", 0) == 0 else "tg%d" % r["n_gen"]
    theirs[(r["sinew_model"], test)] = float(r["avg_ts"])
bandwidth = float(sys.argv[3]) * 1e12
# Weight bytes read per generated token: every layer's matrices and the output
# matrix (the embedding contributes one row). Bytes per weight of each type.
E, L, F, V, QD, KD = 2048, 16, 8192, 32000, 2048, 512
matmul_params = L * (E * (QD + 2 * KD) + QD * E + 3 * E * F) + E * V
bytes_per = {"F16": 2.0, "Q8_0": 34 / 32, "Q4_K": 144 / 256}
hdr = "%-20s %-5s %-6s %11s %9s" % ("model", "type", "test", "sinew t/s", "of limit")
if theirs:
    hdr += " %11s %7s" % ("llama.cpp", "ratio")
print(hdr)
for model, wtype, params, backend, threads, test, tps in rows:
    tps = float(tps)
    frac = ""
    if test.startswith("tg") and wtype in bytes_per:
        limit = bandwidth / (matmul_params * bytes_per[wtype])
        frac = "%.1f%%" % (100 * tps / limit)
    line = "%-20s %-5s %-6s %11.1f %9s" % (model, wtype, test, tps, frac)
    if theirs:
        ref = theirs.get((model, test))
        line += " %11s %7s" % (("%.1f" % ref, "%.2fx" % (tps / ref)) if ref else ("n/a", "n/a"))
    print(line)
print("(bandwidth limit: %.1f TB/s; %s)" % (bandwidth / 1e12,
      "llama.cpp from --llama-bench" if theirs else "no --llama-bench given: no ratios"))
PY
