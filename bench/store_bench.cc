// bench_store: the session store against raw RocksDB, side by side, in one process.
//   1. Appends/s with 1, 8 and 64 concurrent writers (one session each), sync and async,
//      against raw RocksDB Puts of the same keys and value sizes with the same WriteOptions.
//   2. Reading back a 10,000-event session (GetEvents; ReadEventBytes; the harness's wake
//      read before and after it moved to ReadEventBytes), in process and through a
//      sinew-store process on loopback, against a raw iteration over the same keys in the
//      same directory, timed in the same repetitions.
//   3. Appends through sinew-store processes on loopback at the same writer counts:
//      unreplicated sync against a replicated shard (a primary and a follower) in sync and
//      in async mode, with p50/p99 latency; and the failover time of a replicated shard
//      elected through etcd (store_replicated.h).
// Prints tables and the ratios store/raw (appends: higher is better; reads: lower).
#include <rocksdb/db.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "keys.h"
#include "store_replicated.h"
#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"

namespace {

using Clock = std::chrono::steady_clock;
using sinew::store::Durability;

std::string Payload() { return std::string(120, 'p'); }

double StoreAppends(const std::string& dir, Durability durability, int writers, double seconds) {
  sinew::store::StoreOptions options;
  options.durability = durability;
  auto store = sinew::store::OpenSessionStore(dir, options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<std::string> ids;
  for (int w = 0; w < writers; ++w) {
    sinew::v1::CreateSessionRequest req;
    req.set_tenant("bench");
    ids.push_back((*store)->CreateSession(req)->id());
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      sinew::v1::AppendRequest req;
      req.set_session_id(ids[static_cast<size_t>(w)]);
      req.add_events()->mutable_user_message()->set_text(Payload());
      uint64_t next = 2, n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        req.set_expected_next_seq(next);
        auto r = (*store)->Append(req);
        if (!r.ok()) {
          std::fprintf(stderr, "append: %s\n", r.status().ToString().c_str());
          std::exit(1);
        }
        ++next;
        ++n;
      }
      total += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(total.load()) /
         std::chrono::duration<double>(Clock::now() - start).count();
}

double RawPuts(const std::string& dir, Durability durability, int writers, double seconds) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_background_jobs = 2;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, dir, &raw).ok()) std::exit(1);
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions wo;
  wo.sync = durability == Durability::kSync;
  // The same bytes the store writes for one event.
  sinew::v1::Event ev;
  ev.set_session_id(std::string(32, 'a'));
  ev.set_seq(12345);
  ev.set_timestamp_unix_ms(1700000000000);
  ev.set_type("user_message");
  ev.mutable_user_message()->set_text(Payload());
  const std::string value = ev.SerializeAsString();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&] {
      auto id = *sinew::store::keys::ParseSessionId(sinew::store::keys::NewSessionId());
      uint64_t seq = 1, n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (!db->Put(wo, sinew::store::keys::EventKey(id, seq++), value).ok()) std::exit(1);
        ++n;
      }
      total += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(total.load()) /
         std::chrono::duration<double>(Clock::now() - start).count();
}

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Reads of a whole session, each timed once per repetition; vectors of milliseconds.
struct ReadTimes {
  std::vector<double> raw, raw_decode, get_events, bytes, wake_before, wake_after;
};

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

[[noreturn]] void Fail(const char* what, const sinew::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

// The raw reference: a plain iterator over the session's keys, values copied out (and
// then decoded, to show what decoding alone costs).
void TimeRaw(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* events_cf, const std::string& raw_id,
             size_t events, ReadTimes* t) {
  auto t0 = Clock::now();
  std::vector<std::string> values;
  values.reserve(events);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), events_cf));
  for (it->Seek(raw_id); it->Valid() && it->key().starts_with(raw_id); it->Next()) {
    values.emplace_back(it->value().ToString());
  }
  if (values.size() != events) std::exit(1);
  t->raw.push_back(MsSince(t0));
  auto t1 = Clock::now();
  google::protobuf::RepeatedPtrField<sinew::v1::Event> decoded;
  decoded.Reserve(static_cast<int>(events));
  for (const auto& v : values) {
    if (!decoded.Add()->ParseFromString(v)) std::exit(1);
  }
  t->raw_decode.push_back(t->raw.back() + MsSince(t1));
}

