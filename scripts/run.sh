#!/usr/bin/env bash
# The main job on embedded defaults: builds Sinew, starts the session store on a fresh
# data directory, writes a session's events through the client and reads them back live.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
BIN=${SINEW_BUILD_DIR:-build}/bin
DATA=$(mktemp -d /tmp/sinew-run-XXXXXX)
trap 'kill $STORE_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DATA"' EXIT

"$BIN/sinew-store" --db "$DATA/store" --listen 127.0.0.1:0 >"$DATA/store.out" &
STORE_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$DATA/store.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(awk '/listening on/ {print $NF}' "$DATA/store.out")
export SINEW_STORE=$ADDR
echo "== sinew-store is serving $DATA/store on $ADDR"

ID=$("$BIN/sinew-storectl" create --tenant demo --title "first session")
echo "== created session $ID; following its events:"
"$BIN/sinew-storectl" watch "$ID" --for 2 &
WATCH_PID=$!
sleep 0.3
"$BIN/sinew-storectl" append "$ID" --text "Summarise the README" >/dev/null
"$BIN/sinew-storectl" append "$ID" --kind note --text "written by scripts/run.sh" >/dev/null
wait $WATCH_PID
echo "== read back:"
"$BIN/sinew-storectl" events "$ID"
