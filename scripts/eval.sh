#!/usr/bin/env bash
# Runs an evaluation on a local stack: brings up sinew-store, sinew-sandboxd and
# sinew-harness on loopback (the way scripts/run.sh does), then runs
# `sinew eval run SUITE ARGS...` against them and prints where the report is.
#
#   scripts/eval.sh evals/examples --agent oracle --config 1x --config g1x-c3x --trials 2
#   scripts/eval.sh evals/examples --agent harness --model remote --config g1x-c3x
#
# Arguments after SUITE are those of `sinew eval run` (docs/eval.md); without --job the job
# directory is ./sinew-eval-<UTC time>. For --agent harness the harness gets the model of
# SINEW_MODEL_URL (+ SINEW_MODEL_KIND, SINEW_MODEL_NAME, SINEW_MODEL_API_KEY) named
# "remote", and always "scripted-demo" (a scripted stand-in for a tool-using model).
# Needs root and runc (the sandboxes); builds the image on first use. SINEW_NO_BUILD=1 skips
# the build (scripts/build.sh) and uses build/bin as it is.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: scripts/eval.sh SUITE [sinew eval run arguments...]" >&2; exit 2
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
SUITE=$1; shift
case "$SUITE" in /*) ;; *) SUITE=$ROOT/$SUITE ;; esac
if [ "$(id -u)" != 0 ] || ! command -v runc >/dev/null; then
  echo "eval.sh: needs root and runc (sandboxes); run scripts/install-deps.sh as root" >&2; exit 1
fi
[ "${SINEW_NO_BUILD:-0}" = 1 ] || ./scripts/build.sh  # SINEW_NO_BUILD=1: use the existing build
BIN=$ROOT/${SINEW_BUILD_DIR:-build}/bin
DATA=$(mktemp -d /tmp/sinew-eval-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT
wait_line() {  # wait_line FILE PATTERN: waits up to 60 s for PATTERN in FILE
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "eval.sh: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$BIN/sinew-store" --db "$DATA/store" --listen 127.0.0.1:0 >"$DATA/store.out" 2>&1 &
PIDS+=($!)
wait_line "$DATA/store.out" "listening on"
STORE=$(awk '/listening on/ {print $NF}' "$DATA/store.out")

./sandbox-agent/image/build-image.sh default
SBPORT=$(free_port)
"$BIN/sinew-sandboxd" --listen "127.0.0.1:$SBPORT" --state-dir "$DATA/sandboxd" \
  --cgroup-parent "sinew-eval-$$" --warm-pool-size 0 >"$DATA/sandboxd.out" 2>&1 &
PIDS+=($!)
wait_line "$DATA/sandboxd.out" "listening"
SANDBOXD=127.0.0.1:$SBPORT

MODELS=""
if [ -n "${SINEW_MODEL_URL:-}" ]; then
  MODELS="\"remote\": {\"kind\": \"${SINEW_MODEL_KIND:-openai}\", \"base_url\": \"$SINEW_MODEL_URL\",
    \"model\": \"${SINEW_MODEL_NAME:-default}\", \"api_key_secret\": \"model_key\"},"
fi
cat >"$DATA/scripted.json" <<'JSON'
{"responses": [{"text": "Let me look.", "tool_calls": [{"name": "bash", "input": {"command": "ls -la"}}]},
               {"text": "I am a scripted stand-in and stop here."}]}
JSON
cat >"$DATA/harness.json" <<JSON
{"listen": "127.0.0.1:0", "store": {"address": "$STORE"}, "sandboxd": {"address": "$SANDBOXD"},
 "api_keys": {"sk-sinew-eval": "eval"},
 "models": {$MODELS "scripted-demo": {"kind": "scripted", "script": "$DATA/scripted.json"}},
 "secrets": {"model_key": {"value": "${SINEW_MODEL_API_KEY:-none}"}}}
JSON
"$BIN/sinew-harness" --config "$DATA/harness.json" >"$DATA/harness.out" 2>&1 &
PIDS+=($!)
wait_line "$DATA/harness.out" "listening on"
API=http://$(awk '/listening on/ {print $NF}' "$DATA/harness.out")
echo "== store $STORE, sandboxd $SANDBOXD, harness $API"
"$BIN/sinew" --server "$API" --api-key sk-sinew-eval eval run "$SUITE" --sandboxd "$SANDBOXD" "$@"
