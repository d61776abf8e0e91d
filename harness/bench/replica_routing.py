#!/usr/bin/env python3
"""Prefix-cache hit rate of the harness's model replica routing (issue 17's benchmark):
two real sinew-model replicas (stories260K) behind one harness, SESSIONS sessions of TURNS
turns each (a prompt, then follow-up messages: every call resends the conversation so far),
once with replica_policy "session" (consistent hashing on the session, the default) and
once with "round_robin", each on freshly started replicas. Reads the replicas' own
prefix-cache counters (sinew_model_prefix_cache_{hit,miss}_tokens_total) and prints both
runs side by side with the ratio.

Usage: harness/bench/replica_routing.py [--sessions 8] [--turns 4] [--output-tokens 40] [--bin build/bin]
"""
import argparse
import json
import random
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "bench-key"


def start(argv, needle):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if needle in line:
            return proc, line.strip().rsplit(" ", 1)[1]
    raise RuntimeError(f"{argv[0]} did not start")


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        text = r.read().decode()
        return json.loads(text) if text.startswith(("{", "[")) else text


def counters(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for name in ("prefix_cache_hit_tokens_total", "prefix_cache_miss_tokens_total", "prompt_tokens_total"):
        m = re.search(r"^sinew_model_" + name + r"(?:\{[^}]*\})? (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def wait_responses(base, ids, want):
    """Until every session has `want` model responses and is not running."""
    deadline = time.time() + 600
    pending = set(ids)
    while pending and time.time() < deadline:
        for sid in list(pending):
            events = call("GET", f"{base}/v1/sessions/{sid}/events?limit=1000")["events"]
            responses = sum(1 for e in events if "model_response" in e)
            status = call("GET", f"{base}/v1/sessions/{sid}")["session"]["status"]
            if responses >= want and status in ("completed", "failed", "waiting_for_input"):
                pending.discard(sid)
        time.sleep(0.2)
    if pending:
        raise RuntimeError(f"{len(pending)} sessions did not answer turn {want}")


def run(policy, args, gguf, tmp):
    procs = []
    try:
        replicas = []
        for _ in range(2):
            p, addr = start([f"{args.bin}/sinew-model", "--model", gguf, "--port", "0", "--grpc-port", "-1",
                             "--threads", "1"], "http listening on")
            procs.append(p)
            replicas.append(f"http://{addr}")
        p, store = start([f"{args.bin}/sinew-store", "--db", f"{tmp}/{policy}-db", "--listen", "127.0.0.1:0"],
                         "listening on")
        procs.append(p)
        config = {"listen": "127.0.0.1:0", "store": {"address": store}, "api_keys": {KEY: "t"},
                  "models": {"real": {"kind": "openai", "model": "stories260K", "tools": False,
                                      "context_tokens": 512, "max_output_tokens": args.output_tokens,
                                      "replicas": [r + "/v1" for r in replicas], "replica_policy": policy}}}
        path = f"{tmp}/{policy}.json"
        with open(path, "w") as f:
            json.dump(config, f)
        p, addr = start([f"{args.bin}/sinew-harness", "--config", path], "listening on")
        procs.append(p)
        base = f"http://{addr}"
        before = [counters(r) for r in replicas]
        t0 = time.time()
        ids = [call("POST", f"{base}/v1/sessions", {"prompt": f"Once upon a time {i}", "model": "real"})
               ["session"]["id"] for i in range(args.sessions)]
        wait_responses(base, ids, 1)
        order = random.Random(7)  # the same sequence of turns for both policies
        for turn in range(2, args.turns + 1):
            # Follow-ups in a shuffled order, as users send them: in lockstep, round robin
            # over an even number of sessions would send each one back to the same replica.
            for sid in order.sample(ids, len(ids)):
                call("POST", f"{base}/v1/sessions/{sid}/messages", {"text": "And then the little dog ran to the park and saw a big red ball."})
            wait_responses(base, ids, turn)
        wall = time.time() - t0
        after = [counters(r) for r in replicas]
        total = {k: sum(a[k] - b[k] for a, b in zip(after, before)) for k in before[0]}
        hit, miss = total["prefix_cache_hit_tokens_total"], total["prefix_cache_miss_tokens_total"]
        split = "/".join(f"{a['prompt_tokens_total'] - b['prompt_tokens_total']:.0f}" for a, b in zip(after, before))
        return {"policy": policy, "calls": args.sessions * args.turns, "hit": hit, "miss": miss,
                "rate": hit / (hit + miss) if hit + miss else 0.0, "wall": wall, "split": split}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--output-tokens", type=int, default=40)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    gguf = os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf")
    with tempfile.TemporaryDirectory(prefix="sinew-replica-bench-") as tmp:
        results = [run(policy, args, gguf, tmp) for policy in ("session", "round_robin")]
    print(f"{args.sessions} sessions x {args.turns} turns over 2 sinew-model replicas (stories260K)")
    print(f"{'policy':<12} {'calls':>6} {'hit tokens':>11} {'miss tokens':>12} {'hit rate':>9} {'wall s':>7}  prompt tokens per replica")
    for r in results:
        print(f"{r['policy']:<12} {r['calls']:>6} {r['hit']:>11.0f} {r['miss']:>12.0f} {r['rate']:>9.1%} {r['wall']:>7.1f}  {r['split']}")
    s, rr = results
    if rr["rate"] > 0:
        print(f"hit rate, session / round robin: {s['rate'] / rr['rate']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
