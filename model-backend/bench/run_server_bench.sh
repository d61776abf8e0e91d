#!/usr/bin/env bash
# Server benchmark: what a client gets through the HTTP server. Runs sinew-model
# and, given its path, llama.cpp's llama-server in the same run, one after the
# other per model file, on the same GGUF files with the same threads, the same
# prompts and greedy decoding (temperature 0), and prints sinew / llama.cpp ratios:
#   single   one stream (SSE): time to first token (ms) and generation tok/s
#            ((completion_tokens - 1) / time from the first token to the last);
#            best of -r runs, each on a fresh prompt (no prefix-cache hits)
#   agg8/32  8 and 32 concurrent non-streaming requests (llama-server -np 8 / -np 32):
#            generated tokens of all streams / wall time (prefill included), best of
#            -r runs, each on fresh prompts
#   agent    20 turns re-sending the growing history (system prompt, user message,
#            a fixed reply text of the same length for both servers); mean
#            time to first token, total wall time
#   edit     an edit-heavy turn: a file (a short story) in the context and the
#            reply re-emitting it with a small change; generation tok/s
# Then, sinew alone on the same models, on --copy-types models and on --spec-models
# (default stories260K, which does copy text from its context): the edit turn with
# speculative decoding off, default (a lone decode drafts 3 on SIMD CPUs, see
# docs/model-serving.md) and 3- and 7-token drafts in every decode (--spec-any-rows):
# tok/s, speed-up, acceptance, tokens per verifying forward, and whether the outputs
# are identical. The random models hardly copy the file, so their acceptance says
# little; the copy models (copy-TYPE.gguf: the same shape with the hand-set induction
# circuit of model-backend/tests/copy_circuit.h, written by sinew-model-bench
# --copy-circuit) do re-emit it, as an agent's model does. For those, llama-server's
# rate on the same turn (it has no prompt lookup) is printed beside sinew's.
# Then, for each --draft-pairs TARGET:DRAFT (a draft model over the target's vocabulary),
# sinew and llama-server side by side on one stream generating from a prompt with nothing
# to copy: no speculation, then the draft model (sinew --draft-model with and without
# prompt lookup; llama-server -md with its defaults and with sinew's 3 tokens and no
# probability cut-off), generation tok/s, speed-up over the same server without it,
# sinew's acceptance, and whether each server's outputs are identical to its own plain ones.
# Machine load (uptime) is printed with every phase: the machine is shared.
#
# usage: model-backend/bench/run_server_bench.sh [--llama-server PATH] [--work-dir DIR]
#            [-t 2] [--types F16,Q8_0,Q4_K] [-m EXTRA.gguf]... [-n 64] [-r 3]
#            [--streams 8,32] [--turns 20 (0: no agent phase)] [--sinew-args "--no-batch-invariance"]
#            [--spec-models A.gguf,B.gguf] [--llama-args "--poll 0"]
#            [--draft-pairs TARGET.gguf:DRAFT.gguf,...] [--copy-types F16,Q8_0,Q4_K]
# env:   SINEW_BUILD_DIR (default build): where bin/sinew-model(-bench) were built;
#        SINEW_CPU_LEVEL=scalar|avx2|avx512 caps sinew's kernel level (so that an AVX-512
#        machine measures the AVX2 path); every model's heading names the kernels that ran
#        (llama-server runs as it was built).
# The random and copy models (~470 MB each set, sinew-model-bench --write-random) go to --work-dir
# (default: a temporary directory, removed at exit); existing files are reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${SINEW_BUILD_DIR:-build}
SERVER="$BUILD_DIR/bin/sinew-model"
WRITER="$BUILD_DIR/bin/sinew-model-bench"
LLAMA_SERVER=""
WORK=""
THREADS=2
TYPES=F16,Q8_0,Q4_K
COPY_TYPES=F16,Q8_0,Q4_K
EXTRA_MODELS=()
N_GEN=64
REPS=3
STREAMS=8,32
TURNS=20
SINEW_ARGS=""
LLAMA_ARGS=""
SPEC_MODELS="$(pwd)/../shared/models/stories260K.gguf"
DRAFT_PAIRS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-server) LLAMA_SERVER=$2; shift 2 ;;
    --work-dir) WORK=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --types) TYPES=$2; shift 2 ;;
    -m) EXTRA_MODELS+=("$2"); shift 2 ;;
    -n) N_GEN=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --turns) TURNS=$2; shift 2 ;;
    --sinew-args) SINEW_ARGS=$2; shift 2 ;;
    --spec-models) SPEC_MODELS=$2; shift 2 ;;
    --llama-args) LLAMA_ARGS=$2; shift 2 ;;
    --draft-pairs) DRAFT_PAIRS=$2; shift 2 ;;
    --copy-types) COPY_TYPES=$2; shift 2 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for bin in "$SERVER" "$WRITER"; do
  [ -x "$bin" ] || { echo "missing $bin: build first (scripts/build.sh)" >&2; exit 1; }