// The store's paths: one GetEvents call; ReadEventBytes pages; and the harness's wake read
// (SessionDriver::LoadLog) before (GetEvents pages of 1000 moved into a vector) and after
// (ReadEventBytes pages, each event decoded once into the vector).
void TimeStore(sinew::store::SessionStore& store, const std::string& id, size_t events,
               uint64_t page_bytes, ReadTimes* t) {
  auto t0 = Clock::now();
  {
    sinew::v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_limit(static_cast<uint32_t>(events));
    auto got = store.GetEvents(req);
    if (!got.ok()) Fail("GetEvents", got.status());
    if (static_cast<size_t>(got->events_size()) != events) std::exit(1);
    t->get_events.push_back(MsSince(t0));
  }
  t0 = Clock::now();
  {
    std::vector<sinew::v1::ReadEventBytesResponse> pages;
    uint64_t from = 1, got = 0;
    while (got < events) {
      sinew::v1::ReadEventBytesRequest req;
      req.set_session_id(id);
      req.set_from_seq(from);
      req.set_max_bytes(page_bytes);
      auto page = store.ReadEventBytes(req);
      if (!page.ok()) Fail("ReadEventBytes", page.status());
      if (page->events_size() == 0) std::exit(1);
      got += static_cast<uint64_t>(page->events_size());
      from = page->first_seq() + static_cast<uint64_t>(page->events_size());
      pages.push_back(std::move(page).value());
    }
    t->bytes.push_back(MsSince(t0));
  }
  t0 = Clock::now();
  {
    std::vector<sinew::v1::Event> log;
    while (log.size() < events) {
      sinew::v1::GetEventsRequest req;
      req.set_session_id(id);
      req.set_from_seq(log.size() + 1);
      req.set_limit(1000);
      auto page = store.GetEvents(req);
      if (!page.ok()) Fail("GetEvents", page.status());
      for (auto& ev : *page->mutable_events()) log.push_back(std::move(ev));
    }
    t->wake_before.push_back(MsSince(t0));
  }
  t0 = Clock::now();
  {
    std::vector<sinew::v1::Event> log;
    while (log.size() < events) {
      sinew::v1::ReadEventBytesRequest req;
      req.set_session_id(id);
      req.set_from_seq(log.size() + 1);
      req.set_max_bytes(page_bytes);
      auto page = store.ReadEventBytes(req);
      if (!page.ok()) Fail("ReadEventBytes", page.status());
      log.reserve(page->next_seq() - 1);
      for (int i = 0; i < page->events_size(); ++i) {
        sinew::Status s = sinew::store::DecodeEvent(
            page->events(i), page->first_seq() + static_cast<uint64_t>(i), &log.emplace_back());
        if (!s.ok()) Fail("DecodeEvent", s);
      }
    }
    t->wake_after.push_back(MsSince(t0));
  }
}

void PrintReadTable(const char* where, const ReadTimes& t) {
  const double raw = MedianMs(t.raw);
  const double raw_min = *std::min_element(t.raw.begin(), t.raw.end());
  auto row = [&](const char* name, const std::vector<double>& v) {
    const double fastest = *std::min_element(v.begin(), v.end());
    std::printf("  %-50s %8.2f ms %6.2fx %8.2f ms %6.2fx\n", name, MedianMs(v), MedianMs(v) / raw,
                fastest, fastest / raw_min);
  };
  std::printf("%s\n  %-50s %11s %7s %11s %7s\n", where, "", "median", "ratio", "fastest", "ratio");
  row("raw RocksDB iteration, values copied (reference)", t.raw);
  row("raw iteration + protobuf decode of each value", t.raw_decode);
  row("GetEvents, one call (decoded events)", t.get_events);
  row("ReadEventBytes (stored bytes)", t.bytes);
  row("wake read before: GetEvents pages of 1000", t.wake_before);
  row("wake read after: ReadEventBytes + DecodeEvent", t.wake_after);
  std::fflush(stdout);
}

