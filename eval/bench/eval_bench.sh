#!/usr/bin/env bash
# The evaluation runner's benchmark (docs/eval.md):
#  1. a plain script that does each trial's steps with runc directly (one container per
#     trial: copy files, setup.sh, solve.sh, copy tests, test.sh, read the reward), the
#     reference;
#  2. `sinew eval run SUITE --agent oracle --config g1x-c3x` at concurrency 1, 2 and 4,
#     against sinew-store, sinew-sandboxd and sinew-harness on loopback (every trial is a
#     harness session: the oracle is the harness's built-in agent).
# Prints trials per minute and the runner's overhead per trial (total minus setup, agent
# and verifier time) next to the plain script's time per trial, and what the session
# adds to the agent step (agent time minus the time solve.sh ran, from the session's
# tool_result).
#   eval/bench/eval_bench.sh [SUITE] [CONCURRENCIES]     (default evals/examples "1 2 4")
# Needs root, runc, the default image and a build (build/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SUITE=$(realpath "${1:-evals/examples}")
CONCS=${2:-1 2 4}
BIN=$ROOT/${SINEW_BUILD_DIR:-build}/bin
IMAGE=${SINEW_IMAGE_ROOT:-/var/lib/sinew/images}/default/rootfs
WORK=$(mktemp -d /tmp/sinew-eval-bench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
now() { date +%s.%N; }

# --- 1. the plain runc script --------------------------------------------------------
plain_trial() {  # plain_trial TASKDIR: one trial in one runc container; prints the reward
  local task=$1 name id bundle mem
  name=$(basename "$task")
  id=bench-$name-$$
  bundle=$WORK/bundle-$name
  mem=$(python3 -c "import tomllib,sys; t=tomllib.load(open(sys.argv[1],'rb')); print(t.get('environment',{}).get('memory_mb',512)*3)" "$task/task.toml")
  mkdir -p "$bundle"
  cat >"$bundle/run.sh" <<'SH'
set -e
mkdir -p /tmp/logs/verifier
cd /workspace
[ -d /task/environment/files ] && cp -a /task/environment/files/. /workspace/
[ -f /task/environment/setup.sh ] && bash /task/environment/setup.sh
cp -a /task/solution /tmp/solution && bash /solution/solve.sh >/dev/null 2>&1 || true
cp -a /task/tests /tmp/tests && bash /tests/test.sh >/dev/null 2>&1 || true
cat /logs/verifier/reward.txt
SH
  python3 - "$bundle" "$IMAGE" "$task" "$mem" <<'PY'
import json, sys
bundle, rootfs, task, mem = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) << 20
cfg = {
  "ociVersion": "1.0.2",
  "process": {"user": {"uid": 1000, "gid": 1000}, "args": ["bash", "/bundle/run.sh"], "cwd": "/workspace",
              "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace"], "noNewPrivileges": True,
              "capabilities": {"bounding": [], "effective": [], "permitted": []}},
  "root": {"path": rootfs, "readonly": True},
  "hostname": "sandbox",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/workspace", "type": "tmpfs", "source": "tmpfs", "options": ["size=256m", "uid=1000", "gid=1000", "mode=755"]},
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["size=64m", "mode=1777"]},
    {"destination": "/task", "type": "bind", "source": task, "options": ["rbind", "ro"]},
    {"destination": "/bundle", "type": "bind", "source": bundle, "options": ["rbind", "ro"]}],
  "linux": {"namespaces": [{"type": t} for t in ["pid", "network", "ipc", "uts", "mount"]],
            "resources": {"memory": {"limit": mem}, "cpu": {"quota": 300000, "period": 100000}, "pids": {"limit": 256}},
            "cgroupsPath": "/sinew-eval-bench/" + bundle.rsplit("/", 1)[1]}}
json.dump(cfg, open(bundle + "/config.json", "w"))
PY
  runc --root "$WORK/runc" run --bundle "$bundle" "$id" </dev/null 2>"$bundle/err" | tail -1
  runc --root "$WORK/runc" delete --force "$id" >/dev/null 2>&1 || true
}

