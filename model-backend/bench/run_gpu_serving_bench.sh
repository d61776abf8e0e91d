#!/usr/bin/env bash
# Serving benchmark of the model engine on a GPU (issue 16; run by
# scripts/device-check.sh there). On the random-weight 1.1B llama of
# run_gpu_bench.sh (written by sinew-model-bench --write-llama-1b) in Q8_0 and
# Q4_K, or on the -m files given:
#   throughput  --streams concurrent streams (default 1,8,32,128) of -p prompt
#               tokens (512) and -n new ones (128), greedy, through the ServingEngine
#               (bench_serving), batch-invariant and not: the generation rate once
#               every stream has its first token (llama-batched-bench's S_TG) and
#               the end-to-end rate (prefill included; llama.cpp's pl*tg/t); beside
#               llama.cpp's llama-batched-bench on the same file and shapes (-fa, all
#               layers on the GPU) when --llama-batched-bench is given, with ratios
#   agent       --turns turns (20), each re-sending the history plus a short
#               message: time to first token of turn 1 and of the last turn, prefix
#               cache on and off
#   step loop   per step: planning, queueing the forward, sampling (with the wait
#               for the device), taking the tokens in, and how many steps were
#               planned while the step before ran (step overlap)
#   overlap     --overlap-streams streams (default 8,32) again with step overlap
#               off (bench_serving --overlap 0): generation tok/s on and off
#
# usage: model-backend/bench/run_gpu_serving_bench.sh [--bin-dir DIR] [--work-dir DIR]
#            [--llama-batched-bench PATH] [--streams 1,8,32,128] [-p 512] [-n 128]
#            [--turns 20] [--types Q8_0,Q4_K] [-m FILE.gguf]... [--device cuda:0]
#            [-t 1] [--step-tokens 2048] [--overlap-streams 8,32] [--out FILE]
# --bin-dir: where bench_serving and sinew-model-bench are (default: build/bin);
# --device cpu and a small -m model try the script without a GPU. Models (~4 GB)
# go to --work-dir (default: a temporary directory removed at exit); existing
# files there are reused.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN_DIR="$HERE/../../build/bin"
WORK=""
LLAMA_BB=""
STREAMS=1,8,32,128
N_PROMPT=512
N_GEN=128
TURNS=20
TYPES=Q8_0,Q4_K
MODELS=()
DEVICE=cuda:0
THREADS=1
STEP_TOKENS=2048
OVERLAP_STREAMS=8,32
OUT_FILE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    --llama-batched-bench) LLAMA_BB=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    -p) N_PROMPT=$2; shift 2 ;;
    -n) N_GEN=$2; shift 2 ;;
    --turns) TURNS=$2; shift 2 ;;
    --types) TYPES=$2; shift 2 ;;
    -m) MODELS+=("$2"); shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --step-tokens) STEP_TOKENS=$2; shift 2 ;;
    --overlap-streams) OVERLAP_STREAMS=$2; shift 2 ;;
    --out) OUT_FILE=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
SERVING="$BIN_DIR/bench_serving"
if [ ! -x "$SERVING" ]; then
  echo "missing $SERVING (build it, or give --bin-dir)" >&2
  exit 1
fi
if [ -n "$LLAMA_BB" ] && [ ! -x "$LLAMA_BB" ]; then
  echo "--llama-batched-bench $LLAMA_BB is not an executable" >&2
  exit 1
fi
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /tmp/sinew-gpu-serving.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
if [ ${#MODELS[@]} -eq 0 ]; then
  if [ ! -f "$WORK/llama1b-Q4_K.gguf" ]; then
    echo "== writing the 1.1B random llama models to $WORK" >&2
    "$BIN_DIR/sinew-model-bench" --write-llama-1b "$WORK"
  fi
  IFS=, read -r -a types <<< "$TYPES"
  for t in "${types[@]}"; do MODELS+=("$WORK/llama1b-$t.gguf"); done
fi
most=$(tr , '\n' <<< "$STREAMS" | sort -n | tail -1)

: > "$WORK/sinew.results"
: > "$WORK/llama.jsonl"
for m in "${MODELS[@]}"; do
  name=$(basename "$m")
  echo "== bench_serving --device $DEVICE $name: streams $STREAMS, $N_PROMPT + $N_GEN tokens; agent $TURNS turns" >&2
  if "$SERVING" --model "$m" --device "$DEVICE" --threads "$THREADS" --streams "$STREAMS" \
       --prompt "$N_PROMPT" --tokens "$N_GEN" --reference 0 --turns "$TURNS" \
       --max-running "$most" --step-tokens "$STEP_TOKENS" --sections throughput,agent \
       > "$WORK/sinew-$name.log" 2>&1; then
    sed -n "s/^RESULT /model=$name /p" "$WORK/sinew-$name.log" >> "$WORK/sinew.results"
  else
    echo "bench_serving failed on $name:" >&2
    tail -5 "$WORK/sinew-$name.log" >&2
  fi
  grep -v '^RESULT' "$WORK/sinew-$name.log" >&2 || true
  if [ -n "$OVERLAP_STREAMS" ]; then
    echo "== bench_serving --overlap 0 $name: streams $OVERLAP_STREAMS" >&2
    if "$SERVING" --model "$m" --device "$DEVICE" --threads "$THREADS" \
         --streams "$OVERLAP_STREAMS" --prompt "$N_PROMPT" --tokens "$N_GEN" --reference 0 \
         --max-running "$most" --step-tokens "$STEP_TOKENS" --sections throughput --overlap 0 \
         > "$WORK/sinew-sync-$name.log" 2>&1; then
      sed -n "s/^RESULT throughput /model=$name sync /p" "$WORK/sinew-sync-$name.log" \
        >> "$WORK/sinew.results"
    else
      echo "bench_serving --overlap 0 failed on $name:" >&2
      tail -5 "$WORK/sinew-sync-$name.log" >&2
    fi
  fi
  if [ -n "$LLAMA_BB" ]; then
    echo "== $(basename "$LLAMA_BB") -fa $name" >&2
    # Room for every stream's prompt and generation at the largest width.
    "$LLAMA_BB" -m "$m" -ngl 99 -fa -t "$THREADS" -c $((most * (N_PROMPT + N_GEN))) \
      -b 2048 -ub 512 -npp "$N_PROMPT" -ntg "$N_GEN" -npl "$STREAMS" --output-format jsonl \
      2> "$WORK/llama-$name.err" | grep '^{' \
      | python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), model=sys.argv[1]))) for l in sys.stdin]' "$name" \
      >> "$WORK/llama.jsonl" || { echo "llama-batched-bench failed on $name:" >&2; tail -5 "$WORK/llama-$name.err" >&2; }
  fi
