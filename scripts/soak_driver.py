#!/usr/bin/python3
"""The soak's client and sampler (scripts/soak.sh starts the platform, then runs this).

Keeps N sessions in flight against the harness over HTTPS for the given minutes: each
worker submits a task to the scripted soak model (three sandbox tool calls and an answer),
follows its event stream to the end, then reads the whole log and checks it:

  - the session completed, its seqs are 1..n without gaps or repeats, and the stream
    delivered exactly the seqs of the log (nothing lost, nothing twice);
  - three tool calls with distinct call ids, each with exactly one result, none an error;
  - the program's output names this session (bash and read_file results), so one
    sandbox's files never show up in another session.

Every --sample-seconds it records the resident memory (VmRSS) and open descriptors of each
watched process, and the sandboxes sandboxd holds. At the end it prints the least-squares
slope of each series after the warm-up, writes everything as JSON, and exits 1 on any
error or lost session.

Standard library only; run with /usr/bin/python3.
"""
import argparse
import http.client
import json
import os
import ssl
import sys
import threading
import time

FIB_LINE = "6765"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", required=True, help="https://localhost:PORT")
    p.add_argument("--ca", required=True, help="CA file the harness certificate chains to")
    p.add_argument("--key", required=True, help="API key")
    p.add_argument("--model", default="soak-scripted")
    p.add_argument("--sessions", type=int, default=200, help="sessions in flight at once")
    p.add_argument("--minutes", type=float, default=30.0, help="how long new sessions start")
    p.add_argument("--sample-seconds", type=float, default=60.0)
    p.add_argument("--warmup-minutes", type=float, default=5.0,
                   help="samples before this are left out of the slopes")
    p.add_argument("--watch", action="append", default=[], metavar="NAME=PID",
                   help="a process to sample (repeatable)")
    p.add_argument("--sandbox-dir", default="", help="sandboxd's runc root: its entries are live sandboxes")
    p.add_argument("--out", required=True, help="JSON report file")
    return p.parse_args()


class Api:
    """One HTTPS connection per worker, reopened after any failure."""

    def __init__(self, api, ca, key):
        host_port = api.split("://", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        self.ctx = ssl.create_default_context(cafile=ca)
        self.headers = {"Authorization": "Bearer " + key}
        self.conn = None
        self.last_used = 0.0

    # The harness closes a keep-alive connection idle for read_timeout_seconds (30 s);
    # like any pooling client, open a new one instead of reusing one idle that long.
    IDLE_REUSE_SECONDS = 20

    def _connect(self):
        if self.conn is not None and time.monotonic() - self.last_used > self.IDLE_REUSE_SECONDS:
            self.close()
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=120)
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None):
        conn = self._connect()
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        except Exception:
            self.close()
            raise
        self.last_used = time.monotonic()
        if resp.status // 100 != 2:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {payload[:300]!r}")
        return json.loads(payload)

    def stream_seqs(self, session_id):
        """Follows the event stream to its end on its own connection; returns the seqs."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=300)
        try:
            conn.request("GET", f"/v1/sessions/{session_id}/events/stream", headers=self.headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"stream {session_id}: HTTP {resp.status}: {resp.read()[:300]!r}")
            seqs = []
            while True:
                line = resp.readline()
                if not line:
                    break
                if line.startswith(b"id:"):
                    seqs.append(int(line[3:].strip()))
            return seqs
        finally:
            conn.close()


def check_log(session_id, events, streamed):
    """Returns a list of problems with one finished session's log (empty when it is whole)."""
    problems = []
    seqs = [int(e.get("seq", 0)) for e in events]  # uint64: a string in proto3 JSON
    if seqs != list(range(1, len(events) + 1)):
        problems.append(f"seqs are not 1..{len(events)}: {seqs[:20]}")
    if streamed != seqs:
        problems.append(f"the stream delivered {len(streamed)} events, the log holds {len(seqs)}")
    last = events[-1] if events else {}
    if last.get("status_change", {}).get("to") != "SESSION_STATUS_COMPLETED":
        problems.append(f"did not end completed: last event {json.dumps(last)[:200]}")
    calls = [e["tool_call"] for e in events if "tool_call" in e]
    results = [e["tool_result"] for e in events if "tool_result" in e]
    call_ids = [c.get("call_id") for c in calls]
    if len(calls) != 3 or len(set(call_ids)) != 3:
        problems.append(f"expected 3 distinct tool calls, got {call_ids}")
    for cid in call_ids:
        mine = [r for r in results if r.get("call_id") == cid]
        if len(mine) != 1:
            problems.append(f"tool call {cid} has {len(mine)} results")
        elif mine[0].get("is_error"):
            problems.append(f"tool call {cid} failed: {mine[0].get('output', '')[:200]}")
    expected = f"{FIB_LINE} {session_id}"
    outputs = [r.get("output", "") for r in results]
    if sum(1 for o in outputs if expected in o) < 2:
        problems.append(f"bash and read_file did not both print '{expected}': {outputs}")
    return problems


