// bench_store: the session store against raw RocksDB, side by side, in one process.
//   1. Appends/s with 1, 8 and 64 concurrent writers (one session each), sync and async,
//      against raw RocksDB Puts of the same keys and value sizes with the same WriteOptions.
//   2. Reading back a 10,000-event session through GetEvents against a raw iteration over
//      the same keys in the same directory.
// Prints a table and the ratios store/raw (appends: higher is better; reads: lower).
#include <rocksdb/db.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "keys.h"
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

void ReadBack(const std::string& dir, int events, int reps) {
  std::string id;
  std::vector<double> store_ms, raw_ms, parse_ms;
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
  auto store = sinew::store::OpenSessionStore(dir, {});
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    sinew::v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_limit(static_cast<uint32_t>(events));
    auto got = (*store)->GetEvents(req);
    if (!got.ok() || got->events_size() != events) std::exit(1);
    store_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  store->reset();
  // Raw: the same directory and keys, read with a plain iterator, values copied out.
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : sinew::store::keys::kColumnFamilies) {
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(rocksdb::DBOptions(), dir, cfs, &handles, &raw).ok()) std::exit(1);
  std::string raw_id = *sinew::store::keys::ParseSessionId(id);
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::vector<std::string> values;
    values.reserve(static_cast<size_t>(events));
    std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions(), handles[1]));
    for (it->Seek(raw_id); it->Valid() && it->key().starts_with(raw_id); it->Next()) {
      values.emplace_back(it->value().ToString());
    }
    if (values.size() != static_cast<size_t>(events)) std::exit(1);
    raw_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    // Where the difference goes: decoding the same bytes into typed events.
    auto t1 = Clock::now();
    google::protobuf::RepeatedPtrField<sinew::v1::Event> decoded;
    decoded.Reserve(events);
    for (const auto& v : values) {
      if (!decoded.Add()->ParseFromString(v)) std::exit(1);
    }
    parse_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
  }
  for (auto* h : handles) raw->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  delete raw;
  double s = MedianMs(store_ms), w = MedianMs(raw_ms), p = MedianMs(parse_ms);
  std::printf("\nread back %d events (median of %d): store %.2f ms, raw iteration %.2f ms, "
              "ratio store/raw %.2f (target <= 1.5)\n",
              events, reps, s, w, s / w);
  std::printf("  of which protobuf decoding of the same bytes alone takes %.2f ms; "
              "store / (raw iteration + decoding) = %.2f\n", p, s / (w + p));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_store: session store vs raw RocksDB"};
  double seconds = 2.0;
  std::vector<int> writer_counts = {1, 8, 64};
  int read_events = 10000, reps = 15;
  app.add_option("--seconds", seconds, "duration of each append run")->capture_default_str();
  app.add_option("--writers", writer_counts, "concurrent writer counts")->capture_default_str();
  app.add_option("--read-events", read_events, "events in the read-back session");
  CLI11_PARSE(app, argc, argv);

  std::printf("%-6s %8s %14s %14s %8s\n", "mode", "writers", "store app/s", "raw put/s", "ratio");
  sinew::testing::TempDir dir("sinew-bench");
  int run = 0;
  for (Durability d : {Durability::kSync, Durability::kAsync}) {
    for (int w : writer_counts) {
      double store = StoreAppends(dir.Sub("s" + std::to_string(run)), d, w, seconds);
      double raw = RawPuts(dir.Sub("r" + std::to_string(run)), d, w, seconds);
      ++run;
      std::printf("%-6s %8d %14.0f %14.0f %8.2f\n", d == Durability::kSync ? "sync" : "async", w,
                  store, raw, store / raw);
      std::fflush(stdout);
    }
  }
  ReadBack(dir.Sub("read"), read_events, reps);
  return 0;
}