void ReadBack(const std::string& dir, int events, int reps, bool remote, uint64_t page_bytes) {
  std::string id;
  {
    sinew::store::StoreOptions options;
    options.durability = Durability::kAsync;
    auto store = sinew::store::OpenSessionStore(dir, options);
    sinew::v1::CreateSessionRequest create;
    create.set_tenant("bench");
    id = (*store)->CreateSession(create)->id();
    for (int i = 0; i < events - 1; i += 100) {
      sinew::v1::AppendRequest req;
      req.set_session_id(id);
      req.set_expected_next_seq(static_cast<uint64_t>(i) + 2);
      for (int k = 0; k < 100 && i + k < events - 1; ++k) {
        req.add_events()->mutable_user_message()->set_text(Payload());
      }
      if (!(*store)->Append(req).ok()) std::exit(1);
    }
  }
  const size_t n = static_cast<size_t>(events);
  auto store = sinew::store::OpenSessionStore(dir, {});
  if (!store.ok()) Fail("open", store.status());
  // Raw: the same directory and keys through a read-only instance open alongside the
  // store, so that each repetition times both under the same machine load.
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : sinew::store::keys::kColumnFamilies) {
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, cfs, &handles, &raw).ok()) {
    std::exit(1);
  }
  const std::string raw_id = *sinew::store::keys::ParseSessionId(id);
  std::printf(
      "\nread back %d events (median of %d; every repetition times each path and the "
      "raw iteration)\n",
      events, reps);
  ReadTimes local;
  for (int r = 0; r < reps; ++r) {
    TimeRaw(raw, handles[1], raw_id, n, &local);
    TimeStore(**store, id, n, page_bytes, &local);
  }
  PrintReadTable("in process (OpenSessionStore)", local);
  store->reset();  // releases the directory for the server
  if (remote) {
    const std::string bin = sinew::testing::BinaryPath("sinew-store");
    if (access(bin.c_str(), X_OK) != 0) {
      std::printf("through sinew-store: skipped, %s is not built\n", bin.c_str());
    } else {
      sinew::testing::Subprocess server({bin, "--db", dir, "--listen", "127.0.0.1:0"});
      auto line = server.WaitForLine("listening on", std::chrono::seconds(20));
      if (!line) {
        std::fprintf(stderr, "sinew-store did not start\n");
        std::exit(1);
      }
      auto client = sinew::store::ConnectSessionStore(line->substr(line->rfind(' ') + 1));
      if (!client.ok()) Fail("connect", client.status());
      ReadTimes over_grpc;
      for (int r = 0; r < reps; ++r) {
        TimeRaw(raw, handles[1], raw_id, n, &over_grpc);
        TimeStore(**client, id, n, page_bytes, &over_grpc);
      }
      PrintReadTable("through sinew-store on loopback gRPC (ConnectSessionStore)", over_grpc);
    }
  }
  for (auto* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete raw;
  std::printf("target: ReadEventBytes in process <= 1.5x raw: %.2fx\n",
              MedianMs(local.bytes) / MedianMs(local.raw));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_store: session store vs raw RocksDB"};
  double seconds = 2.0;
  std::vector<int> writer_counts = {1, 8, 64};
  int read_events = 10000, reps = 15;
  app.add_option("--seconds", seconds, "duration of each append run")->capture_default_str();
  app.add_option("--writers", writer_counts, "concurrent writer counts")->capture_default_str();
  bool appends = true, remote = true;
  uint64_t page_bytes = 0;
  app.add_option("--read-events", read_events, "events in the read-back session");
  app.add_option("--reps", reps, "repetitions of each read")->capture_default_str();
  app.add_option("--page-bytes", page_bytes, "ReadEventBytes max_bytes (0: the store's default)");
  app.add_flag("!--no-appends", appends, "skip the append runs");
  app.add_flag("!--no-remote", remote, "skip the reads through a sinew-store process");
  bool replicated = true;
  int failovers = 20, failover_lease_seconds = 2;
  app.add_flag("!--no-replicated", replicated, "skip the appends through sinew-store processes, replicated or not");
  app.add_option("--failovers", failovers, "failovers to time (0: none)")->capture_default_str();
  std::string follower_root;
  app.add_option("--follower-root", follower_root,
                 "put the replicated appends' followers' directories here (another disk, or a tmpfs to see what "
                 "sharing one disk with the primary costs)");
  app.add_option("--failover-lease-seconds", failover_lease_seconds, "the primary's etcd lease in the failovers")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  sinew::testing::TempDir dir("sinew-bench");
  int run = 0;
  if (appends) {
    std::printf("%-6s %8s %14s %14s %8s\n", "mode", "writers", "store app/s", "raw put/s", "ratio");
  }
  for (Durability d : {Durability::kSync, Durability::kAsync}) {
    for (int w : appends ? writer_counts : std::vector<int>{}) {
      double store = StoreAppends(dir.Sub("s" + std::to_string(run)), d, w, seconds);
      double raw = RawPuts(dir.Sub("r" + std::to_string(run)), d, w, seconds);
      ++run;
      std::printf("%-6s %8d %14.0f %14.0f %8.2f\n", d == Durability::kSync ? "sync" : "async", w,
                  store, raw, store / raw);
      std::fflush(stdout);
    }
  }
  if (appends && replicated) sinew::bench::ReplicatedAppends(dir.Sub("replicated"), writer_counts, seconds, follower_root);
  if (failovers > 0) sinew::bench::Failovers(dir.Sub("failover"), failovers, failover_lease_seconds);
  ReadBack(dir.Sub("read"), read_events, reps, remote, page_bytes);
  return 0;
}
