#!/usr/bin/env bash
# The main job: brings the whole platform up on this machine on embedded defaults and
# submits a first task whose events stream to the terminal.
#
#   sinew-store     the session log (RocksDB) on 127.0.0.1, a fresh data directory
#   sinew-sandboxd  runc sandboxes (needs root; the image is built on first use)
#   sinew-model     the in-house model over ../shared/models/stories260K.gguf, when built
#   sinew-harness   the REST API and agent loop on 127.0.0.1:8080 (SINEW_HARNESS_PORT)
#
# Then it submits the first task to the default model and streams its events, and a
# second task to the scripted demo model (a stand-in for a tool-using model, named as
# such) that writes a program in a sandbox, runs it and reads the result.
#
# Env: SINEW_BUILD_DIR (build), SINEW_MODEL_FILE (GGUF for sinew-model),
#      SINEW_MODEL_URL + SINEW_MODEL_KIND (openai|anthropic) + SINEW_MODEL_NAME +
#      SINEW_MODEL_API_KEY: use that endpoint instead of sinew-model,
#      SINEW_LOCAL_MODEL_KIND (openai|anthropic): the protocol the harness speaks to
#      sinew-model (Chat Completions by default; anthropic: its Messages API),
#      SINEW_PROMPT (the first task), SINEW_KEEP=1 (leave everything running; Ctrl-C ends).
# TLS is on by default: a local CA and certificates are made with openssl
# (scripts/make-certs.sh, in the run's data directory); the harness's REST API and
# sinew-model's HTTP API serve HTTPS only, and the gRPC links harness -> sinew-store and
# harness -> sinew-sandboxd are mTLS (each side presents a certificate of the local CA;
# docs/security.md). `run.sh --insecure` runs plain HTTP and plain gRPC instead.
# Everything listens on loopback only. Works on a fresh machine after ./scripts/install-deps.sh.
set -euo pipefail
SECURE=1
for arg in "$@"; do
  case "$arg" in
    --insecure) SECURE=0 ;;
    *) echo "run.sh: unknown argument $arg (the only one is --insecure)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
ROOT=$PWD
# The sandbox image (debootstrap, mostly waiting on the network) is built while the
# binaries compile; a ready image is left alone.
IMAGE_PID=""
IMAGE_LOG=$(mktemp /tmp/sinew-image-XXXXXX.log)
if [ "$(id -u)" = 0 ] && command -v runc >/dev/null; then
  ./sandbox-agent/image/build-image.sh default >"$IMAGE_LOG" 2>&1 &
  IMAGE_PID=$!