class Soak:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.started = 0
        self.completed = 0
        self.errors = []      # request failures
        self.bad_logs = []    # finished sessions whose log is not whole
        self.session_seconds = []
        self.samples = []
        self.stop_at = time.monotonic() + args.minutes * 60
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def worker(self, index):
        api = Api(self.args.api, self.args.ca, self.args.key)
        while time.monotonic() < self.stop_at:
            start = time.monotonic()
            sid = None
            try:
                created = api.request("POST", "/v1/sessions", {
                    "prompt": "Compute the 20th Fibonacci number with a program.",
                    "model": self.args.model, "title": f"soak {index}"})
                sid = created["session"]["id"]
                with self.lock:
                    self.started += 1
                streamed = api.stream_seqs(sid)
                events, after = [], 0
                while True:
                    page = api.request("GET", f"/v1/sessions/{sid}/events?after={after}&limit=1000")
                    events += page["events"]
                    if not page["events"]:
                        break
                    after = int(page["events"][-1]["seq"])
                problems = check_log(sid, events, streamed)
                with self.lock:
                    if problems:
                        self.bad_logs.append({"session": sid, "problems": problems})
                    else:
                        self.completed += 1
                        self.session_seconds.append(time.monotonic() - start)
            except Exception as e:  # noqa: BLE001 (every failure is counted and reported)
                with self.lock:
                    self.errors.append({"session": sid, "error": str(e)[:500],
                                        "at_s": round(time.monotonic() - self.t0, 1)})
                api.close()
                time.sleep(1)
        api.close()

    def sample_once(self):
        row = {"t_min": round((time.monotonic() - self.t0) / 60, 3)}
        for spec in self.args.watch:
            name, pid = spec.split("=", 1)
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except (OSError, StopIteration):
                rss_kb, fds = None, None
            row[name + "_rss_mb"] = None if rss_kb is None else round(rss_kb / 1024, 2)
            row[name + "_fds"] = fds
        if self.args.sandbox_dir:
            try:
                row["sandboxes"] = len(os.listdir(self.args.sandbox_dir))
            except OSError:
                row["sandboxes"] = None
        with self.lock:
            row["started"] = self.started
            row["completed"] = self.completed
            row["errors"] = len(self.errors) + len(self.bad_logs)
        self.samples.append(row)
        print("soak: " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    def sampler(self):
        self.sample_once()
        while not self.done.wait(self.args.sample_seconds):
            self.sample_once()
        self.sample_once()


def slope(points):
    """Least-squares slope of (x, y) points; None with fewer than 3."""
    pts = [(x, y) for x, y in points if y is not None]
    if len(pts) < 3:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def main():
    args = parse_args()
    soak = Soak(args)
    sampler = threading.Thread(target=soak.sampler, daemon=True)
    sampler.start()
    workers = [threading.Thread(target=soak.worker, args=(i,)) for i in range(args.sessions)]
    for w in workers:
        w.start()
        time.sleep(0.02)  # no thundering start
    for w in workers:
        w.join()
    soak.done.set()
    sampler.join()

    series = sorted({k for row in soak.samples for k in row if k.endswith(("_rss_mb", "_fds"))})
    steady = [r for r in soak.samples if r["t_min"] >= args.warmup_minutes]
    slopes = {k: slope([(r["t_min"], r.get(k)) for r in steady]) for k in series}
    secs = sorted(soak.session_seconds)
    report = {
        "minutes": args.minutes, "sessions_in_flight": args.sessions,
        "started": soak.started, "completed": soak.completed,
        "errors": soak.errors[:50], "error_count": len(soak.errors),
        "bad_logs": soak.bad_logs[:50], "bad_log_count": len(soak.bad_logs),
        "lost": soak.started - soak.completed - len(soak.bad_logs) -
                len([e for e in soak.errors if e["session"]]),
        "sessions_per_minute": round(soak.completed / max(args.minutes, 1e-9), 1),
        "session_seconds_p50": round(secs[len(secs) // 2], 2) if secs else None,
        "session_seconds_p99": round(secs[min(len(secs) - 1, int(len(secs) * 0.99))], 2) if secs else None,
        "slopes_per_minute_after_warmup": {k: None if v is None else round(v, 4) for k, v in slopes.items()},
        "samples": soak.samples,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"soak: {soak.completed} of {soak.started} sessions completed whole in {args.minutes} min "
          f"({report['sessions_per_minute']}/min; session p50 {report['session_seconds_p50']} s, "
          f"p99 {report['session_seconds_p99']} s); request errors {len(soak.errors)}, "
          f"logs not whole {len(soak.bad_logs)}")
    print(f"soak: slopes after the first {args.warmup_minutes} min (per minute):")
    for k, v in report["slopes_per_minute_after_warmup"].items():
        first = next((r.get(k) for r in steady if r.get(k) is not None), None)
        last = next((r.get(k) for r in reversed(steady) if r.get(k) is not None), None)
        print(f"  {k:24s} {v if v is not None else 'n/a':>10}   ({first} -> {last})")
    for e in soak.errors[:10]:
        print("soak: error:", json.dumps(e), file=sys.stderr)
    for b in soak.bad_logs[:10]:
        print("soak: log not whole:", json.dumps(b), file=sys.stderr)
    return 0 if not soak.errors and not soak.bad_logs and soak.completed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
