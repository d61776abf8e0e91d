#!/usr/bin/env bash
# Compatibility of the harness with OpenAI-compatible servers people run.
#
#   harness/bench/compat.sh --llama-server PATH [--llama-label NAME] [--model GGUF]
#                           [--build-dir DIR] [--keep]
#
# Starts, on loopback, a real llama.cpp `llama-server` (the binary at PATH, built by you;
# nothing of llama.cpp is in this repository) with --jinja, and `sinew-model`, both over
# the same GGUF (default ../shared/models/stories260K.gguf). Against each it probes the
# wire directly (plain chat, streaming, tools with a scripted tool-call history, tools
# while streaming, tool_choice, response_format, usage, error bodies), then runs the main
# job's two kinds of task through a real sinew-harness (embedded store):
#   plain       a prompt to the model without tools (as scripts/run.sh's first task);
#   tool-using  the scripted turns a tiny model cannot produce (a tool call of
#               http_request and its result, by the scripted model, a test double named
#               as such), then a fork of that session at the tool result handed to the
#               real server, which must take the tools and the tool-call history;
# and prints a table. Each harness model has stream "auto" (the default): a server that
# refuses streaming is called whole from then on, which the table shows; the last row
# forks the tool-using task onto a model with stream "on" (what the harness did before).
# Without --llama-server only sinew-model is probed. Needs curl and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
LLAMA=""
LLABEL=""
MODEL=$ROOT/../shared/models/stories260K.gguf
BUILD=${SINEW_BUILD_DIR:-build}
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-server) LLAMA=$2; shift 2 ;;
    --llama-label) LLABEL=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "compat.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$ROOT/$BUILD/bin
for b in sinew-model sinew-harness; do
  [ -x "$BIN/$b" ] || { echo "compat.sh: $BIN/$b is not built (cmake --build $BUILD --target $b)" >&2; exit 2; }
done
[ -f "$MODEL" ] || { echo "compat.sh: no model file $MODEL" >&2; exit 2; }
if [ -n "$LLAMA" ] && [ ! -x "$LLAMA" ]; then echo "compat.sh: $LLAMA is not an executable" >&2; exit 2; fi

DATA=$(mktemp -d /tmp/sinew-compat-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "$KEEP" = 1 ] && echo "logs kept in $DATA" || rm -rf "$DATA"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # wait_http URL LOG: up to 120 s for URL to answer 200
  for _ in $(seq 1200); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "compat.sh: $1 did not come up; log:" >&2; tail -20 "$2" >&2; return 1
}

# Servers: name|base url (with /v1)|model name on the wire
SERVERS=()
MODEL_ID=$(basename "$MODEL" .gguf)
if [ -n "$LLAMA" ]; then
  LPORT=$(free_port)
  "$LLAMA" -m "$MODEL" --host 127.0.0.1 --port "$LPORT" --jinja -c 8192 -np 1 -t 2 >"$DATA/llama.out" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$LPORT/health" "$DATA/llama.out"
  if [ -z "$LLABEL" ]; then  # "llama-server b4747" when it was built from a git checkout
    LLABEL="llama-server $("$LLAMA" --version 2>&1 | awk '/^version:/ && $2 != "0" {print "b" $2}')"
  fi
  SERVERS+=("${LLABEL% }|http://127.0.0.1:$LPORT/v1|$MODEL_ID")
fi
"$BIN/sinew-model" --model "$MODEL" --host 127.0.0.1 --port 0 --grpc-port -1 >"$DATA/model.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q "http listening on" "$DATA/model.out" 2>/dev/null && break; sleep 0.1; done
MADDR=$(awk '/http listening on/ {print $NF}' "$DATA/model.out")
[ -n "$MADDR" ] || { echo "compat.sh: sinew-model did not start:" >&2; cat "$DATA/model.out" >&2; exit 1; }
SERVERS+=("sinew-model|http://$MADDR/v1|$MODEL_ID")

# 1. Wire probes, one JSON object of results per server.
for s in "${SERVERS[@]}"; do
  IFS='|' read -r name url wire <<<"$s"
  python3 - "$name" "$url" "$wire" >"$DATA/probe-$(printf '%s' "$name" | tr -c 'a-z0-9' _).json" <<'PY'
