#!/usr/bin/env bash
# The soak (issue 13; ctest `soak_30min`, label `long`): the platform on loopback under TLS
# with N sessions in flight for M minutes, each a scripted model making three sandbox tool
# calls in a real runc sandbox. Needs root and runc, like the sandbox tests.
#
#   scripts/soak.sh [--minutes M (30)] [--sessions N (200)] [--sample-seconds S (60)]
#                   [--model-delay-ms D (500)] [--out DIR] [--sandboxd-args "ARGS"]
#
# Starts sinew-store and sinew-sandboxd with mTLS and sinew-harness with HTTPS and mTLS to
# both (a local CA from scripts/make-certs.sh), then runs scripts/soak_driver.py: it keeps
# N sessions going, checks every finished session's log (completed, seqs whole, the stream
# equal to the log, each tool call with exactly one result, outputs naming their own
# session), samples RSS and open descriptors of the three servers and the number of live
# sandboxes every S seconds, and prints the slopes after the warm-up (the first sixth of
# the run, at most 5 minutes). After the last session it checks that the sandboxes went
# back to the warm pool and that the store lists every session the driver started.
# Exit 0 only when nothing failed and nothing was lost. The report is DIR/soak.json
# (default: a new /tmp/sinew-soak-XXXXXX, kept).
set -euo pipefail
MINUTES=30 SESSIONS=200 SAMPLE=60 DELAY=500 OUT="" SANDBOXD_ARGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=$2; shift 2 ;;
    --sessions) SESSIONS=$2; shift 2 ;;
    --sample-seconds) SAMPLE=$2; shift 2 ;;
    --model-delay-ms) DELAY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --sandboxd-args) SANDBOXD_ARGS=$2; shift 2 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ "$(id -u)" != 0 ] || ! command -v runc >/dev/null; then
  echo "soak.sh: needs root and runc (real sandboxes)" >&2
  exit 2
fi
if [ -z "${SINEW_BIN_DIR:-}" ]; then
  ./scripts/build.sh >/dev/null
  BIN=$ROOT/${SINEW_BUILD_DIR:-build}/bin
else
  BIN=$SINEW_BIN_DIR