done
if [ -n "$LLAMA_SERVER" ] && [ ! -x "$LLAMA_SERVER" ]; then
  echo "--llama-server $LLAMA_SERVER is not an executable" >&2
  exit 1
fi
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /tmp/sinew-server-bench.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
MODELS=()
if [ -n "$TYPES" ]; then
  [ -f "$WORK/bench-Q4_K.gguf" ] || "$WRITER" --write-random "$WORK"
  IFS=, read -r -a type_list <<< "$TYPES"
  for t in "${type_list[@]}"; do MODELS+=("$WORK/bench-$t.gguf"); done
fi
MODELS+=("${EXTRA_MODELS[@]}")
COPY_MODELS=""
if [ -n "$COPY_TYPES" ]; then
  IFS=, read -r -a copy_list <<< "$COPY_TYPES"
  for t in "${copy_list[@]}"; do
    [ -f "$WORK/copy-$t.gguf" ] || "$WRITER" --write-random "$WORK" --copy-circuit --write-types "$t"
    COPY_MODELS+="${COPY_MODELS:+,}$WORK/copy-$t.gguf"
  done
fi

exec python3 - "$SERVER" "$LLAMA_SERVER" "$THREADS" "$N_GEN" "$REPS" "$STREAMS" "$TURNS" \
  "$SINEW_ARGS" "$SPEC_MODELS" "$LLAMA_ARGS" "$DRAFT_PAIRS" "$COPY_MODELS" "${MODELS[@]}" <<'PY'
import http.client, json, os, shlex, socket, subprocess, sys, threading, time

(server_bin, llama_bin, threads, n_gen, reps, streams, turns, sinew_args, spec_models,
 llama_args, draft_pairs, copy_models), models = sys.argv[1:13], sys.argv[13:]
copy_models = [m for m in copy_models.split(",") if m]
draft_pairs = [tuple(p.split(":", 1)) for p in draft_pairs.split(",") if p]
spec_models = [m for m in spec_models.split(",") if m]
n_gen, reps, turns = int(n_gen), int(reps), int(turns)
streams = [int(s) for s in streams.split(",") if s]

def load():
    return open("/proc/loadavg").read().split()[0]

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

WORDS = ("the file main.cc reads the config and calls Parse on each line then returns "
         "a status with the error message when the value is out of range so the caller "
         "can report it to the user before writing anything to disk").split()

