#!/usr/bin/env bash
# Runs an evaluation on a local stack: brings up sinew-store, sinew-sandboxd and
# sinew-harness on loopback (the way scripts/run.sh does), then runs `sinew eval` against
# them and prints where the report is. Every trial is a session of that harness, and the
# store lives in the job directory (JOB/store), so the sessions outlive this script: later
# calls bring the stack up again on the same store.
#
#   scripts/eval.sh evals/examples --agent oracle --config 1x --config g1x-c3x --trials 2
#   scripts/eval.sh evals/examples --agent harness --model remote --config g1x-c3x
#   scripts/eval.sh resume JOB [--concurrency C]    continue a stopped or killed job
#   scripts/eval.sh cli JOB replay SESSION          any `sinew` command against the job's
#   scripts/eval.sh cli JOB sessions list           store (sessions, replay, fork, ...)
#   scripts/eval.sh console JOB                     keep the stack up on the job's store and
#                                                   print the web console's URL (Ctrl-C stops)
#
# Arguments after SUITE are those of `sinew eval run` (docs/eval.md); without --job the job
# directory is ./sinew-eval-<UTC time> (relative paths are taken from the current
# directory). For --agent harness the harness gets the model of SINEW_MODEL_URL
# (+ SINEW_MODEL_KIND, SINEW_MODEL_NAME, SINEW_MODEL_API_KEY) named "remote", and always
# "scripted-demo" (a scripted stand-in for a tool-using model); `oracle` and `nop` are the
# harness's built-in agents. Needs root and runc (the sandboxes); builds the image on first
# use. SINEW_NO_BUILD=1 skips the build (scripts/build.sh) and uses build/bin as it is.
# The stack's logs are in JOB/stack/ (overwritten by each call).
set -euo pipefail
usage() {
  echo "usage: scripts/eval.sh SUITE [sinew eval run arguments...]" >&2
  echo "       scripts/eval.sh resume JOB [sinew eval resume arguments...]" >&2
  echo "       scripts/eval.sh cli JOB SINEW-ARGUMENTS..." >&2
  echo "       scripts/eval.sh console JOB" >&2
  exit 2
}
[ $# -ge 1 ] || usage
CALLER=$PWD
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
MODE=run
case "$1" in
  resume|cli|console)
    MODE=$1; [ $# -ge 2 ] || usage
    JOB=$(absolute "$2"); shift 2
    [ -f "$JOB/job.json" ] || { echo "eval.sh: $JOB holds no job (no job.json)" >&2; exit 2; }
    [ "$MODE" != cli ] || [ $# -ge 1 ] || usage
    ;;
  *)
    SUITE=$1; shift
    [ -d "$SUITE" ] || SUITE="$(dirname "$0")/../$SUITE"  # as before: a path inside the repo
    SUITE=$(cd "$SUITE" 2>/dev/null && pwd) || { echo "eval.sh: no suite folder $1" >&2; exit 2; }
    JOB=""
    ARGS=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --job) [ $# -ge 2 ] || usage; JOB=$(absolute "$2"); shift 2 ;;
        --job=*) JOB=$(absolute "${1#--job=}"); shift ;;
        *) ARGS+=("$1"); shift ;;
      esac
    done
    [ -n "$JOB" ] || JOB=$CALLER/sinew-eval-$(date -u +%Y%m%d-%H%M%S)
    if [ -f "$JOB/job.json" ]; then
      echo "eval.sh: $JOB already holds a job; continue it with scripts/eval.sh resume $JOB" >&2; exit 2
    fi
    ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ "$(id -u)" != 0 ] || ! command -v runc >/dev/null; then
  echo "eval.sh: needs root and runc (sandboxes); run scripts/install-deps.sh as root" >&2; exit 1
