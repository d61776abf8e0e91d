#!/usr/bin/python3
"""Discrete-event simulation of a Sinew cluster at scale (issue 17's benchmark): what
saturates first -- store shards, etcd (host records and their watch fan-out), harness CPU,
the harness's lease renewals, model replicas, sandbox hosts -- and at what load.

The model (docs/scale-out.md, "Simulation: 100 hosts, 100,000 sessions", says the same
with the sources of every parameter):

* A closed population of SESSIONS concurrent agent sessions. Each runs TURNS turns: a model
  call, then (in every turn but the last) one sandbox tool call. A session that ends is
  replaced at once by a new one, so the population stays constant; sessions start at
  random turns and phases so that the cluster is in steady state from the start.
* Store appends, as the driver makes them (harness/src/driver*.cc): a new session writes
  `session_created` and takes its lease (2 writes); each turn appends `model_request` and
  `model_response` (2); a tool call appends `sandbox_provisioned` at the session's first
  sandbox call, then `tool_call` and `tool_result` (2, or 1 of two events when no host has
  room: the error result goes with the call); the end appends `sandbox_released` and the
  final status (2). Every driven session also renews its lease every lease_ttl/3 (a synced
  RocksDB write, rocks_store_write.cc) -- the harness renews 16 at a time (harness.cc
  RenewAll). A session maps to one of SHARDS shards (FNV-1a of its id: uniform).
* A store shard is a group-commit server: writes that arrive while a commit runs wait for
  the next one; a commit of n writes takes fsync + n * cpu_per_write / store_cores (RocksDB
  group commit shares one fsync; the per-write CPU, gRPC and RocksDB, runs on the store's
  cores). Its utilisation is its CPU share; a write's latency is its wait for the commit
  that holds it to end. The session's turn includes those latencies.
* A model call goes to the session's home replica (consistent hashing: uniform), unless
  that replica has its harness's bound of calls in flight (max(4, ceil(1.25 x (calls in
  flight + 1) / replicas)), replica_router.h, each harness counting its own calls); then to
  the next one under it (the ring is approximated by index order). It is served FIFO at the replica's
  aggregate rate: out_tokens / gen_tps + new_prompt_tokens / prefill_tps (the prefix
  cache holds the conversation, so only the turn's new tokens are prefilled). FIFO at the
  aggregate rate has the mean response time of processor sharing for exponential work.
* A sandbox is provisioned at a session's first tool call (provision_s), placed by the rule
  of harness/src/placement.h: the least loaded host (max of cpu, memory and count
  ratios) that fits, ties by host id; no room: the call gets an error result and the
  session goes on. Sandboxes are released when the session ends. Tool calls take tool_s
  (exponential).
* Host records (sandbox-agent/src/sandboxd/host_registration.cc): every 200 ms (poll) a
  host compares its occupancy with what it published and puts its record when it changed,
  and at least every 10 s; so a host puts at most 5 times a second however busy it is.
  Lease keepalives every ttl/3. etcd serves puts FIFO; each put costs put CPU plus one
  delivery per watching harness (every harness's PrefixMirror watches the hosts prefix).
  Each delivery also costs the receiving harness mirror CPU.
* Harness CPU is a fluid resource: events appended by its sessions x CPU per event
  (measured all-in: driver, store client, model and tool HTTP) plus mirror deliveries,
  over its cores. Sessions are spread evenly over harnesses (each holds one worker
  thread per driven session: `workers` must be >= its sessions).
* Lease renewal pass: ceil(sessions per harness / 16) x mean store write latency. Passes
  start every lease_ttl/3, or at once when the last one overran, so a session is renewed
  every max(ttl/3, pass): a pass longer than the ttl lets leases expire (and the harness
  loses its own sessions); its utilisation is pass / ttl.

Utilisation per resource is busy time (or demand) over capacity in the measured window.
A resource counts as saturated from 90% on (queues grow without bound near 1, and a
closed population never quite gets there). A sweep reports, per resource, the load where
its utilisation crosses 90% (interpolated between swept loads); one run extrapolates
each utilisation linearly to 90% (right for the throughput-driven resources below
saturation; an upper bound for the lease renewal pass, which grows with the store's
latency too; etcd's load stops growing at one put per host and poll, so it saturates
only if that ceiling does).

Usage:
  cluster_sim.py [--sessions 100000] [--hosts 100] [--shards 8] [--harnesses 10]
                 [--replicas 0 (auto)] [--sweep 25000,50000,100000,150000]
                 [--params measured.json] [--set name=value ...] [--json]
  cluster_sim.py --self-test      (the ctest: a small cluster, seconds)
  cluster_sim.py --list-params    (every parameter, its default and its source)
Parameters can be refreshed with harness/bench/cluster_sim_measure.py (--params reads its
JSON output).
"""
import argparse
import heapq
import json
import math
import os
import random
import sys