def text(n_words, salt):
    # Deterministic English-like text, different for every salt.
    out = ["[%s]" % salt]
    for i in range(n_words):
        out.append(WORDS[(i * 7 + len(str(salt)) * 3 + i // len(WORDS)) % len(WORDS)])
    return " ".join(out)

class Server:
    """One server process on a loopback port; stopped with stop()."""
    def __init__(self, kind, model, parallel, extra_args=()):
        self.kind, self.port = kind, free_port()
        if kind == "sinew":
            cmd = [server_bin, "--model", model, "--threads", threads, "--port", str(self.port),
                   "--grpc-port", "-1", "--ctx", "2048"] + shlex.split(sinew_args) + list(extra_args)
        else:
            cmd = [llama_bin, "-m", model, "-t", threads, "-tb", threads, "--port", str(self.port),
                   "-np", str(parallel), "-c", str(max(2048, 256 * parallel))] + \
                  shlex.split(llama_args) + list(extra_args)
        self.log = open("/tmp/server-bench-%s-%d.log" % (kind, self.port), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit("%s exited at start (log %s)" % (kind, self.log.name))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            sys.exit("%s did not become healthy" % kind)
        self.post({"prompt": text(20, "warm-up"), "max_tokens": 8})  # pages the weights in

    def body(self, extra):
        b = {"prompt": "", "temperature": 0, "max_tokens": n_gen, "ignore_eos": True}
        b.update(extra)
        return b

    def post(self, extra):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/v1/completions", json.dumps(self.body(extra)),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit("%s: HTTP %d %s" % (self.kind, r.status, data[:300]))
        return json.loads(data)

    def stream(self, extra):
        """(time to first token s, seconds first->last token, usage) of one SSE request."""
        body = self.body(dict(extra, stream=True, stream_options={"include_usage": True}))
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        start = time.perf_counter()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            sys.exit("%s: HTTP %d %s" % (self.kind, r.status, r.read()[:300]))
        first = last = None
        usage = None
        pending = b""
        while True:
            data = r.read1(65536)  # what has arrived (iterating lines would buffer)
            if not data:
                break
            now = time.perf_counter()
            pending += data
            lines = pending.split(b"\n")
            pending = lines.pop()
            for line in lines:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if any(ch.get("text") for ch in chunk.get("choices", [])):
                    first = first or now
                    last = now
        return first - start, last - first, usage

    def kernels(self):
        """sinew's kernel level as /v1/models reports it (cpu-avx512, cpu-avx2, ...)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/v1/models")
        return json.loads(c.getresponse().read())["data"][0]["meta"]["backend"]

    def metric(self, name):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()

def single(srv, model_tag):
    best_ttft, best_tps, usage = None, 0.0, None
    for rep in range(reps):
        ttft, gen_s, usage = srv.stream({"prompt": text(24, "%s-single-%d" % (model_tag, rep))})
        tps = (usage["completion_tokens"] - 1) / gen_s if gen_s > 0 else 0.0
        best_ttft = ttft if best_ttft is None else min(best_ttft, ttft)
        best_tps = max(best_tps, tps)
    return {"ttft_ms": best_ttft * 1000, "gen_tps": best_tps, "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"]}

def aggregate(srv, n, model_tag):
    """Best of reps: n concurrent requests, each rep on fresh prompts."""
    best = 0.0
    for rep in range(reps):
        results = [None] * n
        def one(i):
            results[i] = srv.post({"prompt": text(24, "%s-agg%d-%d-%d" % (model_tag, n, rep, i))})
        workers = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        start = time.perf_counter()
        for w in workers: w.start()
        for w in workers: w.join()
        wall = time.perf_counter() - start
        best = max(best, sum(r["usage"]["completion_tokens"] for r in results) / wall)
    return {"agg_tps": best}

def agent(srv, model_tag):
    history = text(30, "%s-agent-system" % model_tag)
    ttfts, start = [], time.perf_counter()
    for turn in range(turns):
        history += "\nuser: " + text(3, "turn-%d" % turn) + "\nassistant:"
        ttft, _, _ = srv.stream({"prompt": history, "max_tokens": 16})
        ttfts.append(ttft)
        history += " " + text(4, "reply-%d" % turn)  # the same reply for both servers
    return {"agent_ttft_mean_ms": 1000 * sum(ttfts) / len(ttfts), "agent_ttft_last_ms": 1000 * ttfts[-1],
            "agent_wall_s": time.perf_counter() - start}

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in "
         "the park. One day, she saw a big, red ball. She wanted to play with it, but it was too "
         "high. Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what "
         "to do. She wanted to play with the ball, but she didn't know what to do.")

def edit(srv, model_tag):
    """An edit-heavy turn: the 'file' is in the context, and the reply starts to
    re-emit it with a small change (a renamed character). Generation tok/s of one
    stream (best of reps) and the reply text of the last rep."""
    prompt = "File story.txt:\n" + STORY + "\n\nThe same file with Lily renamed to Mia:\n" + \
             STORY.replace("Lily", "Mia")[:40]
    best, text = 0.0, None
    for rep in range(reps):
        body = {"prompt": "[%s-edit-%d] " % (model_tag, rep) + prompt, "max_tokens": 2 * n_gen}
        ttft, gen_s, usage = srv.stream(body)
        best = max(best, (usage["completion_tokens"] - 1) / gen_s if gen_s > 0 else 0.0)
        text = srv.post(body)["choices"][0]["text"]  # the prefix cache makes this cheap
    return best, text

def run(kind, model):
    tag = os.path.basename(model)
    out = {"load": []}
    srv = Server(kind, model, 1)
    try:
        out["kernels"] = srv.kernels() if kind == "sinew" else "as built"
        out["load"].append(load())
        out.update(single(srv, tag))
        if turns > 0:
            out.update(agent(srv, tag))
        out["edit_tps"], _ = edit(srv, tag)
        if kind == "sinew":
            for n in streams:
                out["load"].append(load())
                out["agg%d" % n] = aggregate(srv, n, tag)["agg_tps"]
    finally:
        srv.stop()
    if kind == "llama":
        for n in streams:
            srv = Server(kind, model, n)
            try:
                out["load"].append(load())
                out["agg%d" % n] = aggregate(srv, n, tag)["agg_tps"]
            finally:
                srv.stop()
    out["load"].append(load())
    return out

print("# server benchmark: %d threads, greedy, %d generated tokens, best of %d; sinew args: %r; "
      "llama-server args: %r" % (int(threads), n_gen, reps, sinew_args, llama_args))
print("# sinew kernel level: the best the CPU has, capped by SINEW_CPU_LEVEL=%s"
      % (os.environ.get("SINEW_CPU_LEVEL") or "(unset)"))
print("# uptime at start: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
cols = [("ttft_ms", "TTFT ms", False), ("gen_tps", "gen tok/s", True)] + \
       [("agg%d" % n, "agg%d tok/s" % n, True) for n in streams] + \
       ([("agent_ttft_mean_ms", "agent TTFT ms", False), ("agent_wall_s", "agent wall s", False)]
        if turns > 0 else []) + [("edit_tps", "edit gen tok/s", True)]
for model in models:
    tag = os.path.basename(model)
    ours = run("sinew", model)
    theirs = run("llama", model) if llama_bin else None
    print("\n## %s (prompt %d tokens, completion %d tokens; sinew kernels %s; load 1-min sinew %s, "
          "llama.cpp %s)" % (tag, ours["prompt_tokens"], ours["completion_tokens"], ours["kernels"],
                             "/".join(ours["load"]), "/".join(theirs["load"]) if theirs else "-"))
    print("%-16s %12s %12s %9s" % ("metric", "sinew", "llama.cpp", "ratio"))
    for key, name, higher in cols:
        line = "%-16s %12.1f" % (name, ours[key])
        if theirs:
            # ratio > 1 means sinew is better (faster or sooner)
            ratio = ours[key] / theirs[key] if higher else theirs[key] / ours[key]
            line += " %12.1f %8.2fx" % (theirs[key], ratio)
        print(line)
    if theirs and theirs["prompt_tokens"] != ours["prompt_tokens"]:
        print("note: prompt token counts differ (llama.cpp %d)" % theirs["prompt_tokens"])
    sys.stdout.flush()
def speculation(model, beside_llama=False):
    """sinew: the edit turn without speculation, with the default rule, and with 3-
    and 7-token drafts in every decode; outputs must be identical. With beside_llama,
    llama-server's rate on the same turn too."""
    tag = os.path.basename(model)
    rows, texts = [], []
    for name, args in (("off", ["--spec-draft", "0"]), ("default", []),
                       ("3, any rows", ["--spec-draft", "3", "--spec-any-rows"]),
                       ("7, any rows", ["--spec-draft", "7", "--spec-any-rows"])):
        srv = Server("sinew", model, 1, args)
        try:
            load_before = load()
            tps, text = edit(srv, tag)
            drafted = srv.metric("sinew_model_spec_draft_tokens_total")
            accepted = srv.metric("sinew_model_spec_accepted_tokens_total")
            verifications = srv.metric("sinew_model_spec_verifications_total")
            emitted = srv.metric("sinew_model_spec_emitted_tokens_total")
        finally:
            srv.stop()
        rows.append((name, tps, accepted / drafted if drafted else 0.0,
                     emitted / verifications if verifications else 0.0, load_before))
        texts.append(text)
    print("\n## speculation on the edit turn: %s (sinew only)" % tag)
    print("%-14s %12s %9s %10s %12s %6s" % ("drafts", "gen tok/s", "speed-up", "accepted",
                                           "tok/verify", "load"))
    for name, tps, acc, per, ld in rows:
        print("%-14s %12.1f %8.2fx %9.0f%% %12.2f %6s" % (name, tps, tps / rows[0][1] if rows[0][1] else 0,
                                                     100 * acc, per, ld))
    print("outputs identical to no speculation: %s" % all(t == texts[0] for t in texts))
    if beside_llama and llama_bin:
        srv = Server("llama", model, 1)
        try:
            load_before = load()
            tps, text = edit(srv, tag)
        finally:
            srv.stop()
        print("llama-server   %12.1f (load %s); sinew default / llama-server: %.2fx; "
              "sinew off / llama-server: %.2fx; same text as sinew: %s"
              % (tps, load_before, rows[1][1] / tps, rows[0][1] / tps, text == texts[0]))
    sys.stdout.flush()

for model in models + spec_models:
    speculation(model)
for model in copy_models:
    speculation(model, beside_llama=True)

def free_generation(srv, tag):
    """One stream generating 2 * n_gen tokens from a prompt it cannot copy from: best
    generation tok/s of reps, and the text of the last rep."""
    best, out = 0.0, None
    for rep in range(reps):
        body = {"prompt": "[%s-free-%d] Once upon a time" % (tag, rep), "max_tokens": 2 * n_gen}
        ttft, gen_s, usage = srv.stream(body)
        best = max(best, (usage["completion_tokens"] - 1) / gen_s if gen_s > 0 else 0.0)
        out = srv.post(body)["choices"][0]["text"]
    return best, out

def draft_model(target, draft):
    """sinew and llama-server, each with and without the draft model, on one stream."""
    tag = os.path.basename(target)
    configs = [("sinew", "off", ["--spec-draft", "0"]),
               ("sinew", "draft model", ["--draft-model", draft, "--no-prompt-lookup"]),
               ("sinew", "draft + lookup", ["--draft-model", draft])]
    if llama_bin:
        configs += [("llama", "off", []),
                    ("llama", "-md (defaults)", ["-md", draft]),
                    ("llama", "-md, 3, p-min 0", ["-md", draft, "--draft-max", "3", "--draft-min", "0",
                                                  "--draft-p-min", "0"])]
    rows, plain = [], {}
    for kind, name, args in configs:
        srv = Server(kind, target, 1, args)
        try:
            load_before = load()
            tps, out = free_generation(srv, tag)
            acc = ""
            if kind == "sinew" and name != "off":
                drafted = srv.metric("sinew_model_spec_model_draft_tokens_total")
                accepted = srv.metric("sinew_model_spec_model_accepted_tokens_total")
                acc = "%.0f%%" % (100 * accepted / drafted) if drafted else "-"
        finally:
            srv.stop()
        if name == "off":
            plain[kind] = (tps, out)
        rows.append((kind, name, tps, tps / plain[kind][0], acc, out == plain[kind][1], load_before))
    print("\n## draft model %s for %s: one stream, %d tokens from a prompt with nothing to copy"
          % (os.path.basename(draft), tag, 2 * n_gen))
    print("%-6s %-18s %10s %9s %9s %10s %6s" % ("server", "speculation", "gen tok/s", "speed-up",
                                              "accepted", "identical", "load"))
    for kind, name, tps, up, acc, same, ld in rows:
        print("%-6s %-18s %10.1f %8.2fx %9s %10s %6s" % (kind, name, tps, up, acc or "-", same, ld))
    if "llama" in plain:
        print("sinew / llama.cpp, no speculation: %.2fx" % (plain["sinew"][0] / plain["llama"][0]))
        for _, n1, t1, *_ in rows[1:3]:
            for _, n2, t2, *_ in rows[4:]:
                print("sinew %s / llama.cpp %s: %.2fx" % (n1, n2, t1 / t2))
    sys.stdout.flush()

for target, draft in draft_pairs:
    draft_model(target, draft)
print("\n# ratio: sinew / llama.cpp for rates, llama.cpp / sinew for times (>1: sinew better)")
print("# uptime at end: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
PY
