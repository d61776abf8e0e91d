#include "store_replicated.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#ifdef SINEW_BENCH_ETCD
#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/session_store/shard_map.h"
#endif

namespace sinew::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_store: %s\n", what.c_str());
  std::exit(1);
}

// A sinew-store process and the address it listens on.
struct Store {
  std::unique_ptr<testing::Subprocess> proc;
  std::string address;
};

Store StartStore(std::vector<std::string> args) {
  args.insert(args.begin(), testing::BinaryPath("sinew-store"));
  Store s;
  s.proc = std::make_unique<testing::Subprocess>(args);
  auto line = s.proc->WaitForLine("listening on", seconds(20));
  if (!line) Die("sinew-store did not start: " + args[2]);
  s.address = line->substr(line->rfind(' ') + 1);
  return s;
}

// One setup under test: the store the client writes to, and its follower if any.
struct Setup {
  const char* name;
  Store primary;
  std::unique_ptr<testing::Subprocess> follower;
  std::unique_ptr<store::SessionStore> client;
};

void StartSetup(Setup* s, const std::string& dir, const char* replication) {
  std::vector<std::string> args = {"--db", dir + "/primary", "--listen", "127.0.0.1:0", "--durability", "sync"};
  if (replication != nullptr) {
    args.push_back("--replication");
    args.push_back(replication);
  }
  s->primary = StartStore(args);
  if (replication != nullptr) {
    s->follower = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", dir + "/follower", "--follow", s->primary.address,
        "--follower-name", "bench-follower"});
    if (!s->follower->WaitForLine("following", seconds(20))) Die("the follower did not start");
    if (!s->primary.proc->WaitForLine("streams from sequence", seconds(20))) Die("the follower did not connect");
  }
  auto client = store::ConnectSessionStore(s->primary.address);
  if (!client.ok()) Die("connect: " + client.status().ToString());
  s->client = std::move(*client);
}