# name: (default, unit, source). The measured defaults are those of
# harness/bench/cluster_sim_measured.json (cluster_sim_measure.py on the shared 2-core
# development machine, 2026-12-01); see --list-params and docs/scale-out.md.
PARAMS = {
    # Cluster shape.
    "sessions": (100000, "sessions", "the issue: 100,000 concurrent sessions"),
    "hosts": (100, "hosts", "the issue: 100 sandbox hosts"),
    "shards": (8, "store shards", "chosen default"),
    "harnesses": (10, "harness processes", "chosen default"),
    "replicas": (0, "model replicas", "0: as needed, sized for replica_target_util at the nominal load"),
    "replica_target_util": (0.7, "fraction", "chosen: replicas sized to run at 70% at --sessions"),
    # Workload.
    "turns": (10, "turns per session", "assumed: a short agent task; a tool call in all but the last"),
    "out_tokens": (150, "tokens per model call", "assumed: a tool call or a short answer"),
    "new_prompt_tokens": (600, "tokens per model call", "assumed: the tool result and message added per turn"),
    "tool_s": (2.0, "s per tool call (mean)", "assumed: a shell command in the sandbox"),
    "provision_s": (0.3, "s per provision", "docs/scale-out.md: harness provision 265-443 ms"),
    # Store.
    "fsync_ms": (3.47, "ms per group commit", "bench_store: 64 writers sync 14,951/s, async 79,228/s: 64/14951 - 64/79228 s"),
    "store_cpu_us_per_write": (573.0, "us CPU per write", "cluster_sim_measure.py: sinew-store CPU / events in bench_harness's 400 sessions (all in)"),
    "store_cores": (8, "cores per shard", "chosen: one 8-core store machine per shard"),
    "store_max_group": (1000, "writes per commit", "RocksDB max_write_batch_group_size_bytes 1 MiB / ~1 KiB events"),
    "lease_ttl_ms": (10000, "ms", "harness config default lease_ttl_ms"),
    "renew_lanes": (16, "renewals in flight per harness", "harness.cc kRenewLanes"),
    # etcd and host records.
    "poll_ms": (200, "ms", "host_registration.h poll"),
    "refresh_s": (10, "s", "host_registration.h refresh"),
    "etcd_ttl_s": (5, "s", "sinew-sandboxd --etcd-ttl default; keepalive every ttl/3"),
    "etcd_cpu_us_per_put": (484.0, "us CPU per put", "cluster_sim_measure.py: etcd CPU / puts (through its JSON gateway, 8 clients)"),
    "etcd_cpu_us_per_delivery": (78.0, "us CPU per watch event", "cluster_sim_measure.py: etcd CPU / events delivered to 20 etcdctl watchers"),
    "etcd_cores": (2, "cores", "chosen: a 2-core etcd member like the measuring machine"),
    # Harness.
    "harness_cpu_us_per_event": (779.0, "us CPU per event", "cluster_sim_measure.py: sinew-harness CPU / events in bench_harness's 400 sessions (all in)"),
    "harness_cpu_us_per_mirror_event": (50.0, "us CPU per host record", "estimate (not measured): decode a record, update the mirror"),
    "harness_cores": (16, "cores per harness", "chosen default"),
    # Model replicas.
    "replica_load_factor": (1.25, "", "harness config default replica_load_factor"),
    "replica_min_in_flight": (4, "calls", "harness config default replica_min_in_flight"),
    "gen_tps": (536.0, "tokens/s per replica", "docs/model-engine.md: llama.cpp tg128 Q8_0 1.1B on the H200, single stream (a floor for a batched replica)"),
    "prefill_tps": (44000.0, "tokens/s per replica", "docs/model-engine.md: llama.cpp pp512 Q8_0 1.1B on the H200"),
    # Sandbox hosts.
    "host_cpu_millicores": (128000, "millicores", "chosen: a 128-core host"),
    "host_memory_gib": (512.0, "GiB", "chosen"),
    "host_max_sandboxes": (1100, "sandboxes", "chosen (sinew-sandboxd's default --max-sandboxes is 64)"),
    "sandbox_cpu_millicores": (100, "millicores", "chosen small shape (the daemon's default is 1000)"),
    "sandbox_memory_gib": (0.25, "GiB", "chosen small shape (the daemon's default is 1 GiB)"),
    # Run.
    "sim_s": (14.0, "simulated s", "long enough for several turns per session"),
    "warmup_s": (4.0, "simulated s", "not measured: the start transient"),
    "seed": (1, "", ""),
}
INT_PARAMS = {"replica_min_in_flight", "sessions", "hosts", "shards", "harnesses", "replicas", "turns", "store_max_group", "renew_lanes",
              "host_cpu_millicores", "host_max_sandboxes", "sandbox_cpu_millicores", "seed", "store_cores",
              "harness_cores", "etcd_cores"}
# Parameters that may be 0.
ZERO_OK = {"replicas", "warmup_s", "seed"}


# A resource counts as saturated from 90% busy on: queueing delays grow without bound as
# utilisation nears 1, and a closed system (this one) never quite reaches 1.
SATURATED = 0.9


class ParamError(ValueError):
    pass


def make_params(overrides):
    """Defaults with overrides applied; every value checked. Raises ParamError naming the field."""
    p = {k: v[0] for k, v in PARAMS.items()}
    for name, value in overrides.items():
        if name not in PARAMS:
            raise ParamError(f"unknown parameter '{name}' (--list-params lists them)")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ParamError(f"parameter '{name}' must be a number (got {value!r})")
        if not math.isfinite(v):
            raise ParamError(f"parameter '{name}' must be finite (got {value!r})")
        if name in INT_PARAMS:
            if v != int(v):
                raise ParamError(f"parameter '{name}' must be an integer (got {value!r})")
            v = int(v)
        p[name] = v
    for name, v in p.items():
        if v < 0 or (v == 0 and name not in ZERO_OK):
            raise ParamError(f"parameter '{name}' must be {'>= 0' if name in ZERO_OK else '> 0'} (got {v})")
    if p["warmup_s"] >= p["sim_s"]:
        raise ParamError(f"parameter 'warmup_s' ({p['warmup_s']}) must be less than 'sim_s' ({p['sim_s']})")
    if p["replica_target_util"] > 1:
        raise ParamError(f"parameter 'replica_target_util' must be at most 1 (got {p['replica_target_util']})")
    if p["turns"] < 1:
        raise ParamError("parameter 'turns' must be at least 1")
    return p