fi
# Only the binaries this script starts (not the tests, benchmarks or the model server);
# a fresh build directory without debug information or ccache, as scripts/run.sh does.
# GCC collects its garbage less often (at most about 2.5 GB per compiler here): 5-13%
# less compile time per file, the same code.
GGC="--param ggc-min-expand=400 --param ggc-min-heapsize=4194304"
first=()
[ -f "${SINEW_BUILD_DIR:-build}/CMakeCache.txt" ] || first=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG $GGC" -DSINEW_CCACHE=OFF)
[ "${SINEW_NO_BUILD:-0}" = 1 ] || SINEW_TARGETS="sinew-store sinew-sandboxd sinew-sandbox-agent sinew-harness sinew" ./scripts/build.sh ${first[@]+"${first[@]}"}  # SINEW_NO_BUILD=1: use the existing build
BIN=$ROOT/${SINEW_BUILD_DIR:-build}/bin
mkdir -p "$JOB/stack"
LOGS=$JOB/stack            # logs and the harness config of this call
RUNTIME=$(mktemp -d /tmp/sinew-eval-XXXXXX)  # sandboxd's state: sandboxes are disposable
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$RUNTIME"
}
trap cleanup EXIT
wait_line() {  # wait_line FILE PATTERN: waits up to 60 s for PATTERN in FILE
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "eval.sh: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The store: the job's own, kept after this script ends.
"$BIN/sinew-store" --db "$JOB/store" --listen 127.0.0.1:0 >"$LOGS/store.out" 2>&1 &
PIDS+=($!)
wait_line "$LOGS/store.out" "listening on"
STORE=$(awk '/listening on/ {print $NF}' "$LOGS/store.out")

./sandbox-agent/image/build-image.sh default
SBPORT=$(free_port)
"$BIN/sinew-sandboxd" --listen "127.0.0.1:$SBPORT" --state-dir "$RUNTIME/sandboxd" \
  --cgroup-parent "sinew-eval-$$" --warm-pool-size 0 >"$LOGS/sandboxd.out" 2>&1 &
PIDS+=($!)
wait_line "$LOGS/sandboxd.out" "listening"
SANDBOXD=127.0.0.1:$SBPORT

MODELS=""
if [ -n "${SINEW_MODEL_URL:-}" ]; then
  MODELS="\"remote\": {\"kind\": \"${SINEW_MODEL_KIND:-openai}\", \"base_url\": \"$SINEW_MODEL_URL\",
    \"model\": \"${SINEW_MODEL_NAME:-default}\", \"api_key_secret\": \"model_key\"},"
fi
cat >"$LOGS/scripted.json" <<'JSON'
{"responses": [{"text": "Let me look.", "tool_calls": [{"name": "bash", "input": {"command": "ls -la"}}]},
               {"text": "I am a scripted stand-in and stop here."}]}
JSON
cat >"$LOGS/harness.json" <<JSON
{"listen": "127.0.0.1:0", "store": {"address": "$STORE"}, "sandboxd": {"address": "$SANDBOXD"},
 "api_keys": {"sk-sinew-eval": "eval"},
 "models": {$MODELS "scripted-demo": {"kind": "scripted", "script": "$LOGS/scripted.json"}},
 "secrets": {"model_key": {"value": "${SINEW_MODEL_API_KEY:-none}"}}}
JSON
"$BIN/sinew-harness" --config "$LOGS/harness.json" >"$LOGS/harness.out" 2>&1 &
PIDS+=($!)
wait_line "$LOGS/harness.out" "listening on"
API=http://$(awk '/listening on/ {print $NF}' "$LOGS/harness.out")
echo "== store $STORE ($JOB/store), sandboxd $SANDBOXD, harness $API" >&2
SINEW=("$BIN/sinew" --server "$API" --api-key sk-sinew-eval)
case "$MODE" in
  run) "${SINEW[@]}" eval run "$SUITE" --job "$JOB" --sandboxd "$SANDBOXD" ${ARGS[@]+"${ARGS[@]}"} ;;
  resume) "${SINEW[@]}" eval resume "$JOB" --sandboxd "$SANDBOXD" "$@" ;;
  cli) "${SINEW[@]}" "$@" ;;
  console)
    # The job's sessions in the web console (docs/console.md); its results.json is opened
    # in the page. Runs until interrupted.
    echo "== console: $API/ui/#key=sk-sinew-eval&/evals (open $JOB/results.json there); Ctrl-C stops" >&2
    wait ;;
esac