fi
# Only the binaries this job starts: a first run builds in minutes, not the whole suite.
# A fresh build directory is configured without debug information (the same -O2 code as
# the default RelWithDebInfo): a quarter less compile time; and without ccache, whose
# misses cost about a fifth more per file while its cache is empty (SINEW_CCACHE). An
# existing build directory keeps its configuration.
# GCC collects its garbage less often (at most about 2.5 GB per compiler here): 5-13%
# less compile time per file, the same code.
GGC="--param ggc-min-expand=400 --param ggc-min-heapsize=4194304"
first=()
[ -f "${SINEW_BUILD_DIR:-build}/CMakeCache.txt" ] || first=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG $GGC" -DSINEW_CCACHE=OFF)
SINEW_TARGETS="sinew-store sinew-sandboxd sinew-sandbox-agent sinew-model sinew-harness sinew" ./scripts/build.sh ${first[@]+"${first[@]}"}
BIN=$ROOT/${SINEW_BUILD_DIR:-build}/bin
DATA=$(mktemp -d /tmp/sinew-run-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DATA" "$IMAGE_LOG"
}
trap cleanup EXIT
wait_line() {  # wait_line FILE PATTERN: waits up to 60 s for PATTERN in FILE
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "run.sh: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}
if [ "$SECURE" = 1 ]; then
  CERTS=$DATA/certs
  ./scripts/make-certs.sh "$CERTS" harness model store sandboxd
  SCHEME=https
  CA=$CERTS/ca.pem
  MODEL_TLS=(--tls-cert "$CERTS/model.pem" --tls-key "$CERTS/model-key.pem")
  HARNESS_TLS="\"tls\": {\"cert_file\": \"$CERTS/harness.pem\", \"key_file\": \"$CERTS/harness-key.pem\", \"ca_file\": \"$CA\"},"
  MODEL_CA="\"ca_file\": \"$CA\","
  STORE_TLS=(--tls-cert "$CERTS/store.pem" --tls-key "$CERTS/store-key.pem" --tls-ca "$CA")
  SANDBOXD_TLS=(--tls-cert "$CERTS/sandboxd.pem" --tls-key "$CERTS/sandboxd-key.pem" --tls-ca "$CA")
  HARNESS_GRPC_TLS="\"grpc_tls\": {\"cert_file\": \"$CERTS/harness.pem\", \"key_file\": \"$CERTS/harness-key.pem\", \"ca_file\": \"$CA\"},"
  CURL_CA=(--cacert "$CA")
  echo "== TLS              on: HTTPS and gRPC mTLS (local CA $CA); run.sh --insecure for plain"
else
  SCHEME=http CA="" MODEL_TLS=() HARNESS_TLS="" MODEL_CA="" CURL_CA=() STORE_TLS=() SANDBOXD_TLS=() HARNESS_GRPC_TLS=""
  echo "== TLS              off (--insecure)"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. The session store.
"$BIN/sinew-store" --db "$DATA/store" --listen 127.0.0.1:0 ${STORE_TLS[@]+"${STORE_TLS[@]}"} >"$DATA/store.out" 2>&1 &
PIDS+=($!)
wait_line "$DATA/store.out" "listening on"
STORE=$(awk '/listening on/ {print $NF}' "$DATA/store.out")
echo "== sinew-store      $STORE  ($DATA/store)${STORE_TLS[*]:+, mTLS}"

# 2. The sandboxes: root and runc are needed; the image is built once (debootstrap).
SANDBOXD=""
if [ "$(id -u)" = 0 ] && command -v runc >/dev/null; then
  if ! wait "$IMAGE_PID"; then
    echo "run.sh: building the sandbox image failed:" >&2; cat "$IMAGE_LOG" >&2; exit 1
  fi
  cat "$IMAGE_LOG"
  SBPORT=$(free_port)
  "$BIN/sinew-sandboxd" --listen "127.0.0.1:$SBPORT" --state-dir "$DATA/sandboxd" \
    --cgroup-parent "sinew-run-$$" ${SANDBOXD_TLS[@]+"${SANDBOXD_TLS[@]}"} >"$DATA/sandboxd.out" 2>&1 &
  PIDS+=($!)
  wait_line "$DATA/sandboxd.out" "listening"
  SANDBOXD="127.0.0.1:$SBPORT"
  echo "== sinew-sandboxd   $SANDBOXD${SANDBOXD_TLS[*]:+  (mTLS)}"
else
  echo "== sinew-sandboxd   skipped (needs root and runc): sandbox tools are off"
fi

# 3. A model: the in-house engine, or the endpoint given in the environment.
MODEL_FILE=${SINEW_MODEL_FILE:-$ROOT/../shared/models/stories260K.gguf}
MODELS=""
DEFAULT=demo-scripted
if [ -n "${SINEW_MODEL_URL:-}" ]; then
  MODELS="\"remote\": {\"kind\": \"${SINEW_MODEL_KIND:-openai}\", \"base_url\": \"$SINEW_MODEL_URL\",
    \"model\": \"${SINEW_MODEL_NAME:-default}\", \"api_key_secret\": \"model_key\"},"
  DEFAULT=remote
  echo "== model            ${SINEW_MODEL_KIND:-openai} endpoint $SINEW_MODEL_URL"
elif [ -x "$BIN/sinew-model" ] && [ -f "$MODEL_FILE" ]; then
  "$BIN/sinew-model" --model "$MODEL_FILE" --host 127.0.0.1 --port 0 --grpc-port -1 ${MODEL_TLS[@]+"${MODEL_TLS[@]}"} >"$DATA/model.out" 2>&1 &
  PIDS+=($!)
  wait_line "$DATA/model.out" "http listening on"
  MODEL_ADDR=$(awk '/http listening on/ {print $NF}' "$DATA/model.out")
  MODEL_ID=$(basename "$MODEL_FILE" .gguf)
  # A tiny completion model: no tools, a small context.
  LOCAL_KIND=${SINEW_LOCAL_MODEL_KIND:-openai}
  case "$LOCAL_KIND" in openai|anthropic) ;; *) echo "SINEW_LOCAL_MODEL_KIND must be openai or anthropic" >&2; exit 2;; esac
  MODELS="\"local\": {\"kind\": \"$LOCAL_KIND\", \"base_url\": \"$SCHEME://localhost:${MODEL_ADDR##*:}/v1\", $MODEL_CA \"model\": \"$MODEL_ID\",
    \"tools\": false, \"context_tokens\": 256, \"max_output_tokens\": 96},"
  DEFAULT=local
  echo "== sinew-model      $SCHEME://$MODEL_ADDR  ($MODEL_FILE; the harness speaks $LOCAL_KIND's API)"