fi
./sandbox-agent/image/build-image.sh default >/dev/null
DATA=${OUT:-$(mktemp -d /tmp/sinew-soak-XXXXXX)}
mkdir -p "$DATA"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DATA/store" "$DATA/sandboxd"
}
trap cleanup EXIT
wait_line() {  # wait_line FILE PATTERN: up to 60 s
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "soak.sh: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

CERTS=$DATA/certs
./scripts/make-certs.sh "$CERTS" harness store sandboxd
CA=$CERTS/ca.pem

"$BIN/sinew-store" --db "$DATA/store" --listen 127.0.0.1:0 \
  --tls-cert "$CERTS/store.pem" --tls-key "$CERTS/store-key.pem" --tls-ca "$CA" >"$DATA/store.out" 2>&1 &
STORE_PID=$!
PIDS+=($STORE_PID)
wait_line "$DATA/store.out" "listening on"
STORE=$(awk '/listening on/ {print $NF}' "$DATA/store.out")

SBPORT=$(free_port)
"$BIN/sinew-sandboxd" --listen "127.0.0.1:$SBPORT" --state-dir "$DATA/sandboxd" \
  --cgroup-parent "sinew-soak-$$" --max-sandboxes $((SESSIONS + 16)) \
  --tls-cert "$CERTS/sandboxd.pem" --tls-key "$CERTS/sandboxd-key.pem" --tls-ca "$CA" \
  $SANDBOXD_ARGS >"$DATA/sandboxd.out" 2>&1 &
SANDBOXD_PID=$!
PIDS+=($SANDBOXD_PID)
wait_line "$DATA/sandboxd.out" "listening"

cat >"$DATA/soak-script.json" <<JSON
{"responses": [
  {"text": "I write the program.", "delay_ms": $DELAY, "tool_calls": [{"name": "write_file",
    "input": {"path": "fib.py", "content": "import sys\na, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a, sys.argv[1])\n"}}]},
  {"text": "I run it.", "delay_ms": $DELAY, "tool_calls": [{"name": "bash",
    "input": {"command": "python3 fib.py {{session_id}} | tee result.txt"}}]},
  {"text": "I read the result back.", "delay_ms": $DELAY, "tool_calls": [{"name": "read_file",
    "input": {"path": "result.txt"}}]},
  {"text": "The 20th Fibonacci number is 6765.", "delay_ms": $DELAY}]}
JSON
HPORT=$(free_port)
cat >"$DATA/harness.json" <<JSON
{"listen": "127.0.0.1:$HPORT",
 "tls": {"cert_file": "$CERTS/harness.pem", "key_file": "$CERTS/harness-key.pem", "ca_file": "$CA"},
 "grpc_tls": {"cert_file": "$CERTS/harness.pem", "key_file": "$CERTS/harness-key.pem", "ca_file": "$CA"},
 "store": {"address": "$STORE"},
 "sandboxd": {"address": "127.0.0.1:$SBPORT"},
 "api_keys": {"sha256:a9b04fa55433b975eb4feb904daab0c23246f1b3a1c757b3f0c3b47adbd5317a": "soak"},
 "workers": $((SESSIONS + 56)),
 "default_model": "soak-scripted",
 "models": {"soak-scripted": {"kind": "scripted", "script": "$DATA/soak-script.json"}}}
JSON
"$BIN/sinew-harness" --config "$DATA/harness.json" >"$DATA/harness.out" 2>&1 &
HARNESS_PID=$!
PIDS+=($HARNESS_PID)
wait_line "$DATA/harness.out" "listening on"
API=https://localhost:$HPORT
echo "soak: $SESSIONS sessions for $MINUTES min against $API (store $STORE, sandboxd 127.0.0.1:$SBPORT, TLS and mTLS); data in $DATA"

WARMUP=$(/usr/bin/python3 -c "print(min(5.0, $MINUTES / 6))")
status=0
/usr/bin/python3 scripts/soak_driver.py --api "$API" --ca "$CA" --key sk-sinew-demo \
  --sessions "$SESSIONS" --minutes "$MINUTES" --sample-seconds "$SAMPLE" --warmup-minutes "$WARMUP" \
  --watch "harness=$HARNESS_PID" --watch "store=$STORE_PID" --watch "sandboxd=$SANDBOXD_PID" \
  --sandbox-dir "$DATA/sandboxd/runc" --out "$DATA/soak.json" || status=1

# Afterwards: every process alive, sandboxes back to the warm pool, every session listed.
for name in harness store sandboxd; do
  pid_var=${name^^}_PID
  if ! kill -0 "${!pid_var}" 2>/dev/null; then echo "soak: $name died" >&2; status=1; fi
done
live=-1
for _ in $(seq 60); do
  live=$(ls "$DATA/sandboxd/runc" 2>/dev/null | wc -l)
  [ "$live" -le 2 ] && break
  sleep 1
done
echo "soak: live sandboxes after the run: $live (the warm pool holds up to 2)"
[ "$live" -le 2 ] || ls -la "$DATA/sandboxd/runc" >&2
[ "$live" -le 2 ] || status=1
/usr/bin/python3 - "$API" "$CA" "$DATA/soak.json" <<'PY' || status=1
import http.client, json, ssl, sys
api, ca, report = sys.argv[1:4]
host, port = api.split("://")[1].rsplit(":", 1)
conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=ca))
token, listed, by_status = "", 0, {}
while True:
    conn.request("GET", "/v1/sessions?limit=1000" + (f"&page_token={token}" if token else ""),
                 headers={"Authorization": "Bearer sk-sinew-demo"})
    page = json.loads(conn.getresponse().read())
    for s in page["sessions"]:
        listed += 1
        by_status[s["status"]] = by_status.get(s["status"], 0) + 1
    token = page["next_page_token"]
    if not token:
        break
started = json.load(open(report))["started"]
print(f"soak: the store lists {listed} sessions for {started} started: {by_status}")
sys.exit(0 if listed == started and by_status.get("completed", 0) == listed else 1)
PY
echo "soak: error and warning lines logged (harness, store, sandboxd):"
grep -c -E '\[(error|critical)\]' "$DATA/harness.out" "$DATA/store.out" "$DATA/sandboxd.out" || true
grep -c -E '\[warning\]' "$DATA/harness.out" "$DATA/store.out" "$DATA/sandboxd.out" || true
echo "soak: report $DATA/soak.json; result: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
