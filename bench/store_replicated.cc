#include "store_replicated.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "sinew/proto/store_replication.grpc.pb.h"
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
  std::vector<std::string> args;  // the primary's
  Store primary;
  std::unique_ptr<testing::Subprocess> follower;
  std::unique_ptr<store::SessionStore> client;
};

void StartSetup(Setup* s, const std::string& dir, const char* replication,
                const std::string& follower_dir) {
  std::vector<std::string> args = {"--db",        dir + "/primary", "--listen",
                                   "127.0.0.1:0", "--durability",   "sync"};
  if (replication != nullptr) {
    args.push_back("--replication");
    args.push_back(replication);
  }
  s->args = args;
  s->primary = StartStore(args);
  if (replication != nullptr) {
    s->follower = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", follower_dir, "--follow", s->primary.address,
        "--follower-name", "bench-follower"});
    if (!s->follower->WaitForLine("following", seconds(20))) Die("the follower did not start");
    if (!s->primary.proc->WaitForLine("streams from sequence", seconds(20)))
      Die("the follower did not connect");
  }
  auto client = store::ConnectSessionStore(s->primary.address);
  if (!client.ok()) Die("connect: " + client.status().ToString());
  s->client = std::move(*client);
}

// What one setup did at one writer count, over all its slices.
struct Tally {
  std::vector<double> latencies_ms;
  uint64_t appends = 0;
  double seconds = 0;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

// `writers` threads, one session each, appending one 120-byte event at a time for
// `run_seconds`; adds to `tally`.
void TimedAppends(store::SessionStore& store, int writers, double run_seconds, Tally* tally) {
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
  tally->seconds += std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& v : latencies) {
    tally->appends += v.size();
    tally->latencies_ms.insert(tally->latencies_ms.end(), v.begin(), v.end());
  }
}

// Samples a primary's replication status every 5 ms while it runs: how far its follower
// is behind (in async mode, what losing the primary at that moment would lose).
class LagSampler {
 public:
  explicit LagSampler(const std::string& primary)
      : stub_(v1::StoreReplication::NewStub(
            grpc::CreateChannel(primary, grpc::InsecureChannelCredentials()))) {}
  void Start() {
    stop_ = false;
    thread_ = std::thread([this] {
      while (!stop_) {
        grpc::ClientContext ctx;
        v1::ReplicationStatus status;
        if (stub_->GetReplicationStatus(&ctx, {}, &status).ok() && status.followers_size() > 0) {
          const uint64_t latest = status.latest_sequence(),
                         synced = status.followers(0).synced_sequence();
          lags_.push_back(static_cast<double>(latest > synced ? latest - synced : 0));
          if (first_sequence_ == 0) first_sequence_ = latest;
          last_sequence_ = latest;
        }
        std::this_thread::sleep_for(milliseconds(5));
      }
    });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Sequence numbers written between the first sample and the last.
  uint64_t sequences() const { return last_sequence_ - first_sequence_; }
  std::vector<double>& lags() { return lags_; }

 private:
  std::unique_ptr<v1::StoreReplication::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<double> lags_;
  uint64_t first_sequence_ = 0, last_sequence_ = 0;
};

// Slices per setup and writer count, run in turn so that the three setups share the
// machine's ups and downs (other work, the disk's load) alike.
constexpr int kSlices = 4;

}  // namespace