def params_from_measurement(m):
    """Overrides from cluster_sim_measure.py's JSON (only the parts it has)."""
    out = {}
    bs = m.get("bench_store")
    if bs and bs.get("sync_64") and bs.get("async_64"):
        out["fsync_ms"] = max(0.05, (64 / bs["sync_64"] - 64 / bs["async_64"]) * 1000)
    h = m.get("harness")
    if h:
        out["store_cpu_us_per_write"] = h["store_cpu_us_per_event"]
        out["harness_cpu_us_per_event"] = h["harness_cpu_us_per_event"]
    e = m.get("etcd")
    if e:
        out["etcd_cpu_us_per_put"] = e["server_cpu_us_per_put"]
        out["etcd_cpu_us_per_delivery"] = e["server_cpu_us_per_delivered"]
    return out


def model_service_s(p):
    return p["out_tokens"] / p["gen_tps"] + p["new_prompt_tokens"] / p["prefill_tps"]


def auto_replicas(p):
    """Replicas so that the model runs at replica_target_util at p['sessions'] with no queueing
    elsewhere: a turn takes the model's service time plus the tool and (amortised) provision."""
    svc = model_service_s(p)
    turn = svc + (p["tool_s"] * (p["turns"] - 1) + p["provision_s"]) / p["turns"]
    return max(1, math.ceil(p["sessions"] * svc / turn / p["replica_target_util"]))


class Shard:
    """A group-commit server. Pending writes are kept as a count and the sum of their arrival
    times, so a commit's latency sum is n * end - sum(arrivals)."""

    def __init__(self, sim, idx):
        self.sim, self.idx = sim, idx
        self.pending = 0.0
        self.in_flight = 0.0  # taken by the running commit
        self.pending_arrival_sum = 0.0
        self.busy_until = -1.0
        self.renew_rate = 0.0  # lease renewal writes per second, injected as a fluid
        self.renew_t = 0.0
        self.latency_ewma = sim.p["fsync_ms"] / 1000.0
        # Window statistics.
        self.writes = 0.0
        self.latency_sum = 0.0
        self.cpu_s = 0.0
        self.commits = 0

    def inject_renewals(self, now):
        if now > self.renew_t:
            n = self.renew_rate * (now - self.renew_t)
            self.sim.renewals_injected += n
            self.pending += n
            self.pending_arrival_sum += n * (now + self.renew_t) / 2
            self.renew_t = now

    def write(self, now, n):
        self.inject_renewals(now)
        self.pending += n
        self.pending_arrival_sum += n * now
        self.sim.writes_submitted += n
        if self.busy_until < now:
            self.start_commit(now)
        return self.latency_ewma

    def start_commit(self, now):
        self.inject_renewals(now)
        if self.pending <= 0:
            return
        p = self.sim.p
        take = min(self.pending, p["store_max_group"])
        frac = take / self.pending
        arrival_sum = self.pending_arrival_sum * frac
        self.pending -= take
        self.in_flight += take
        self.pending_arrival_sum -= arrival_sum
        cpu = take * p["store_cpu_us_per_write"] / 1e6
        end = now + p["fsync_ms"] / 1000.0 + cpu / p["store_cores"]
        self.busy_until = end
        self.sim.schedule(end, self.end_commit, (take, arrival_sum, cpu))

    def end_commit(self, now, take, arrival_sum, cpu):
        mean = (take * now - arrival_sum) / take
        self.latency_ewma = 0.8 * self.latency_ewma + 0.2 * mean
        if self.sim.measuring(now):
            self.writes += take
            self.latency_sum += take * now - arrival_sum
            self.cpu_s += cpu
            self.commits += 1
        self.in_flight -= take
        self.sim.writes_committed += take
        self.start_commit(now)

    def tick(self, now):
        """Every 5 ms: an idle shard commits the lease renewals that came in meanwhile."""
        if self.busy_until < now:
            self.start_commit(now)
        self.sim.schedule(now + 0.005, self.tick, ())


