#!/usr/bin/env bash
# The harness under ThreadSanitizer (issue 13; docs/fuzzing.md), without gRPC in the
# process: Debian's gRPC is not TSan-instrumented, and a race report through it cannot be
# told from one of ours. So the harness runs with its embedded store (RocksDB in the
# process), the scripted model, an OpenAI-compatible test double (harness/tests/
# model_double.py, called streamed and whole) and the `http_request` tool, no
# sandboxd: what runs is the harness's own code (HTTP server, request threads, drivers,
# the model clients' and tools' libcurl threads, lease renewal and the scanner, metrics)
# and the store's.
#
#   scripts/tsan-harness.sh [BUILD_DIR (build-tsan)] [--sessions N (120)]
#
# BUILD_DIR must be configured with -DSINEW_SANITIZE=thread and have sinew-harness built:
#   cmake -S . -B build-tsan -G Ninja -DSINEW_SANITIZE=thread -DSINEW_BUILD_TESTS=OFF \
#     -DSINEW_BUILD_BENCH=OFF && ninja -C build-tsan sinew-harness
# Runs scripts/tsan_harness_driver.py against it, stops it with SIGTERM, and exits 0 only
# when the driver saw no failure, the harness exited 0, and TSan wrote no report.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-tsan SESSIONS=120
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) SESSIONS=$2; shift 2 ;;
    -*) echo "tsan-harness.sh: unknown argument $1" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
  esac
done
if ! grep -q '^SINEW_SANITIZE:STRING=thread$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "tsan-harness.sh: $BUILD is not a -DSINEW_SANITIZE=thread build" >&2
  exit 2
fi
DATA=$(mktemp -d /tmp/sinew-tsan-XXXXXX)
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
TPORT=$(free_port) HPORT=$(free_port) MPORT=$(free_port)
mkdir -p "$DATA/www" "$DATA/tsan"
echo '{"ok": true}' >"$DATA/www/a"
/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory "$DATA/www" "$TPORT" >/dev/null 2>&1 &
TARGET_PID=$!
/usr/bin/python3 harness/tests/model_double.py "$MPORT" 30 "http://127.0.0.1:$TPORT/a" >/dev/null 2>&1 &
MODEL_PID=$!
trap 'kill $TARGET_PID $MODEL_PID 2>/dev/null || true' EXIT
cat >"$DATA/script.json" <<JSON
{"loop": true, "responses": [
  {"text": "fetching", "delay_ms": 30, "tool_calls": [{"name": "http_request", "input": {"url": "http://127.0.0.1:$TPORT/a"}}]},
  {"text": "again", "delay_ms": 30, "tool_calls": [{"name": "http_request", "input": {"url": "http://127.0.0.1:$TPORT/a"}}]},
  {"text": "done", "delay_ms": 30}]}
JSON
cat >"$DATA/harness.json" <<JSON
{"listen": "127.0.0.1:$HPORT",
 "store": {"dir": "$DATA/store", "durability": "async"},
 "api_keys": {"tsan-key": "tsan"},
 "workers": 32, "lease_ttl_ms": 3000, "scan_interval_ms": 500,
 "default_model": "scripted",
 "models": {"scripted": {"kind": "scripted", "script": "$DATA/script.json"},
            "streamed": {"kind": "openai", "base_url": "http://127.0.0.1:$MPORT/v1", "stream": "on"},
            "whole": {"kind": "openai", "base_url": "http://127.0.0.1:$MPORT/v1", "stream": "off"}},
 "http_request": {"allow": [{"host": "127.0.0.1:$TPORT"}]}}
JSON
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$DATA/tsan/report suppressions=$PWD/cmake/tsan.supp"
"$BUILD/bin/sinew-harness" --config "$DATA/harness.json" >"$DATA/harness.out" 2>&1 &
HARNESS_PID=$!
for _ in $(seq 600); do
  grep -q "listening on" "$DATA/harness.out" && break
  kill -0 $HARNESS_PID 2>/dev/null || break
  sleep 0.1
done
status=0
/usr/bin/python3 scripts/tsan_harness_driver.py --api "127.0.0.1:$HPORT" --key tsan-key \
  --sessions "$SESSIONS" --models scripted,streamed,whole || status=1
kill -TERM $HARNESS_PID 2>/dev/null || true
harness_rc=0
wait $HARNESS_PID || harness_rc=$?
if [ "$harness_rc" != 0 ]; then
  echo "tsan-harness.sh: the harness exited with $harness_rc (66: TSan reported)" >&2
  status=1
fi
reports=$(cat "$DATA"/tsan/report* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
echo "tsan-harness.sh: $reports ThreadSanitizer reports; data in $DATA"
if [ "$reports" != 0 ]; then
  grep -h -A12 '^WARNING: ThreadSanitizer' "$DATA"/tsan/report* | head -80 >&2
  status=1
fi
exit $status