void ReplicatedAppends(const std::string& dir, const std::vector<int>& writer_counts,
                       double run_seconds, const std::string& follower_root) {
  // Declared before the setups, so removed after their processes end.
  struct RemovedAtEnd {
    std::string path;
    ~RemovedAtEnd() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  } follower_dirs{
      follower_root.empty() ? "" : follower_root + "/sinew-bench-" + std::to_string(getpid())};
  Setup setups[3] = {{"unreplicated sync", {}, {}, nullptr, nullptr},
                     {"replicated sync", {}, {}, nullptr, nullptr},
                     {"replicated async", {}, {}, nullptr, nullptr}};
  const std::string followers = follower_root.empty() ? dir : follower_dirs.path;
  StartSetup(&setups[0], dir + "/unreplicated", nullptr, "");
  StartSetup(&setups[1], dir + "/sync", "sync", followers + "/sync-follower");
  StartSetup(&setups[2], dir + "/async", "async", followers + "/async-follower");
  std::printf(
      "\nappends through sinew-store on loopback gRPC (--durability sync; replicated: a primary "
      "and one "
      "--follow follower; one client, one session per writer; %d slices of %.2f s per mode, taken "
      "in turn%s)\n",
      kSlices, run_seconds / kSlices,
      follower_root.empty() ? "" : ("; followers in " + follower_root).c_str());
  std::printf("%8s  %-18s %10s %9s %9s %10s\n", "writers", "mode", "app/s", "p50 ms", "p99 ms",
              "vs unrepl");
  double sync_ratio_at_max = 0;
  for (int w : writer_counts) {
    Tally tallies[3];
    LagSampler async_lag(setups[2].primary.address);
    for (int slice = 0; slice < kSlices; ++slice) {
      for (int i = 0; i < 3; ++i) {
        if (i == 2) async_lag.Start();
        TimedAppends(*setups[i].client, w, run_seconds / kSlices, &tallies[i]);
        if (i == 2) async_lag.Stop();
      }
    }
    const double base = static_cast<double>(tallies[0].appends) / tallies[0].seconds;
    for (int i = 0; i < 3; ++i) {
      Tally& t = tallies[i];
      const double per_second = static_cast<double>(t.appends) / t.seconds;
      const double ratio = base > 0 ? per_second / base : 0;
      if (i == 1 && w == writer_counts.back()) sync_ratio_at_max = ratio;
      std::printf("%8d  %-18s %10.0f %9.2f %9.2f %9.2fx\n", w, setups[i].name, per_second,
                  Percentile(t.latencies_ms, 0.50), Percentile(t.latencies_ms, 0.99), ratio);
    }
    auto& lags = async_lag.lags();
    if (!lags.empty()) {
      // One append here is one event plus its session's records: sequence numbers per append.
      const double per_append = std::max(1.0, static_cast<double>(async_lag.sequences()) /
                                                  static_cast<double>(tallies[2].appends));
      const double max_lag = *std::max_element(lags.begin(), lags.end());
      const double p50 = Percentile(lags, 0.5), p99 = Percentile(lags, 0.99);
      std::printf(
          "%8s  async follower's lag (%zu samples, every 5 ms), in appends: p50 %.1f, p99 %.1f, "
          "max %.1f "
          "(%.1f sequence numbers per append)\n",
          "", lags.size(), p50 / per_append, p99 / per_append, max_lag / per_append, per_append);
    }
    std::fflush(stdout);
  }
  std::printf("target: replicated sync >= 0.8x unreplicated sync at %d writers: %.2fx\n",
              writer_counts.back(), sync_ratio_at_max);

  // The unreplicated store's recovery time: SIGKILLed and started again on its directory
  // (holding every append above), until a client's write is acknowledged.
  std::vector<double> restart_ms;
  for (int i = 0; i < 5; ++i) {
    Setup& u = setups[0];
    u.client.reset();
    u.primary.proc->Signal(SIGKILL);
    u.primary.proc->Wait();
    const auto killed = Clock::now();
    u.primary = StartStore(u.args);
    auto client = store::ConnectSessionStore(u.primary.address);
    if (!client.ok()) Die("connect: " + client.status().ToString());
    v1::CreateSessionRequest req;
    req.set_tenant("bench");
    auto created = (*client)->CreateSession(req);
    if (!created.ok()) Die("create after a restart: " + created.status().ToString());
    restart_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
    u.client = std::move(*client);
  }
  std::sort(restart_ms.begin(), restart_ms.end());
  std::printf(
      "unreplicated sync store SIGKILLed and started again on its directory, kill -> write "
      "acknowledged "
      "(%zu restarts): p50 %.0f ms, max %.0f ms\n",
      restart_ms.size(), restart_ms[restart_ms.size() / 2], restart_ms.back());
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
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0", "--etcd",
        endpoint, "--shard-id", "bench", "--replication", "sync", "--primary-lease-seconds",
        std::to_string(lease_seconds), "--shard-grace-ms", "0"});
    return members[db].get();
  };
  if (!add_member()->WaitForLine("primary at term", seconds(20)))
    Die("the first member did not lead");
  if (!add_member()->WaitForLine("following the primary", seconds(20)))
    Die("the second member did not follow");
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
    for (const auto& [db, proc] : members)
      (FileNumber(db + "/PRIMARY") == term ? leader_db : follower_db) = db;
    if (leader.empty() || leader_db.empty() || follower_db.empty())
      Die("no primary and follower to fail over");
    for (int k = 0; k < 800 && FileNumber(follower_db + "/TERM") != term; ++k)
      std::this_thread::sleep_for(milliseconds(25));
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
        to_elected.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
      }
      v1::AppendRequest req;
      req.set_session_id(session->id());
      req.set_expected_next_seq(next);
      req.set_idempotency_key(idempotency);
      req.add_events()->mutable_user_message()->set_text("after failover " + std::to_string(i));
      auto r = (*client)->Append(req);
      if (r.ok()) break;
      if (r.status().code() != StatusCode::kUnavailable) Die("append: " + r.status().ToString());
      if (std::chrono::duration<double>(Clock::now() - killed).count() > 120)
        Die("no primary within 120 s");
      std::this_thread::sleep_for(milliseconds(20));
    }
    to_ack.push_back(std::chrono::duration<double, std::milli>(Clock::now() - killed).count());
    if (!elected) to_elected.push_back(to_ack.back());
    ++next;
  }
  std::printf(
      "\nfailover of a sync shard through etcd (primary lease %d s; the primary SIGKILLed and its "
      "disk lost, a new "
      "member with an empty one started at once), %d failovers:\n",
      lease_seconds, count);
  std::printf("  kill -> new primary in etcd:           p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms\n",
              Percentile(to_elected, 0.5), Percentile(to_elected, 0.99),
              *std::max_element(to_elected.begin(), to_elected.end()));
  std::printf("  kill -> client's append acknowledged:  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms\n",
              Percentile(to_ack, 0.5), Percentile(to_ack, 0.99),
              *std::max_element(to_ack.begin(), to_ack.end()));
}
#else
void Failovers(const std::string&, int, int) {
  std::printf("\nfailover: skipped, built without the etcd test support (SINEW_BUILD_TESTS=OFF)\n");
}
#endif

}  // namespace sinew::bench