struct Figures {
  double per_second = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

// `writers` threads, one session each, appending one 120-byte event at a time.
Figures TimedAppends(store::SessionStore& store, int writers, double run_seconds) {
  std::vector<std::string> ids;
  for (int w = 0; w < writers; ++w) {
    v1::CreateSessionRequest req;
    req.set_tenant("bench");
    auto created = store.CreateSession(req);
    if (!created.ok()) Die("create: " + created.status().ToString());
    ids.push_back(created->id());
  }
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(writers));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      v1::AppendRequest req;
      req.set_session_id(ids[static_cast<size_t>(w)]);
      req.add_events()->mutable_user_message()->set_text(std::string(120, 'p'));
      uint64_t next = 2;
      auto& mine = latencies[static_cast<size_t>(w)];
      while (!stop.load(std::memory_order_relaxed)) {
        req.set_expected_next_seq(next++);
        const auto t0 = Clock::now();
        auto r = store.Append(req);
        if (!r.ok()) Die("append: " + r.status().ToString());
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(run_seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  Figures f;
  f.per_second = static_cast<double>(all.size()) / elapsed;
  f.p50_ms = Percentile(all, 0.50);
  f.p99_ms = Percentile(all, 0.99);
  return f;
}

}  // namespace

void ReplicatedAppends(const std::string& dir, const std::vector<int>& writer_counts, double run_seconds) {
  Setup setups[3] = {{"unreplicated sync", {}, nullptr, nullptr},
                     {"replicated sync", {}, nullptr, nullptr},
                     {"replicated async", {}, nullptr, nullptr}};
  StartSetup(&setups[0], dir + "/unreplicated", nullptr);
  StartSetup(&setups[1], dir + "/sync", "sync");
  StartSetup(&setups[2], dir + "/async", "async");
  std::printf(
      "\nappends through sinew-store on loopback gRPC (--durability sync; replicated: a primary and one "
      "--follow follower; one client, one session per writer)\n");
  std::printf("%8s  %-18s %10s %9s %9s %10s\n", "writers", "mode", "app/s", "p50 ms", "p99 ms", "vs unrepl");
  double sync_ratio_at_max = 0;
  for (int w : writer_counts) {
    double base = 0;
    for (auto& s : setups) {
      Figures f = TimedAppends(*s.client, w, run_seconds);
      if (&s == &setups[0]) base = f.per_second;
      const double ratio = base > 0 ? f.per_second / base : 0;
      if (&s == &setups[1] && w == writer_counts.back()) sync_ratio_at_max = ratio;
      std::printf("%8d  %-18s %10.0f %9.2f %9.2f %9.2fx\n", w, s.name, f.per_second, f.p50_ms, f.p99_ms, ratio);
      std::fflush(stdout);
    }
  }
  std::printf("target: replicated sync >= 0.8x unreplicated sync at %d writers: %.2fx\n", writer_counts.back(),
              sync_ratio_at_max);
}

#ifdef SINEW_BENCH_ETCD
namespace {

// The shard's primary key: (address, term); ("", 0) when none.
std::pair<std::string, int64_t> PrimaryOf(coord::EtcdClient* etcd, const std::string& key) {
  auto listing = etcd->GetPrefix(key);
  if (!listing.ok()) return {"", 0};
  for (const auto& kv : listing->kvs) {
    if (kv.key == key) return {kv.value, kv.create_revision};
  }
  return {"", 0};
}

int64_t FileNumber(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  return (in >> n) ? n : 0;
}

}  // namespace

void Failovers(const std::string& dir, int count, int lease_seconds) {
  if (coord::test::EtcdBinary().empty()) {
    std::printf("\nfailover: skipped, etcd is not installed (apt-get install etcd-server)\n");
    return;
  }
  coord::test::EtcdProcess etcd_process;
  if (etcd_process.endpoint().empty()) Die("etcd did not start");
  const std::string endpoint = etcd_process.endpoint();
  auto etcd = coord::EtcdClient::Connect(endpoint);
  if (!etcd.ok()) Die(etcd.status().ToString());
  const std::string key = "/sinew/store-primaries/bench";
  std::map<std::string, std::unique_ptr<testing::Subprocess>> members;
  int made = 0;
  auto add_member = [&] {
    const std::string db = dir + "/m" + std::to_string(made++);
    members[db] = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0", "--etcd", endpoint, "--shard-id",
        "bench", "--replication", "sync", "--primary-lease-seconds", std::to_string(lease_seconds),
        "--shard-grace-ms", "0"});
    return members[db].get();
  };
  if (!add_member()->WaitForLine("primary at term", seconds(20))) Die("the first member did not lead");
  if (!add_member()->WaitForLine("following the primary", seconds(20))) Die("the second member did not follow");
  store::RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = store::ConnectShardedSessionStore(endpoint, lazy);
  if (!client.ok()) Die(client.status().ToString());
  v1::CreateSessionRequest create;
  create.set_tenant("bench");
  auto session = (*client)->CreateSession(create);
  if (!session.ok()) Die(session.status().ToString());
  uint64_t next = 2;
  std::vector<double> to_elected, to_ack;
  for (int i = 0; i < count; ++i) {
    const auto [leader, term] = PrimaryOf(etcd->get(), key);
    std::string leader_db, follower_db;
    for (const auto& [db, proc] : members) (FileNumber(db + "/PRIMARY") == term ? leader_db : follower_db) = db;
    if (leader.empty() || leader_db.empty() || follower_db.empty()) Die("no primary and follower to fail over");
    for (int k = 0; k < 800 && FileNumber(follower_db + "/TERM") != term; ++k) std::this_thread::sleep_for(milliseconds(25));
    if (FileNumber(follower_db + "/TERM") != term) Die("the follower did not catch up");
    members[leader_db]->Signal(SIGKILL);
    const auto killed = Clock::now();
    members[leader_db]->Wait();
    members.erase(leader_db);
    std::filesystem::remove_all(leader_db);
    add_member();  // the lost machine's replacement, with an empty disk
    bool elected = false;
    const std::string idempotency = "failover-" + std::to_string(i);
    while (true) {
      if (!elected && PrimaryOf(etcd->get(), key).second > term) {
        elected = true;
        to_elected.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
      }
      v1::AppendRequest req;
      req.set_session_id(session->id());
      req.set_expected_next_seq(next);
      req.set_idempotency_key(idempotency);
      req.add_events()->mutable_user_message()->set_text("after failover " + std::to_string(i));
      auto r = (*client)->Append(req);
      if (r.ok()) break;
      if (r.status().code() != StatusCode::kUnavailable) Die("append: " + r.status().ToString());
      if (std::chrono::duration<double>(Clock::now() - killed).count() > 120) Die("no primary within 120 s");
      std::this_thread::sleep_for(milliseconds(20));
    }
    to_ack.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
    if (!elected) to_elected.push_back(to_ack.back());
    ++next;
  }
  std::printf(
      "\nfailover of a sync shard through etcd (primary lease %d s; the primary SIGKILLed and its disk lost, a new "
      "member with an empty one started at once), %d failovers:\n",
      lease_seconds, count);
  std::printf("  kill -> new primary in etcd:           p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms\n",
              Percentile(to_elected, 0.5), Percentile(to_elected, 0.99),
              *std::max_element(to_elected.begin(), to_elected.end()));
  std::printf("  kill -> client's append acknowledged:  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms\n",
              Percentile(to_ack, 0.5), Percentile(to_ack, 0.99), *std::max_element(to_ack.begin(), to_ack.end()));
}
#else
void Failovers(const std::string&, int, int) {
  std::printf("\nfailover: skipped, built without the etcd test support (SINEW_BUILD_TESTS=OFF)\n");
}
#endif

}  // namespace sinew::bench