class Sim:
    def __init__(self, p):
        self.p = p
        self.rng = random.Random(p["seed"])
        self.heap = []
        self.seq = 0
        self.t_begin = p["warmup_s"]
        self.t_end = p["sim_s"]
        self.replicas = p["replicas"] or auto_replicas(p)
        self.shards = [Shard(self, i) for i in range(p["shards"])]
        self.writes_submitted = 0.0
        self.renewals_injected = 0.0
        self.writes_committed = 0.0
        # Model replicas: FIFO at the aggregate rate (Lindley recursion: no events).
        self.replica_free = [0.0] * self.replicas
        self.replica_busy = [0.0] * self.replicas
        self.model_wait_sum = 0.0
        self.model_calls = 0
        self.moved_calls = 0
        self.inflight = [[0] * self.replicas for _ in range(p["harnesses"])]  # per harness router
        self.inflight_total = [0] * p["harnesses"]
        # Hosts.
        self.host_running = [0] * p["hosts"]
        self.host_changed = [False] * p["hosts"]
        self.host_last_put = [0.0] * p["hosts"]
        cap_cpu = p["host_cpu_millicores"] // p["sandbox_cpu_millicores"]
        cap_mem = int(p["host_memory_gib"] // p["sandbox_memory_gib"])
        self.host_cap = min(cap_cpu, cap_mem, p["host_max_sandboxes"])
        self.host_cap_by = min((cap_cpu, "cpu"), (cap_mem, "memory"), (p["host_max_sandboxes"], "max_sandboxes"))[1]
        self.provisions = 0
        self.refused = 0
        # etcd: FIFO (Lindley) for puts with their fan-out; keepalives as a fluid.
        self.etcd_free = 0.0
        self.etcd_busy = 0.0
        self.etcd_puts = 0
        self.etcd_delay_sum = 0.0
        # Harnesses: fluid CPU.
        self.harness_events = [0.0] * p["harnesses"]
        self.harness_sessions = [0] * p["harnesses"]
        self.mirror_events = 0
        self.turns_done = 0
        self.sessions_completed = 0
        self.sessions_started = 0
        self.completed_turn_counts = []  # turns each completed session ran (checked by the self-test)
        self.session_shard = []  # the shard of each session under way at the start
        self.events_by_kind = {}

    # Event queue.
    def schedule(self, t, fn, args):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn, args))

    def measuring(self, t):
        return self.t_begin <= t <= self.t_end

    def window(self):
        return self.t_end - self.t_begin

    # Appends.
    def append(self, now, s, kind, writes=1):
        self.events_by_kind[kind] = self.events_by_kind.get(kind, 0) + writes
        if self.measuring(now):
            self.harness_events[s[0]] += writes
        return self.shards[s[1]].write(now, writes)

    # Sessions: [harness, shard, home replica, turn, sandbox host or -1, turns done, id,
    # the replica of the call in flight].
    def new_session(self, now, sid):
        """A new session (replacing one that ended): created, leased, then its first turn."""
        p = self.p
        shard = self.rng.randrange(p["shards"])
        s = [sid % p["harnesses"], shard, self.rng.randrange(self.replicas), 0, -1, 0, sid, -1]
        self.sessions_started += 1
        lat = self.append(now, s, "session_created")
        lat += self.append(now, s, "lease")
        self.schedule(now + lat, self.start_turn, (s,))

    def session_under_way(self, t, sid, turn):
        """A session already under way at the start: it holds its lease, and past its first
        tool call a sandbox (placed now, so hosts start with their steady occupancy)."""
        p = self.p
        shard = self.rng.randrange(p["shards"])
        self.session_shard.append(shard)
        s = [sid % p["harnesses"], shard, self.rng.randrange(self.replicas), turn, -1, turn, sid, -1]
        self.sessions_started += 1
        if turn > 0:
            s[4] = self.place(-1.0)
        self.schedule(t, self.start_turn, (s,))

    def route(self, now, s):
        """The harness's router (replica_router.h): the session's home unless that replica has
        the bound of this harness's calls in flight, then the next one clockwise under it."""
        p = self.p
        inflight = self.inflight[s[0]]
        n = self.replicas
        bound = max(p["replica_min_in_flight"],
                    math.ceil(p["replica_load_factor"] * (self.inflight_total[s[0]] + 1) / n))
        r = s[2]
        for _ in range(n):
            if inflight[r] < bound:
                break
            r = (r + 1) % n
        if r != s[2] and self.measuring(now):
            self.moved_calls += 1
        inflight[r] += 1
        self.inflight_total[s[0]] += 1
        s[7] = r
        return r

    def start_turn(self, now, s):
        lat = self.append(now, s, "model_request")
        t = now + lat
        r = self.route(t, s)
        svc = model_service_s(self.p) * self.rng.expovariate(1.0)
        start = max(t, self.replica_free[r])
        end = start + svc
        self.replica_free[r] = end
        if self.measuring(start):
            self.replica_busy[r] += svc
            self.model_wait_sum += start - t
            self.model_calls += 1
        self.schedule(end, self.model_done, (s,))

    # Every append is submitted at the moment it is made (the shard must not see writes from
    # the future); appends made one after the other add one write latency each.
    def model_done(self, now, s):
        p = self.p
        self.inflight[s[0]][s[7]] -= 1
        self.inflight_total[s[0]] -= 1
        lat = self.append(now, s, "model_response")
        if s[3] < p["turns"] - 1:
            if s[4] < 0:
                host = self.place(now)
                if host < 0:
                    # The call and its error result go in one append.
                    self.events_by_kind["tool_call"] = self.events_by_kind.get("tool_call", 0) + 1
                    lat += self.append(now, s, "tool_result")
                    self.schedule(now + lat, self.end_turn, (s,))
                    return
                s[4] = host
                self.schedule(now + lat + p["provision_s"], self.provisioned, (s,))
                return
            lat += self.append(now, s, "tool_call")
            self.schedule(now + lat + p["tool_s"] * self.rng.expovariate(1.0), self.tool_done, (s,))
        else:
            if s[4] >= 0:
                self.release(now, s[4])
                s[4] = -1
                lat += self.append(now, s, "sandbox_released")
            lat += self.append(now, s, "status_completed")
            self.schedule(now + lat, self.session_done, (s,))

    def provisioned(self, now, s):
        lat = self.append(now, s, "sandbox_provisioned")
        lat += self.append(now, s, "tool_call")
        self.schedule(now + lat + self.p["tool_s"] * self.rng.expovariate(1.0), self.tool_done, (s,))

    def tool_done(self, now, s):
        lat = self.append(now, s, "tool_result")
        self.schedule(now + lat, self.end_turn, (s,))

    def end_turn(self, now, s):
        s[3] += 1
        s[5] += 1
        if self.measuring(now):
            self.turns_done += 1
        self.start_turn(now, s)

    def session_done(self, now, s):
        s[5] += 1  # the last turn
        if self.measuring(now):
            self.turns_done += 1
            self.sessions_completed += 1
        self.completed_turn_counts.append((s[3], s[5]))
        self.new_session(now, s[6] + self.p["sessions"])

    # Hosts and etcd.
    def place(self, now):
        running = self.host_running
        h = min(range(len(running)), key=running.__getitem__)  # least loaded, ties by id
        if running[h] >= self.host_cap:
            if self.measuring(now):
                self.refused += 1
            return -1
        running[h] += 1
        self.host_changed[h] = True
        if self.measuring(now):
            self.provisions += 1
        return h

    def release(self, now, h):
        self.host_running[h] -= 1
        self.host_changed[h] = True

    def host_tick(self, now, h):
        p = self.p
        if self.host_changed[h] or now - self.host_last_put[h] >= p["refresh_s"]:
            self.host_changed[h] = False
            self.host_last_put[h] = now
            svc = (p["etcd_cpu_us_per_put"] + p["harnesses"] * p["etcd_cpu_us_per_delivery"]) / 1e6 / p["etcd_cores"]
            start = max(now, self.etcd_free)
            self.etcd_free = start + svc
            if self.measuring(now):
                self.etcd_busy += svc
                self.etcd_puts += 1
                self.etcd_delay_sum += self.etcd_free - now
                self.mirror_events += p["harnesses"]
        self.schedule(now + p["poll_ms"] / 1000.0, self.host_tick, (h,))

    def run(self):
        p = self.p
        n = p["sessions"]
        per_harness = [0] * p["harnesses"]
        for sid in range(n):
            per_harness[sid % p["harnesses"]] += 1
        self.harness_sessions = per_harness
        # Lease renewals: every driven session, every ttl/3, on its shard.
        counts = [0] * p["shards"]
        # Sessions start in steady state: a random turn, a random moment within a turn.
        mean_turn = model_service_s(p) + p["tool_s"]
        for sid in range(n):
            turn = self.rng.randrange(p["turns"])
            self.session_under_way(self.rng.uniform(0, mean_turn), sid, turn)
            counts[self.session_shard[sid]] += 1
        for k, shard in enumerate(self.shards):
            shard.renew_rate = counts[k] / (p["lease_ttl_ms"] / 3000.0)
            self.schedule(self.rng.uniform(0, 0.005), shard.tick, ())
        for h in range(p["hosts"]):
            self.schedule(self.rng.uniform(0, p["poll_ms"] / 1000.0), self.host_tick, (h,))
        heap = self.heap
        while heap:
            t, _, fn, args = heapq.heappop(heap)
            if t > self.t_end:
                break
            fn(t, *args)
        return self.report()

    # Results.
    def report(self):
        p = self.p
        w = self.window()
        out = {"sessions": p["sessions"], "hosts": p["hosts"], "shards": p["shards"], "harnesses": p["harnesses"],
               "replicas": self.replicas, "window_s": w}
        out["turns_per_s"] = self.turns_done / w
        out["sessions_completed_per_s"] = self.sessions_completed / w
        writes = sum(s.writes for s in self.shards)
        out["store_writes_per_s"] = writes / w
        shard_util = [s.cpu_s / (p["store_cores"] * w) for s in self.shards]
        lat = [s.latency_sum / s.writes * 1000 if s.writes else 0.0 for s in self.shards]
        backlog = [s.pending for s in self.shards]
        res = {}
        res["store_shard"] = {
            "util": max(shard_util), "mean_util": sum(shard_util) / len(shard_util),
            "delay_ms": max(lat), "backlog_writes": max(backlog),
            "what": f"CPU of the busiest of {p['shards']} shards ({p['store_cores']} cores each); "
                    f"delay = mean write latency (fsync {p['fsync_ms']:.1f} ms included)"}
        etcd_keepalive = p["hosts"] / (p["etcd_ttl_s"] / 3.0) * p["etcd_cpu_us_per_put"] / 1e6 / p["etcd_cores"]
        etcd_util = self.etcd_busy / w + etcd_keepalive
        put_cost = (p["etcd_cpu_us_per_put"] + p["harnesses"] * p["etcd_cpu_us_per_delivery"]) / 1e6 / p["etcd_cores"]
        res["etcd"] = {
            "util": etcd_util,
            # Every host putting at every poll: the most host records can ever cost etcd.
            "ceiling_util": p["hosts"] * 1000.0 / p["poll_ms"] * put_cost + etcd_keepalive, "delay_ms": (self.etcd_delay_sum / self.etcd_puts * 1000) if self.etcd_puts else 0.0,
            "puts_per_s": self.etcd_puts / w, "deliveries_per_s": self.mirror_events / w,
            "what": f"CPU of etcd ({p['etcd_cores']} cores): host record puts x {p['harnesses']} watchers, "
                    "keepalives; delay = put to last delivery"}
        hutil = []
        for h in range(p["harnesses"]):
            cpu = self.harness_events[h] * p["harness_cpu_us_per_event"] / 1e6 + \
                (self.mirror_events / p["harnesses"]) * p["harness_cpu_us_per_mirror_event"] / 1e6
            hutil.append(cpu / (w * p["harness_cores"]))
        u = max(hutil)
        svc = p["harness_cpu_us_per_event"] / 1e3 / p["harness_cores"]
        res["harness_cpu"] = {
            "util": u, "delay_ms": (u / (1 - u) * svc) if u < 1 else float("inf"),
            "what": f"CPU of the busiest of {p['harnesses']} harnesses ({p['harness_cores']} cores); "
                    "delay = M/M/1 wait per event (fluid)"}
        mean_lat_s = (sum(s.latency_sum for s in self.shards) / writes) if writes else p["fsync_ms"] / 1000
        per_h = max(self.harness_sessions)
        pass_s = math.ceil(per_h / p["renew_lanes"]) * mean_lat_s
        res["lease_renewal"] = {
            "util": pass_s / (p["lease_ttl_ms"] / 1000.0), "delay_ms": pass_s * 1000,
            "what": f"a harness's renewal pass over {per_h} sessions, {p['renew_lanes']} at a time, against the "
                    f"{p['lease_ttl_ms'] / 1000.0:.0f} s ttl (a pass over ttl/3 is logged; over the ttl leases "
                    "expire); delay = pass time"}
        rutil = [b / w for b in self.replica_busy]
        res["model_replicas"] = {
            "util": sum(rutil) / len(rutil), "max_util": max(rutil),
            "moved_calls_per_s": self.moved_calls / w,
            "delay_ms": (self.model_wait_sum / self.model_calls * 1000) if self.model_calls else 0.0,
            "what": f"mean over {self.replicas} replicas ({p['gen_tps']:.0f} gen tok/s each; the busiest is in "
                    "--json as max_util); delay = mean queue wait"}
        running = sum(self.host_running)
        cap = self.host_cap * p["hosts"]
        res["sandbox_hosts"] = {
            "util": running / cap, "delay_ms": 0.0, "refused_per_s": self.refused / w,
            "what": f"sandboxes running / {cap} slots ({self.host_cap} per host, bound by {self.host_cap_by}); "
                    "at 1 tool calls get 'no sandbox host has room'"}
        out["resources"] = res
        # Linear extrapolation of each utilisation to SATURATED; the first to get there.
        # etcd's load does not grow with sessions past one put per host and poll: it saturates
        # only if that ceiling does. The lease renewal pass grows with the store's latency too,
        # so its figure is an upper bound.
        sat = {}
        for name, r in res.items():
            if r["util"] >= SATURATED:
                sat[name] = p["sessions"]
            elif name == "etcd" and r["ceiling_util"] < SATURATED:
                sat[name] = float("inf")
            else:
                sat[name] = p["sessions"] * SATURATED / r["util"] if r["util"] > 0 else float("inf")
        out["saturates_at_sessions"] = sat
        # Ties (several saturated at this load): the one furthest past its capacity.
        out["first_to_saturate"] = min(sat, key=lambda n: (sat[n], -res[n]["util"]))
        out["writes_submitted"] = self.writes_submitted
        out["renewals_injected"] = self.renewals_injected
        out["writes_committed"] = self.writes_committed
        out["writes_pending"] = sum(s.pending + s.in_flight for s in self.shards)
        out["events_by_kind"] = self.events_by_kind
        out["sessions_over_workers"] = per_h
        return out