import json, sys, urllib.request, urllib.error
name, base, model = sys.argv[1:4]
TOOLS = [{"type": "function", "function": {"name": "http_request", "description": "Fetches a URL.",
          "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}}]
HISTORY = [{"role": "user", "content": "What does the status page say?"},
           {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "http_request", "arguments": "{\"url\": \"http://127.0.0.1/status\"}"}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "all systems normal"}]
PLAIN = [{"role": "user", "content": "Once upon a time"}]

def post(body, stream=False):
    body = dict({"model": model, "max_tokens": 24, "stream": stream}, **body)
    req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except Exception as e:  # connection reset and the like
        return 0, str(e)

def message(text):
    try:
        v = json.loads(text)
        e = v.get("error", v)
        return (e.get("message") if isinstance(e, dict) else str(e)) or text
    except Exception:
        return text.strip()

def refused(status, text):
    return "no: HTTP %d %s" % (status, message(text)[:70])

def chunks(text):
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out

r = {}
st, text = post({"messages": PLAIN})
whole = json.loads(text) if st == 200 else None
r["plain chat"] = "yes" if whole and isinstance(whole["choices"][0]["message"].get("content"), str) else refused(st, text)
st, text = post({"messages": PLAIN, "stream_options": {"include_usage": True}}, stream=True)
if st == 200 and "data: [DONE]" in text:
    cs = chunks(text)
    r["streaming"] = "yes (%d chunks)" % len(cs)
    stream_usage = any(c.get("usage") for c in cs)
else:
    r["streaming"], stream_usage = refused(st, text), False
st, text = post({"messages": HISTORY, "tools": TOOLS})
r["tools (whole, tool-call history)"] = "yes" if st == 200 else refused(st, text)
st, text = post({"messages": HISTORY, "tools": TOOLS}, stream=True)
r["tools while streaming"] = "yes" if st == 200 and "data: [DONE]" in text else refused(st, text)
st, text = post({"messages": PLAIN, "tools": TOOLS, "tool_choice": "required", "max_tokens": 160})
if st == 200:
    choice = json.loads(text)["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    r["tool_choice required"] = (("yes: called %s" % calls[0]["function"]["name"]) if calls else
                                 "accepted, no tool call (finish %s)" % choice.get("finish_reason"))
else:
    r["tool_choice required"] = refused(st, text)
schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
st, text = post({"messages": PLAIN, "max_tokens": 160,
                 "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})
if st == 200:
    content = json.loads(text)["choices"][0]["message"].get("content") or ""
    try:
        ok = isinstance(json.loads(content), dict) and "answer" in json.loads(content)
        r["response_format json_schema"] = "yes: valid JSON" if ok else "accepted, JSON without the field"
    except Exception:
        r["response_format json_schema"] = "accepted, ignored: %r" % content[:30]
else:
    r["response_format json_schema"] = refused(st, text)
u = (whole or {}).get("usage") or {}
r["usage"] = "%s whole, %s streamed" % ("yes" if u.get("prompt_tokens") else "no",
                                        "yes" if stream_usage else "no")
st, text = post({"messages": "not a list"})
r["errors (bad request)"] = "HTTP %d %s" % (st, ("error.message %r" % message(text)[:40]
                                                if "error" in text and message(text) != text.strip()
                                                else "body: " + text[:40]))
print(json.dumps(r))
PY
done

# 2. The main job's tasks through a real harness (embedded store), stream "auto".
HPORT=$(free_port)
MODELS=""
ALLOW=""
i=0
for s in "${SERVERS[@]}"; do
  IFS='|' read -r name url wire <<<"$s"
  MODELS+="\"m$i\": {\"kind\": \"openai\", \"base_url\": \"$url\", \"model\": \"$wire\", \"context_tokens\": 1024,
    \"max_output_tokens\": 32, \"max_retries\": 1, \"backoff_ms\": 100},
  \"m$i-on\": {\"kind\": \"openai\", \"base_url\": \"$url\", \"model\": \"$wire\", \"context_tokens\": 1024,
    \"max_output_tokens\": 32, \"max_retries\": 1, \"backoff_ms\": 100, \"stream\": \"on\"},
  \"m$i-plain\": {\"kind\": \"openai\", \"base_url\": \"$url\", \"model\": \"$wire\", \"tools\": false,
    \"context_tokens\": 256, \"max_output_tokens\": 32, \"max_retries\": 1, \"backoff_ms\": 100},"
  hostport=${url#http://}; hostport=${hostport%%/*}
  ALLOW+="{\"host\": \"$hostport\"},"
  i=$((i + 1))
done
TARGET=${SERVERS[0]#*|}; TARGET=${TARGET%%|*}
cat >"$DATA/scripted-tools.json" <<JSON
{"responses": [{"text": "I will fetch the model list.", "tool_calls": [{"name": "http_request",
  "input": {"url": "$TARGET/models"}}]}, {"text": "(scripted end)"}]}
JSON
cat >"$DATA/harness.json" <<JSON
{"listen": "127.0.0.1:$HPORT", "store": {"dir": "$DATA/store"},
 "api_keys": {"sk-compat": "compat"}, "default_model": "scripted",
 "models": {$MODELS "scripted": {"kind": "scripted", "script": "$DATA/scripted-tools.json"}},
 "http_request": {"allow": [${ALLOW%,}]},
 "limits": {"max_turns": 4, "max_wall_seconds": 300}}
JSON
"$BIN/sinew-harness" --config "$DATA/harness.json" >"$DATA/harness.out" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$HPORT/healthz" "$DATA/harness.out"

NAMES=()
for s in "${SERVERS[@]}"; do NAMES+=("${s%%|*}"); done
python3 - "http://127.0.0.1:$HPORT" "$DATA" "${NAMES[@]}" <<'PY'
import json, sys, time, urllib.request, glob, re
api, data, names = sys.argv[1], sys.argv[2], sys.argv[3:]
KEY = {"Authorization": "Bearer sk-compat", "Content-Type": "application/json"}

def call(method, path, body=None):
    req = urllib.request.Request(api + path, json.dumps(body).encode() if body is not None else None, KEY, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")

def wait(sid):
    for _ in range(1200):
        st, s = call("GET", "/v1/sessions/" + sid)
        s = s.get("session", s)
        if s.get("status") in ("completed", "failed", "cancelled"):
            return s["status"]
        time.sleep(0.1)
    return "timeout"

def events(sid):
    return call("GET", "/v1/sessions/%s/events?limit=1000" % sid)[1].get("events", [])

def outcome(sid, status, since=0):
    evs = [e for e in events(sid) if int(e["seq"]) > since]
    resp = [e["model_response"] for e in evs if e["type"] == "model_response"]
    errs = [e["error"] for e in evs if e["type"] == "error"]
    if status == "completed" and resp:
        streamed = sum(1 for r in resp if int(r.get("time_to_first_token_ms", -1)) >= 0)
        toks = sum(int(r.get("usage", {}).get("completion_tokens", 0)) for r in resp)
        how = "streamed" if streamed == len(resp) else ("whole" if streamed == 0 else "%d/%d streamed" % (streamed, len(resp)))
        return "completed: %d model turn(s), %s, %d tokens out" % (len(resp), how, toks)
    if errs:
        e = errs[-1]
        m = e.get("message", "")
        return "%s: error event with http_status %s, message %r" % (status, e.get("http_status", 0),
                                                                   m[max(0, m.find("HTTP ")):][:50] + "...")
    return status

rows = {}
for i, name in enumerate(names):
    r = {}
    st, s = call("POST", "/v1/sessions", {"prompt": "Once upon a time, a little robot", "model": "m%d-plain" % i})
    sid = s["session"]["id"]
    r["harness: plain task"] = outcome(sid, wait(sid))
    # Tool-using: scripted turns (a test double of a tool-using model), then the real server.
    st, s = call("POST", "/v1/sessions", {"prompt": "What models are served?", "model": "scripted"})
    sid = s["session"]["id"]
    wait(sid)
    seq = max(int(e["seq"]) for e in events(sid) if e["type"] == "tool_result")
    st, f = call("POST", "/v1/sessions/%s/fork" % sid, {"at_seq": seq, "model": "m%d" % i})
    fid = f["session"]["id"]
    r["harness: tool-using task (forked onto it)"] = outcome(fid, wait(fid), since=seq)
    st, f = call("POST", "/v1/sessions/%s/fork" % sid, {"at_seq": seq, "model": "m%d-on" % i})
    fid = f["session"]["id"]
    r["the same with stream \"on\""] = outcome(fid, wait(fid), since=seq)
    rows[name] = r

log = open(data + "/harness.out").read()
fallbacks = re.findall(r"refused streaming \(([^)]*)\)", log)
probes = {}
for name in names:
    path = data + "/probe-" + re.sub(r"[^a-z0-9]", "_", name) + ".json"
    probes[name] = json.load(open(path))
    probes[name].update(rows[name])
checks = list(probes[names[0]].keys())
w = max(len(c) for c in checks)
cols = [max(len(n), max(len(str(probes[n][c])) for c in checks)) for n in names]
print("| " + "check".ljust(w) + " | " + " | ".join(n.ljust(c) for n, c in zip(names, cols)) + " |")
print("|" + "-" * (w + 2) + "|" + "|".join("-" * (c + 2) for c in cols) + "|")
for c in checks:
    print("| " + c.ljust(w) + " | " + " | ".join(str(probes[n][c]).ljust(cw) for n, cw in zip(names, cols)) + " |")
for f in fallbacks:
    print("harness log: a server refused streaming (%s); that model was called whole from then on" % f)
PY