else
  echo "== model            sinew-model not built; the scripted demo model answers instead"
fi

# 4. The harness.
cat >"$DATA/demo-script.json" <<'JSON'
{"responses": [
  {"text": "I will write a small program in the sandbox.", "tool_calls": [{"name": "write_file",
    "input": {"path": "fib.py", "content": "a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a)\n"}}]},
  {"text": "Now I run it.", "tool_calls": [{"name": "bash", "input": {"command": "python3 fib.py | tee result.txt"}}]},
  {"text": "And read the result back.", "tool_calls": [{"name": "read_file", "input": {"path": "result.txt"}}]},
  {"text": "The 20th Fibonacci number is 6765."}]}
JSON
HPORT=${SINEW_HARNESS_PORT:-8080}
cat >"$DATA/harness.json" <<JSON
{"listen": "127.0.0.1:$HPORT", $HARNESS_TLS $HARNESS_GRPC_TLS
 "store": {"address": "$STORE"},
 $( [ -n "$SANDBOXD" ] && echo "\"sandboxd\": {\"address\": \"$SANDBOXD\"}," )
 "api_keys": {"sha256:a9b04fa55433b975eb4feb904daab0c23246f1b3a1c757b3f0c3b47adbd5317a": "demo"},
 "default_model": "$DEFAULT",
 "models": {$MODELS
   "demo-scripted": {"kind": "scripted", "script": "$DATA/demo-script.json"}},
 "secrets": {"model_key": {"value": "${SINEW_MODEL_API_KEY:-none}"}}}
JSON
"$BIN/sinew-harness" --config "$DATA/harness.json" >"$DATA/harness.out" 2>&1 &
PIDS+=($!)
wait_line "$DATA/harness.out" "listening on"
API=$SCHEME://localhost:$(awk '/listening on/ {print $NF}' "$DATA/harness.out" | sed 's/.*://')
KEY=sk-sinew-demo
echo "== sinew-harness    $API  (API key $KEY)"
echo "== web console      $API/ui/#key=$KEY"

# 5. Tasks, submitted and followed with the `sinew` CLI (events stream as they happen).
SINEW=("$BIN/sinew" --server "$API" --api-key "$KEY" ${CA:+--ca-file "$CA"})
PROMPT=${SINEW_PROMPT:-Once upon a time, a little robot}
echo "== first task (model $DEFAULT): sinew run \"$PROMPT\""
"${SINEW[@]}" run "$PROMPT" --title "first task" || echo "(the session did not complete: exit $?)"
if [ -n "$SANDBOXD" ]; then
  echo "== second task (scripted demo model, sandbox tools):"
  "${SINEW[@]}" run "Compute the 20th Fibonacci number with a program." --model demo-scripted \
    || echo "(the session did not complete: exit $?)"
fi
echo "== sessions:"
"${SINEW[@]}" sessions list
echo "== metrics:"
curl -s ${CURL_CA[@]+"${CURL_CA[@]}"} "$API/metrics" | grep -E '^sinew_harness_(sessions\{|model_calls_total|tool_calls_total|sandbox_provisions_total)' || true
if [ "${SINEW_KEEP:-0}" = 1 ]; then
  echo "== all running; try: $BIN/sinew --server $API --api-key $KEY ${CA:+--ca-file $CA }sessions list   (Ctrl-C ends)"
  wait
fi