def simulate(overrides):
    p = make_params(overrides)
    return Sim(p).run()


def fmt_sat(x):
    return "never" if x == float("inf") else f"{x:,.0f}"


def sweep_crossings(results, level=SATURATED):
    """Per resource, the load at which its utilisation first reaches `level` in a sweep (sorted
    by load), interpolated linearly between the two swept loads around the crossing."""
    results = sorted(results, key=lambda r: r["sessions"])
    out = {}
    for name in results[0]["resources"]:
        out[name] = float("inf")
        prev = None
        for r in results:
            u = r["resources"][name]["util"]
            if u >= level:
                if prev is None:
                    out[name] = r["sessions"]
                else:
                    n0, u0 = prev
                    out[name] = n0 + (level - u0) / (u - u0) * (r["sessions"] - n0)
                break
            prev = (r["sessions"], u)
    return out


def print_table(results):
    names = list(results[0]["resources"].keys())
    head = f"{'sessions':>9} {'turns/s':>9} {'writes/s':>10} " + " ".join(f"{n[:14]:>22}" for n in names)
    print(head)
    print(f"{'':>9} {'':>9} {'':>10} " + " ".join(f"{'util / delay ms':>22}" for _ in names))
    for r in results:
        cells = []
        for n in names:
            x = r["resources"][n]
            d = x["delay_ms"]
            cells.append(f"{x['util'] * 100:7.1f}% / {('inf' if d == float('inf') else f'{d:.1f}'):>10}")
        print(f"{r['sessions']:>9,} {r['turns_per_s']:>9,.0f} {r['store_writes_per_s']:>10,.0f} " +
              " ".join(f"{c:>22}" for c in cells))


