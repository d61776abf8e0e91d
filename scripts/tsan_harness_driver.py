#!/usr/bin/python3
"""Drives a harness under ThreadSanitizer (scripts/tsan-harness.sh starts it).

Exercises every thread of the harness at once: sessions created from several client
threads, their event streams followed while they run, follow-up messages, cancels,
forks, export and import, listings, /metrics and /readyz, while the workers drive
sessions through scripted model turns and `http_request` tool calls, and the background thread renews leases and scans. Checks that every session
reaches an end and that no answer is a 5xx; prints a summary and exits 1 on a failure.

Standard library only; run with /usr/bin/python3.
"""
import argparse
import http.client
import json
import sys
import threading
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", required=True, help="127.0.0.1:PORT of the harness (plain HTTP)")
    p.add_argument("--key", required=True)
    p.add_argument("--sessions", type=int, default=120)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--models", default="", help="comma-separated models, taken in turn by the sessions (default: the harness's)")
    return p.parse_args()


class Client:
    def __init__(self, api, key):
        self.api, self.key = api, key

    def call(self, method, path, body=None, content_type="application/json", timeout=120):
        conn = http.client.HTTPConnection(self.api, timeout=timeout)
        headers = {"Authorization": "Bearer " + self.key}
        if body is not None:
            headers["Content-Type"] = content_type
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, data

    def json(self, method, path, body=None):
        status, data = self.call(method, path, None if body is None else json.dumps(body))
        try:
            return status, json.loads(data) if data else {}
        except ValueError:
            return status, {}

    def stream(self, sid):
        """Follows the event stream to its end; returns the seqs seen."""
        conn = http.client.HTTPConnection(self.api, timeout=120)
        conn.request("GET", "/v1/sessions/%s/events/stream" % sid,
                     headers={"Authorization": "Bearer " + self.key})
        r = conn.getresponse()
        seqs = []
        if r.status != 200:
            return r.status, seqs
        for raw in r:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("id:"):
                seqs.append(int(line[3:].strip()))
        conn.close()
        return 200, seqs


def main():
    args = parse_args()
    models = [m for m in args.models.split(",") if m]
    client = Client(args.api, args.key)
    failures, lock = [], threading.Lock()
    counts = {"created": 0, "completed": 0, "cancelled": 0, "failed": 0, "forks": 0, "imports": 0,
              "messages": 0, "streams": 0, "requests": 0}

    def fail(what):
        with lock:
            failures.append(what)

    def count(name, n=1):
        with lock:
            counts[name] += n

    def checked(method, path, body=None, ok=(200, 201, 202)):
        status, data = client.json(method, path, body)
        count("requests")
        if status >= 500 or status not in ok:
            fail("%s %s -> %d %s" % (method, path, status, json.dumps(data)[:200]))
        return status, data

    def wait_end(sid):
        for _ in range(1200):
            status, data = client.json("GET", "/v1/sessions/" + sid)
            st = data.get("session", {}).get("status", "")
            if st in ("completed", "failed", "cancelled"):
                return st
            time.sleep(0.1)
        fail("session %s did not end" % sid)
        return ""

    def one(i):
        task = {"prompt": "task %d" % i, "title": "tsan %d" % i}
        if models:
            task["model"] = models[i % len(models)]
        status, data = checked("POST", "/v1/sessions", task)
        if status != 201:
            return
        sid = data["session"]["id"]
        count("created")
        if i % 7 == 3:
            checked("POST", "/v1/sessions/%s/cancel" % sid, {})
        if i % 2 == 0:
            st, seqs = client.stream(sid)
            count("streams")
            if st != 200 or seqs != sorted(set(seqs)):
                fail("stream of %s: status %d, seqs %s" % (sid, st, seqs[:20]))
        end = wait_end(sid)
        if end:
            count(end)
        if end == "completed":
            status, data = client.json("GET", "/v1/sessions/%s/events" % sid)
            results = [e for e in data.get("events", []) if e.get("type") == "tool_result"]
            if len(results) < 2:
                fail("session %s completed with %d tool results, not 2" % (sid, len(results)))
        if end == "completed" and i % 5 == 1:
            checked("POST", "/v1/sessions/%s/messages" % sid, {"text": "and once more"})
            count("messages")
            wait_end(sid)
        if end == "completed" and i % 6 == 2:
            status, data = checked("POST", "/v1/sessions/%s/fork" % sid, {"at_seq": 2}, ok=(201,))
            if status == 201:
                count("forks")
                wait_end(data["session"]["id"])
        if i % 10 == 4:
            status, exported = client.call("GET", "/v1/sessions/%s/export" % sid)
            count("requests")
            if status != 200:
                fail("export %s -> %d" % (sid, status))
            else:
                # A session id of its own, so the import does not collide.
                text = exported.decode().replace(sid, sid[:-4] + "ffff")
                status, data = client.call("POST", "/v1/sessions/import", text, "application/x-ndjson")
                count("requests")
                if status not in (200, 201):
                    fail("import of %s -> %d %s" % (sid, status, data[:200]))
                else:
                    count("imports")
        checked("GET", "/v1/sessions?limit=20")
        if i % 4 == 0:
            s, _ = client.call("GET", "/metrics")
            s2, _ = client.call("GET", "/readyz")
            count("requests", 2)
            if s != 200 or s2 != 200:
                fail("/metrics %d, /readyz %d" % (s, s2))

    todo = list(range(args.sessions))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            try:
                one(i)
            except Exception as e:  # a dropped connection is a failure too
                fail("session %d: %r" % (i, e))

    t0 = time.time()
    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("tsan driver: %s in %.0f s" % (json.dumps(counts), time.time() - t0))
    for f in failures[:20]:
        print("tsan driver: FAILED " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