echo "== plain runc script: $SUITE, one container per trial, concurrency 1"
t0=$(now); n=0; pass=0
for task in "$SUITE"/*/; do
  r=$(plain_trial "${task%/}" || true)
  n=$((n + 1)); [ "$r" = 1 ] && pass=$((pass + 1))
done
t1=$(now)
PLAIN=$(python3 -c "print(f'{($t1 - $t0) / $n:.3f}')")
echo "plain: $n trials, $pass passed, $(python3 -c "print(f'{$n / (($t1 - $t0) / 60):.2f}')") trials/min, $PLAIN s per trial"

# --- 2. sinew eval ----------------------------------------------------------------------
SBPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/sinew-sandboxd" --listen "127.0.0.1:$SBPORT" --state-dir "$WORK/sandboxd" \
  --cgroup-parent "sinew-eval-bench-$$" --warm-pool-size 0 >"$WORK/sandboxd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q listening "$WORK/sandboxd.out" && break; sleep 0.1; done
"$BIN/sinew-store" --db "$WORK/store" --listen 127.0.0.1:0 >"$WORK/store.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q "listening on" "$WORK/store.out" && break; sleep 0.1; done
STORE=$(awk '/listening on/ {print $NF}' "$WORK/store.out")
echo '{"responses": []}' >"$WORK/none.json"  # a model is required; the oracle is built in
cat >"$WORK/harness.json" <<JSON
{"listen": "127.0.0.1:0", "store": {"address": "$STORE"}, "sandboxd": {"address": "127.0.0.1:$SBPORT"},
 "api_keys": {"bench": "bench"}, "models": {"unused": {"kind": "scripted", "script": "$WORK/none.json"}}}
JSON
"$BIN/sinew-harness" --config "$WORK/harness.json" >"$WORK/harness.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q "listening on" "$WORK/harness.out" && break; sleep 0.1; done
API=http://$(awk '/listening on/ {print $NF}' "$WORK/harness.out")
for c in $CONCS; do
  job=$WORK/job-c$c
  t0=$(now)
  "$BIN/sinew" --server "$API" --api-key bench eval run "$SUITE" --agent oracle --config g1x-c3x --concurrency "$c" \
    --max-attempts 1 --job "$job" --sandboxd "127.0.0.1:$SBPORT" >/dev/null 2>&1
  t1=$(now)
  python3 - "$job/results.json" "$t0" "$t1" "$c" "$PLAIN" "$API" <<'PY'
import json, sys, urllib.request
r = json.load(open(sys.argv[1])); t0, t1, c, plain = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
api = sys.argv[6]
added = []
for t in r["trials"]:
    if not t["session_id"]:
        continue
    req = urllib.request.Request(f"{api}/v1/sessions/{t['session_id']}/events?limit=1000",
                                 headers={"Authorization": "Bearer bench"})
    events = json.load(urllib.request.urlopen(req))["events"]
    ran = sum(int(e["tool_result"].get("duration_ms", 0)) for e in events if "tool_result" in e)
    added.append((t["agent_ms"] - ran) / 1000)
added.sort()
s = r["summary"]["g1x-c3x"]; n = s["n"]
tot = s["seconds"]["total"]["mean"]; over = s["seconds"]["overhead"]["mean"]
print(f"sinew eval c={c}: {n} trials, {s['passed']} passed, {n / ((t1 - t0) / 60):.2f} trials/min, "
      f"{tot:.3f} s per trial (plain {plain:.3f} s, {100 * (tot - plain) / plain:+.1f}%), "
      f"runner overhead {over * 1000:.0f} ms per trial = {100 * over / tot:.1f}% of a trial; "
      f"the session adds {1000 * sum(added) / max(1, len(added)):.0f} ms (median "
      f"{1000 * added[len(added) // 2] if added else 0:.0f} ms) to the agent step over solve.sh alone")
PY
done