def self_test():
    """Properties of the model on small clusters (the ctest harness_cluster_sim)."""
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    # Far from every limit at 200 and 800 sessions (hosts hold 1000 sandboxes each).
    small = {"sessions": 200, "hosts": 4, "shards": 2, "harnesses": 2, "replicas": 200, "sim_s": 40, "warmup_s": 5}
    r1 = simulate(small)
    # Conservation: every write submitted (appends and lease renewals) is committed or still
    # pending; every session that completed ran exactly `turns` turns, counted one by one.
    sim = Sim(make_params(small))
    r = sim.run()
    total_in = r["writes_submitted"] + r["renewals_injected"]
    total_out = r["writes_committed"] + r["writes_pending"]
    check(abs(total_in - total_out) <= 1e-6 * total_in,
          f"writes conserved: submitted {r['writes_submitted']:.0f} + renewals {r['renewals_injected']:.0f} = "
          f"committed {r['writes_committed']:.0f} + pending {r['writes_pending']:.1f}")
    done = sim.completed_turn_counts
    check(len(done) > 200, f"sessions completed and were replaced ({len(done)}, more than the population)")
    check(all(turn == sim.p["turns"] - 1 and n == sim.p["turns"] for turn, n in done),
          f"every completed session ran exactly {sim.p['turns']} turns and ended on its last")
    check(sim.sessions_started == 200 + len(done),
          f"the population is kept: {sim.sessions_started} started = 200 + {len(done)} replacements")
    # Events per completed session, by kind: per turn 2 model events; per tool turn 2 tool events.
    ev = r["events_by_kind"]
    check(ev.get("model_request", 0) >= ev.get("model_response", 0) >= ev.get("model_request", 0) - 200,
          "each model_request has its model_response (at most one in flight per session)")
    check(ev.get("tool_call", 0) >= ev.get("tool_result", 0) >= ev.get("tool_call", 0) - 200,
          "each tool_call has its tool_result (at most one in flight per session)")
    # Utilisation rises with load.
    r4 = simulate(dict(small, sessions=800))
    for name in ("store_shard", "etcd", "harness_cpu", "model_replicas", "sandbox_hosts"):
        a, b = r1["resources"][name]["util"], r4["resources"][name]["util"]
        check(b > a, f"{name} utilisation rises with load: {a:.4f} at 200 sessions < {b:.4f} at 800")
    check(r4["turns_per_s"] > r1["turns_per_s"], "throughput rises with load below saturation")
    e4 = r4["resources"]["etcd"]
    check(e4["util"] <= e4["ceiling_util"] and r4["saturates_at_sessions"]["etcd"] == float("inf"),
          f"etcd stays under its ceiling of a put per host and poll ({e4['util']:.4f} <= {e4['ceiling_util']:.4f}), "
          "so more sessions never saturate it")
    # Past the model's saturation, throughput stops at its capacity and the queue grows: one
    # replica of 100 tokens/s serves a call in ~1.5 s; one session keeps it ~45% busy, 20 cannot
    # get more than 1/1.5 calls a second out of it.
    one = dict(small, gen_tps=100.0, replicas=1, sim_s=400, warmup_s=20)
    svc = model_service_s(make_params(one))
    a = simulate(dict(one, sessions=1))
    b = simulate(dict(one, sessions=20))
    ua, ub = a["resources"]["model_replicas"]["util"], b["resources"]["model_replicas"]["util"]
    check(ua < 0.7 and ub > 0.95, f"one slow replica: util {ua:.2f} with 1 session, {ub:.3f} with 20")
    check(b["turns_per_s"] < 3 * a["turns_per_s"] and b["turns_per_s"] <= 1.15 / svc,
          f"turns/s flat: {a['turns_per_s']:.3f} with 1 session, {b['turns_per_s']:.3f} with 20 (capacity {1 / svc:.3f}; "
          "service times are random, hence the 15%)")
    da, db = a["resources"]["model_replicas"]["delay_ms"], b["resources"]["model_replicas"]["delay_ms"]
    check(db > 10 * max(da, 1.0), f"the model queue grows past saturation: wait {da:.0f} ms -> {db:.0f} ms")

    # Hand-computed cases: the resource with the highest demand / capacity is named first.
    def hand(p):
        """Closed-form utilisations (no queueing): turn time, then demand / capacity."""
        q = make_params(p)
        svc = q["out_tokens"] / q["gen_tps"] + q["new_prompt_tokens"] / q["prefill_tps"]
        turn = svc + (q["tool_s"] * (q["turns"] - 1) + q["provision_s"]) / q["turns"]
        turns_s = q["sessions"] / turn
        writes_per_turn = 2 + 2 * (q["turns"] - 1) / q["turns"] + 5 / q["turns"]  # + created, lease, provisioned, released, status
        renew = q["sessions"] / (q["lease_ttl_ms"] / 3000)
        store = (turns_s * writes_per_turn + renew) / q["shards"] * q["store_cpu_us_per_write"] / 1e6 / q["store_cores"]
        model = turns_s * svc / q["replicas"]
        harness = turns_s * writes_per_turn / q["harnesses"] * q["harness_cpu_us_per_event"] / 1e6 / q["harness_cores"]
        # A host puts when its occupancy changed within a poll: each session provisions once
        # and releases once (Poisson changes at rate lam per host).
        lam = 2 * turns_s / q["turns"] / q["hosts"]
        poll = q["poll_ms"] / 1000
        puts = q["hosts"] / poll * (1 - math.exp(-lam * poll))
        etcd = puts * (q["etcd_cpu_us_per_put"] + q["harnesses"] * q["etcd_cpu_us_per_delivery"]) / 1e6 / q["etcd_cores"]
        return {"store_shard": store, "model_replicas": model, "harness_cpu": harness, "etcd": etcd}

    cases = {
        "store_shard": dict(small, shards=1, store_cores=1, store_cpu_us_per_write=3000.0),
        "model_replicas": dict(small, replicas=1, gen_tps=30.0),
        "harness_cpu": dict(small, harnesses=1, harness_cores=1, harness_cpu_us_per_event=4000.0),
        "etcd": dict(small, harnesses=50, etcd_cores=1, etcd_cpu_us_per_delivery=2000.0),
    }
    for want, case in cases.items():
        h = hand(case)
        top = max(h, key=h.get)
        got = simulate(case)
        check(top == want and got["first_to_saturate"] == want,
              f"hand-computed case: {want} has the highest demand/capacity ({h[want]:.2f}; by hand the top is "
              f"{top}) and the simulation names {got['first_to_saturate']} first")
        u = got["resources"][want]["util"]
        check(0.75 * h[want] <= u <= 1.25 * h[want] or (h[want] > 1 and u > 0.95),
              f"  its utilisation {u:.3f} agrees with the hand figure {h[want]:.3f} (within 25%, or both saturated)")
    # The measured defaults are those of the committed measurement.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_sim_measured.json")
    with open(path) as f:
        measured = params_from_measurement(json.load(f))
    off = {k: (v, PARAMS[k][0]) for k, v in measured.items() if abs(v - PARAMS[k][0]) > 0.01 * PARAMS[k][0]}
    check(len(measured) == 5 and not off, f"defaults match cluster_sim_measured.json ({len(measured)} parameters; off: {off})")
    # The sweep's crossing point, by hand: 50% at 100 sessions, 150% at 200 -> 90% at 140.
    synthetic = [{"sessions": 200, "resources": {"a": {"util": 1.5}, "b": {"util": 0.2}}},
                 {"sessions": 100, "resources": {"a": {"util": 0.5}, "b": {"util": 0.1}}}]
    c = sweep_crossings(synthetic)
    check(abs(c["a"] - 140) < 1e-9 and c["b"] == float("inf"), f"sweep crossing interpolated: {c}")
    # Bad input names the field.
    for bad, field in (({"shards": 0}, "shards"), ({"gen_tps": -1}, "gen_tps"), ({"turns": 1.5}, "turns"),
                       ({"bogus": 1}, "bogus"), ({"warmup_s": 50, "sim_s": 40}, "warmup_s")):
        try:
            make_params(bad)
            check(False, f"{bad} refused")
        except ParamError as e:
            check(field in str(e), f"{bad} refused naming '{field}': {e}")
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int)
    ap.add_argument("--hosts", type=int)
    ap.add_argument("--shards", type=int)
    ap.add_argument("--harnesses", type=int)
    ap.add_argument("--replicas", type=int, help="0: as needed for --sessions")
    ap.add_argument("--sweep", help="comma-separated session counts (the replicas stay those of --sessions)")
    ap.add_argument("--params", help="JSON from cluster_sim_measure.py")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="any parameter (--list-params)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--list-params", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.list_params:
        for k, (v, unit, src) in PARAMS.items():
            print(f"{k:32} {v!s:>10} {unit:28} {src}")
        return 0
    overrides = {}
    try:
        if args.params:
            try:
                with open(args.params) as f:
                    measured = params_from_measurement(json.load(f))
                if not measured:
                    raise ValueError("it holds none of bench_store, harness, etcd")
                overrides.update(measured)
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise ParamError(f"--params {args.params}: not a cluster_sim_measure.py result ({e!r})")
        for item in args.set:
            if "=" not in item:
                raise ParamError(f"--set '{item}': expected NAME=VALUE")
            k, v = item.split("=", 1)
            overrides[k] = v
        for k in ("sessions", "hosts", "shards", "harnesses", "replicas"):
            if getattr(args, k) is not None:
                overrides[k] = getattr(args, k)
        p = make_params(overrides)
        if p["replicas"] == 0:
            overrides["replicas"] = auto_replicas(p)
        loads = [p["sessions"]]
        if args.sweep:
            try:
                loads = [int(x) for x in args.sweep.split(",")]
            except ValueError:
                raise ParamError(f"--sweep must be comma-separated integers (got {args.sweep!r})")
        results = [simulate(dict(overrides, sessions=n)) for n in loads]
    except ParamError as e:
        print(f"cluster_sim: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return 0
    print_table(results)
    last = results[-1]
    print()
    for name, r in last["resources"].items():
        print(f"  {name:15} {r['what']}")
    if len(results) > 1:
        cross = sweep_crossings(results)
        order = sorted(cross.items(), key=lambda kv: kv[1])
        print(f"\nin the sweep, each resource reaches {SATURATED:.0%} at (linear interpolation between swept loads; "
              "'> max' when it never did): " + ", ".join(
                  f"{n} {('> ' + format(results[-1]['sessions'], ',')) if x == float('inf') else format(round(x), ',')}"
                  for n, x in order))
    for r in results:
        order = sorted(r["saturates_at_sessions"].items(), key=lambda kv: kv[1])
        print(f"\nat {r['sessions']:,} sessions ({r['replicas']} replicas): first to saturate: {r['first_to_saturate']}; "
              f"by linear extrapolation each reaches {SATURATED:.0%} at (lease_renewal: at most; etcd: never "
              "when even a put per host and poll stays below): " +
              ", ".join(f"{n} {fmt_sat(x)}" for n, x in order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