done

python3 - "$WORK/sinew.results" "$WORK/llama.jsonl" <<'PY' | tee "${OUT_FILE:-/dev/null}"
import json, sys
ours = []
for line in open(sys.argv[1]):
    f = line.split()
    ours.append((f[1], dict(kv.split("=", 1) for kv in [f[0]] + f[2:])))
theirs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    theirs[(r["model"], int(r["pl"]))] = r

def ratio(a, b):
    return "%.2fx" % (a / b) if b else "n/a"

print("aggregate generation tok/s (S_TG: once every stream has its first token) and end to end")
print("%-18s %7s | %11s %11s %11s | %11s %11s %7s | %7s %7s" % (
    "model", "streams", "inv gen", "loose gen", "llama S_TG", "inv e2e", "llama e2e",
    "e2e", "gen", "loose"))
rows = {}
for kind, r in ours:
    if kind == "throughput":
        rows.setdefault((r["model"], int(r["streams"])), {})[r["mode"]] = r
for (model, n), modes in sorted(rows.items()):
    inv, loose = modes.get("invariant", {}), modes.get("loose", {})
    ref = theirs.get((model, n))
    ref_gen = float(ref["speed_tg"]) if ref else 0
    ref_e2e = n * float(ref["tg"]) / float(ref["t"]) if ref else 0
    ig, lg = float(inv.get("gen_tps", 0)), float(loose.get("gen_tps", 0))
    ie = float(inv.get("e2e_tps", 0))
    print("%-18s %7d | %11.1f %11.1f %11s | %11.1f %11s %7s | %7s %7s" % (
        model, n, ig, lg, "%.1f" % ref_gen if ref else "n/a", ie,
        "%.1f" % ref_e2e if ref else "n/a", ratio(ie, ref_e2e), ratio(ig, ref_gen),
        ratio(lg, ref_gen)))
print("(ratios are sinew / llama.cpp: e2e batch-invariant, gen batch-invariant, gen loose)"
      if theirs else "(no --llama-batched-bench given: no ratios)")
print()
print("step loop per step (us), batch-invariant runs: forward is the time to queue the step")
print("(or fill its graph), sample the wait for its tokens; without step overlap the device")
print("idles through plan and take in, with it those of overlapped steps run while it works")
print("%-18s %7s %7s %10s %9s %9s %9s %9s" % ("model", "streams", "steps", "overlapped", "plan",
                                            "forward", "sample", "take in"))
for (model, n), modes in sorted(rows.items()):
    r = modes.get("invariant")
    if not r or "steps" not in r:
        continue
    plan, fwd, smp, absorb = (float(r[k]) for k in ("plan_us", "forward_us", "sample_us", "absorb_us"))
    print("%-18s %7d %7.0f %10s %9.1f %9.1f %9.1f %9.1f" % (
        model, n, float(r["steps"]), r.get("overlapped", "n/a"), plan, fwd, smp, absorb))
sync = {}
for kind, r in ours:
    if kind == "sync":
        sync[(r["model"], int(r["streams"]), r["mode"])] = r
if sync:
    print()
    print("step overlap: generation tok/s (S_TG) with overlap (default) and without (--overlap 0)")
    print("%-18s %7s %-9s %11s %11s %7s" % ("model", "streams", "mode", "overlap", "no overlap",
                                         "gain"))
    for (model, n, mode), r in sorted(sync.items()):
        on = float(rows.get((model, n), {}).get(mode, {}).get("gen_tps", 0))
        off = float(r["gen_tps"])
        print("%-18s %7d %-9s %11.1f %11.1f %7s" % (model, n, mode, on, off, ratio(on, off)))
print()
print("agent workload: time to first token (ms)")
print("%-18s %-6s %9s %9s %9s" % ("model", "cache", "turn 1", "last", "last/1"))
for kind, r in ours:
    if kind == "agent":
        t = [float(x) for x in r["ttft_ms"].split(",")]
        print("%-18s %-6s %9.1f %9.1f %8.2fx" % (r["model"], r["cache"], t[0], t[-1], t[-1] / t[0]))
PY
