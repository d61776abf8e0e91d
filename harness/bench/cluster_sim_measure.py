#!/usr/bin/python3
"""Measures the parameters of harness/bench/cluster_sim.py on this machine (issue 17's
scale-out simulation) and writes them as JSON for `cluster_sim.py --params FILE`.

What it runs (each part a few seconds to about half a minute, on throwaway processes in a
temporary directory under --work-dir, all stopped at the end):

  1. store appends in process: `bench_store --writers 1 8 64` (sync and async appends/s,
     RocksDB group commit);
  2. store appends through a `sinew-store` process (sync): P concurrent loops of
     `sinew-storectl append --expect N`, one process per append; the store's own CPU time
     (from /proc) per append is an upper bound of its gRPC + RocksDB cost (each append
     also pays a new connection), and a light read run the same way gives the
     per-connection share to subtract;
  3. etcd puts: a throwaway etcd (`/usr/bin/etcd`), puts of a ~300-byte value from T
     threads through etcd's JSON gateway (/v3/kv/put) with keep-alive connections: puts/s
     and etcd's CPU per put;
  4. etcd watch fan-out: K `etcdctl watch --prefix` processes on the hosts prefix, M puts:
     events delivered to watchers per second and etcd's CPU per delivered event.

Usage: harness/bench/cluster_sim_measure.py [--bin build/bin] [--out params.json]
           [--work-dir /var/tmp] [--etcd /usr/bin/etcd] [--etcdctl /usr/bin/etcdctl]
           [--skip store,etcd]
The data directories must be on a real disk (fsync costs what it costs there; /tmp on
tmpfs would make sync writes free): --work-dir defaults to /var/tmp.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a process and its reaped children, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_port(port, proc, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds} s")


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_bench_store(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "bench_store"), "--seconds", "2", "--writers", "1", "8", "64",
                          "--reps", "1", "--read-events", "100", "--no-remote"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    rates = {}
    for line in out.splitlines():
        m = re.match(r"^(sync|async)\s+(\d+)\s+(\d+)\s+(\d+)", line)
        if m:
            rates[f"{m.group(1)}_{m.group(2)}"] = float(m.group(3))
    if "sync_64" not in rates or "async_64" not in rates:
        raise RuntimeError("bench_store printed no sync/async 64-writer rates:\n" + out)
    return rates


def run_storectl_loops(storectl, addr, ids, per_loop, args_of):
    """len(ids) concurrent shell-free loops, each running storectl per_loop times."""
    errors = []

    def loop(sid):
        for i in range(per_loop):
            r = subprocess.run([storectl, "--store", addr] + args_of(sid, i), capture_output=True, text=True)
            if r.returncode != 0:
                errors.append(r.stderr.strip())
                return

    threads = [threading.Thread(target=loop, args=(sid,)) for sid in ids]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("sinew-storectl failed: " + errors[0])
    return time.time() - t0


def measure_remote_store(bin_dir, work, loops=8, per_loop=30):
    port = free_port()
    addr = f"127.0.0.1:{port}"
    db = os.path.join(work, "store")
    proc = subprocess.Popen([os.path.join(bin_dir, "sinew-store"), "--db", db, "--listen", addr,
                             "--durability", "sync", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    storectl = os.path.join(bin_dir, "sinew-storectl")
    try:
        wait_port(port, proc, "sinew-store")
        ids = []
        for _ in range(loops):
            r = subprocess.run([storectl, "--store", addr, "create", "--tenant", "sim"], capture_output=True,
                               text=True, check=True)
            ids.append(r.stdout.strip().split()[-1])
        first = {}
        for sid in ids:
            r = subprocess.run([storectl, "--store", addr, "append", sid, "--text", "x"], capture_output=True,
                               text=True, check=True)
            first[sid] = int(r.stdout.strip().split()[-1]) + 1
        text = "y" * 300
        c0 = cpu_seconds(proc.pid)
        wall = run_storectl_loops(storectl, addr, ids, per_loop,
                                  lambda sid, i: ["append", sid, "--kind", "note", "--text", text, "--expect",
                                                  str(first[sid] + i)])
        c1 = cpu_seconds(proc.pid)
        read_wall = run_storectl_loops(storectl, addr, ids, per_loop,
                                       lambda sid, i: ["events", sid, "--from", "0", "--to", "1"])
        c2 = cpu_seconds(proc.pid)
    finally:
        stop(proc)
    n = loops * per_loop
    return {
        "client_processes": loops,
        "appends": n,
        "appends_per_s_process_per_append": n / wall,
        "server_cpu_us_per_append": (c1 - c0) / n * 1e6,
        "server_cpu_us_per_light_read": (c2 - c1) / n * 1e6,
        "light_reads_per_s_process_per_read": n / read_wall,
    }


def descendants(root):
    """{pid: comm} of every live descendant of root."""
    parent, comm = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        parent[int(d)], comm[int(d)] = int(fields[1]), name
    out = {}
    for pid in parent:
        p = pid
        while p in parent and p != root and p > 1:
            p = parent[p]
        if p == root and pid != root:
            out[pid] = comm[pid]
    return out


def measure_harness(bin_dir, sessions=400):
    """bench_harness's concurrent-sessions phase (3 turns, 2 proxy tool calls, 1 s per model
    call, a sync sinew-store): the CPU seconds of that phase's sinew-harness and sinew-store
    processes (the last started of each), sampled every 0.1 s, over the events written."""
    proc = subprocess.Popen([os.path.join(bin_dir, "bench_harness"), "--samples", "3", "--ttft-ms", "5",
                             "--wrk-seconds", "1", "--sessions", str(sessions)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                            env=dict(os.environ, SINEW_BIN_DIR=bin_dir, SINEW_SOURCE_DIR=ROOT))
    cpu, order = {}, []
    lines = []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            for pid, name in descendants(proc.pid).items():
                if name not in ("sinew-harness", "sinew-store"):
                    continue
                try:
                    cpu[pid] = (name, cpu_seconds(pid))
                except OSError:
                    continue
                if pid not in order:
                    order.append(pid)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
        proc.wait(timeout=600)
    finally:
        stop_sampling.set()
        sampler.join()
    text = "\n".join(lines)
    m = re.search(r"events: (\d+) written in ([\d.]+) s", text)
    if proc.returncode != 0 or not m:
        raise RuntimeError("bench_harness failed or printed no events line:\n" + text)
    events, wall = int(m.group(1)), float(m.group(2))
    last = {}
    for pid in order:
        last[cpu[pid][0]] = pid  # the last started of each name: phase 3's
    h_cpu, s_cpu = cpu[last["sinew-harness"]][1], cpu[last["sinew-store"]][1]
    return {"sessions": sessions, "events": events, "wall_s": wall, "events_per_s": events / wall,
            "harness_cpu_s": h_cpu, "store_cpu_s": s_cpu,
            "harness_cpu_us_per_event": h_cpu / events * 1e6, "store_cpu_us_per_event": s_cpu / events * 1e6,
            "bench_harness_output": lines[-3:]}


class Etcd:
    def __init__(self, etcd, work):
        self.port = free_port()
        peer = free_port()
        self.dir = os.path.join(work, "etcd")
        self.proc = subprocess.Popen(
            [etcd, "--name", "sim", "--data-dir", self.dir,
             "--listen-client-urls", f"http://127.0.0.1:{self.port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"sim=http://127.0.0.1:{peer}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "etcd")
        # The gateway answers once the member is ready.
        deadline = time.time() + 30
        while True:
            try:
                self.put_on(http.client.HTTPConnection("127.0.0.1", self.port, timeout=10), "/sim/ready", "1")
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    @staticmethod
    def put_on(conn, key, value):
        body = json.dumps({"key": base64.b64encode(key.encode()).decode(),
                           "value": base64.b64encode(value.encode()).decode()})
        conn.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"etcd put: HTTP {r.status}: {data[:200]!r}")

    def puts(self, threads, per_thread, prefix, value):
        def worker(t):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            for i in range(per_thread):
                self.put_on(conn, f"{prefix}h{t}-{i % 100}", value)
            conn.close()

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        t0 = time.time()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return time.time() - t0

    def close(self):
        stop(self.proc)


def count_puts(path):
    try:
        with open(path, "rb") as f:
            return f.read().split(b"\n").count(b"PUT")  # etcdctl prints PUT, key, value per event
    except FileNotFoundError:
        return 0


def measure_etcd(etcd_bin, etcdctl, work, put_threads=8, puts_per_thread=400, watchers=20, fan_puts=400):
    e = Etcd(etcd_bin, work)
    value = "v" * 300  # a SandboxHostRecord with a few shapes is a few hundred bytes
    try:
        c0 = cpu_seconds(e.proc.pid)
        wall = e.puts(put_threads, puts_per_thread, "/sim/puts/", value)
        c1 = cpu_seconds(e.proc.pid)
        n_puts = put_threads * puts_per_thread
        result = {"put_client_threads": put_threads, "puts": n_puts, "puts_per_s": n_puts / wall,
                  "server_cpu_us_per_put": (c1 - c0) / n_puts * 1e6}
        # Watch fan-out: K watchers of the hosts prefix, M puts on it from 4 threads.
        prefix = "/sinew/sandbox-hosts/"
        files, procs = [], []
        env = dict(os.environ, ETCDCTL_API="3")
        for k in range(watchers):
            path = os.path.join(work, f"watch{k}.out")
            files.append(path)
            out = open(path, "wb")
            procs.append(subprocess.Popen([etcdctl, f"--endpoints=127.0.0.1:{e.port}", "watch", "--prefix", prefix],
                                          stdout=out, stderr=subprocess.DEVNULL, env=env))
            out.close()
        time.sleep(1.5)  # every watch registered
        try:
            c2 = cpu_seconds(e.proc.pid)
            t0 = time.time()
            put_wall = e.puts(4, fan_puts // 4, prefix, value)
            want = (fan_puts // 4) * 4
            deadline = time.time() + 120
            while time.time() < deadline and min(count_puts(p) for p in files) < want:
                time.sleep(0.05)
            fan_wall = time.time() - t0
            c3 = cpu_seconds(e.proc.pid)
            got = sum(count_puts(p) for p in files)
        finally:
            for p in procs:
                stop(p)
        result.update({
            "watchers": watchers, "watched_puts": want, "delivered": got,
            "fanout_puts_per_s": want / put_wall,
            "delivered_per_s": got / fan_wall,
            # etcd's CPU for the phase less what the puts alone cost.
            "server_cpu_us_per_delivered": max(0.0, (c3 - c2) - want * result["server_cpu_us_per_put"] / 1e6)
                                           / max(got, 1) * 1e6,
        })
        return result
    finally:
        e.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--out", default="-")
    ap.add_argument("--work-dir", default="/var/tmp")
    ap.add_argument("--etcd", default="/usr/bin/etcd")
    ap.add_argument("--etcdctl", default="/usr/bin/etcdctl")
    ap.add_argument("--skip", default="", help="comma-separated: store, harness, etcd")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    unknown = skip - {"store", "harness", "etcd"}
    if unknown:
        ap.error(f"--skip: unknown part(s) {sorted(unknown)}; known: store, harness, etcd")
    work = tempfile.mkdtemp(prefix="cluster-sim-", dir=args.work_dir)
    out = {"measured_unix": int(time.time()), "host": socket.gethostname(), "cpus": os.cpu_count(),
           "loadavg_1m_at_start": os.getloadavg()[0]}
    try:
        if "store" not in skip:
            out["bench_store"] = measure_bench_store(args.bin)
            print("bench_store:", out["bench_store"], file=sys.stderr)
            out["remote_store"] = measure_remote_store(args.bin, work)
            print("remote_store:", out["remote_store"], file=sys.stderr)
        if "harness" not in skip:
            out["harness"] = measure_harness(args.bin)
            print("harness:", out["harness"], file=sys.stderr)
        if "etcd" not in skip:
            out["etcd"] = measure_etcd(args.etcd, args.etcdctl, work)
            print("etcd:", out["etcd"], file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["loadavg_1m_at_end"] = os.getloadavg()[0]
    text = json.dumps(out, indent=2, sort_keys=True)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
