// Operating a replicated store shard, as real processes on loopback (etcd and two
// sinew-store members of one shard): what `sinew-storectl shards` and each store's
// GET /metrics show before and after the primary is lost.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/json.hpp>

#include <cstdio>
#include <map>
#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/http/client.h"
#include "sinew/session_store/shard_map.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct ToolRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string Quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a tool to its end.
ToolRun RunTool(const std::vector<std::string>& argv) {
  std::string command;
  for (const auto& a : argv) command += Quote(a) + " ";
  command += "2>&1";
  ToolRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// A scrape as series -> value ("name{labels}" -> value).
std::map<std::string, double> Scrape(const std::string& address) {
  http::ClientRequest req;
  req.url = "http://" + address + "/metrics";
  auto got = http::Fetch(req);
  std::map<std::string, double> out;
  if (!got.ok() || got->status != 200) {
    ADD_FAILURE() << "GET /metrics at " << address << ": "
                  << (got.ok() ? std::to_string(got->status) + " " + got->body
                               : got.status().ToString());
    return out;
  }
  size_t start = 0;
  while (start < got->body.size()) {
    size_t end = got->body.find('\n', start);
    if (end == std::string::npos) end = got->body.size();
    const std::string line = got->body.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

class ShardOpsTest : public ::testing::Test {
 protected:
  struct Member {
    std::unique_ptr<testing::Subprocess> proc;
    std::string address;  // gRPC, as advertised
    std::string metrics;  // its /metrics listener
  };

  void SetUp() override {
    if (coord::test::EtcdBinary().empty())
      GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
    etcd_ = std::make_unique<coord::test::EtcdProcess>();
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start";
  }

  Member Start(const std::string& db) {
    Member m;
    m.proc = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0", "--etcd",
        etcd_->endpoint(), "--shard-id", "s1", "--replication", "sync", "--primary-lease-seconds",
        "2", "--shard-grace-ms", "0", "--metrics-listen", "127.0.0.1:0"});
    auto metrics = m.proc->WaitForLine("metrics on", seconds(20));
    auto listening = m.proc->WaitForLine("listening on", seconds(20));
    if (metrics && listening) {
      m.metrics = metrics->substr(metrics->rfind(' ') + 1);
      m.address = listening->substr(listening->rfind(' ') + 1);
    }
    return m;
  }

  // A leading, B following it, a client through the shard map, one session with five
  // appends.
  void StartShard() {
    a_ = Start(dir_.Sub("a"));
    ASSERT_FALSE(a_.address.empty()) << "A did not start";
    ASSERT_TRUE(a_.proc->WaitForLine("primary at term", seconds(20))) << "A did not lead";
    b_ = Start(dir_.Sub("b"));
    ASSERT_FALSE(b_.address.empty()) << "B did not start";
    ASSERT_TRUE(b_.proc->WaitForLine("following the primary", seconds(20)));
    RemoteOptions lazy;
    lazy.wait_for_server = false;
    auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto meta = client_->CreateSession(test::CreateOf("acme", "ops"));
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    id_ = meta->id();
    for (uint64_t seq = 2; seq <= 6; ++seq) {
      auto r = client_->Append(test::AppendOf(id_, seq, 0, {"e" + std::to_string(seq)}));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  // The shard's term now, from its primary key (0 when none).
  int64_t Term() {
    auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
    if (!etcd.ok()) return 0;
    auto listing = (*etcd)->GetPrefix("/sinew/store-primaries/s1");
    if (!listing.ok()) return 0;
    for (const auto& kv : listing->kvs) {
      if (kv.key == "/sinew/store-primaries/s1") return kv.create_revision;
    }
    return 0;
  }

  // A's machine is lost and a new member (C, empty directory) takes its place; B leads
  // and, once C follows it, takes a write.
  void LoseA() {
    a_.proc->Signal(SIGKILL);
    a_.proc->Wait();
    c_ = Start(dir_.Sub("c"));
    ASSERT_FALSE(c_.address.empty()) << "C did not start";
    ASSERT_TRUE(b_.proc->WaitForLine("primary at term", seconds(30))) << "B did not take over";
    Status last = Status::Ok();
    for (int i = 0; i < 600; ++i) {  // until the client finds B in the shard map
      auto r = client_->Append(test::AppendOf(id_, 7, 0, {"after"}, "after-failover"));
      if (r.ok()) return;
      last = r.status();
      std::this_thread::sleep_for(milliseconds(100));
    }
    FAIL() << "no write after the failover: " << last.ToString();
  }

  boost::json::object ShardsJson() {
    ToolRun run = RunTool(
        {testing::BinaryPath("sinew-storectl"), "--etcd", etcd_->endpoint(), "shards", "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    boost::system::error_code ec;
    auto v = boost::json::parse(run.output, ec);
    if (ec || !v.is_object() || v.as_object().at("shards").as_array().size() != 1) {
      ADD_FAILURE() << "not one shard: " << run.output;
      return {};
    }
    return v.as_object().at("shards").as_array()[0].as_object();
  }

  testing::TempDir dir_;
  std::unique_ptr<coord::test::EtcdProcess> etcd_;
  Member a_, b_, c_;
  std::unique_ptr<SessionStore> client_;
  std::string id_;
};

TEST_F(ShardOpsTest, StorectlShowsEachMembersRoleTermAndLagAndTheLastFailover) {
  ASSERT_NO_FATAL_FAILURE(StartShard());
  const int64_t first_term = Term();
  ASSERT_NE(first_term, 0);

  auto shard = ShardsJson();
  ASSERT_FALSE(shard.empty());
  EXPECT_EQ(shard.at("id").as_string(), "s1");
  EXPECT_EQ(shard.at("primary").as_string(), a_.address);
  EXPECT_EQ(shard.at("address").as_string(), a_.address) << "the shard map names the primary";
  EXPECT_EQ(shard.at("term").as_int64(), first_term);
  EXPECT_EQ(shard.at("mode").as_string(), "sync");
  EXPECT_EQ(shard.at("error").as_string(), "");
  const uint64_t latest = shard.at("latest_sequence").to_number<uint64_t>();
  EXPECT_GE(latest, 6u) << "at least the six writes' sequence numbers";
  const auto& followers = shard.at("followers").as_array();
  ASSERT_EQ(followers.size(), 1u);
  const auto& follower = followers[0].as_object();
  EXPECT_EQ(follower.at("member").as_string(), b_.address);
  const uint64_t synced = follower.at("synced_sequence").to_number<uint64_t>();
  EXPECT_LE(synced, latest);
  EXPECT_EQ(follower.at("lag").to_number<uint64_t>(), latest - synced);
  EXPECT_TRUE(follower.at("in_sync").as_bool()) << "B acknowledged the writes: it is in sync";
  EXPECT_TRUE(shard.at("last_failover").is_null()) << "no failover yet";
  ASSERT_EQ(shard.at("elections").as_array().size(), 1u);
  EXPECT_EQ(shard.at("elections").as_array()[0].as_object().at("member").as_string(), a_.address);
  EXPECT_EQ(shard.at("elections").as_array()[0].as_object().at("term").as_int64(), first_term);

  ToolRun table =
      RunTool({testing::BinaryPath("sinew-storectl"), "--etcd", etcd_->endpoint(), "shards"});
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("primary   " + a_.address), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("follower  " + b_.address), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("IN SYNC"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("s1: sync replication; no failover"), std::string::npos)
      << table.output;

  ASSERT_NO_FATAL_FAILURE(LoseA());
  const int64_t second_term = Term();
  EXPECT_GT(second_term, first_term);
  shard = ShardsJson();
  ASSERT_FALSE(shard.empty());
  EXPECT_EQ(shard.at("primary").as_string(), b_.address);
  EXPECT_EQ(shard.at("term").as_int64(), second_term);
  ASSERT_EQ(shard.at("followers").as_array().size(), 1u);
  EXPECT_EQ(shard.at("followers").as_array()[0].as_object().at("member").as_string(), c_.address);
  ASSERT_TRUE(shard.at("last_failover").is_object());
  const auto& failover = shard.at("last_failover").as_object();
  EXPECT_EQ(failover.at("term").as_int64(), second_term);
  EXPECT_EQ(failover.at("member").as_string(), b_.address);
  EXPECT_EQ(failover.at("previous_term").as_int64(), first_term);
  EXPECT_EQ(failover.at("previous_member").as_string(), a_.address);
  EXPECT_GT(failover.at("at_unix_ms").as_int64(),
            shard.at("elections").as_array()[1].as_object().at("at_unix_ms").as_int64());

  table = RunTool({testing::BinaryPath("sinew-storectl"), "--etcd", etcd_->endpoint(), "shards"});
  EXPECT_NE(table.output.find("term " + std::to_string(second_term) + ", " + b_.address +
                              " took over from " + a_.address),
            std::string::npos)
      << table.output;
}

TEST_F(ShardOpsTest, MetricsShowEachMembersRoleTermFollowersAndWrites) {
  ASSERT_NO_FATAL_FAILURE(StartShard());
  const int64_t term = Term();
  auto a = Scrape(a_.metrics);
  EXPECT_EQ(a["sinew_store_role{role=\"primary\"}"], 1);
  EXPECT_EQ(a["sinew_store_role{role=\"follower\"}"], 0);
  EXPECT_EQ(a["sinew_store_directory_term"], static_cast<double>(term));
  EXPECT_EQ(a["sinew_store_writes_total{op=\"create_session\",outcome=\"acknowledged\"}"], 1);
  EXPECT_EQ(a["sinew_store_writes_total{op=\"append\",outcome=\"acknowledged\"}"], 5);
  EXPECT_EQ(a["sinew_store_write_seconds_count{op=\"append\"}"], 5);
  EXPECT_EQ(a["sinew_store_replication_sync_waits_total"], 6) << "every write waited for B";
  EXPECT_EQ(a["sinew_store_replication_sync_timeouts_total"], 0);
  EXPECT_EQ(a["sinew_store_replication_followers"], 1);
  const std::string follower = "{follower=\"" + b_.address + "\"}";
  ASSERT_EQ(a.count("sinew_store_replication_follower_synced_sequence" + follower), 1u)
      << "B is not listed";
  EXPECT_GE(a["sinew_store_last_sequence"], 6);
  EXPECT_EQ(a["sinew_store_replication_follower_in_sync" + follower], 1) << "B acknowledged every write";
  EXPECT_EQ(a["sinew_store_replication_follower_lag" + follower],
            a["sinew_store_last_sequence"] -
                a["sinew_store_replication_follower_synced_sequence" + follower]);

  auto b = Scrape(b_.metrics);
  EXPECT_EQ(b["sinew_store_role{role=\"follower\"}"], 1);
  EXPECT_EQ(b["sinew_store_role{role=\"primary\"}"], 0);
  EXPECT_EQ(b["sinew_store_failovers_seen_total"], 0);
  EXPECT_EQ(b["sinew_store_writes_total{op=\"append\",outcome=\"acknowledged\"}"], 0)
      << "B took no write";

  ASSERT_NO_FATAL_FAILURE(LoseA());
  // B's watch of the term runs every 500 ms: wait for it to see the new one.
  for (int i = 0; i < 100 && Scrape(b_.metrics)["sinew_store_term"] != static_cast<double>(Term());
       ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  b = Scrape(b_.metrics);
  EXPECT_EQ(b["sinew_store_term"], static_cast<double>(Term()));
  EXPECT_EQ(b["sinew_store_role{role=\"primary\"}"], 1);
  EXPECT_EQ(b["sinew_store_failovers_seen_total"], 1);
  EXPECT_EQ(b["sinew_store_writes_total{op=\"append\",outcome=\"acknowledged\"}"], 1)
      << "the write after the failover";
  EXPECT_EQ(
      b.count("sinew_store_replication_follower_synced_sequence{follower=\"" + c_.address + "\"}"),
      1u)
      << "C follows B";
}

TEST_F(ShardOpsTest, MetricsAnswerOnlyGetMetricsAndStorectlNeedsEtcd) {
  ASSERT_NO_FATAL_FAILURE(StartShard());
  http::ClientRequest other;
  other.url = "http://" + a_.metrics + "/other";
  auto got = http::Fetch(other);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 404);
  EXPECT_NE(got->body.find("\"code\":\"not_found\""), std::string::npos) << got->body;
  http::ClientRequest post;
  post.method = "POST";
  post.url = "http://" + a_.metrics + "/metrics";
  got = http::Fetch(post);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 405);

  ToolRun no_etcd = RunTool({testing::BinaryPath("sinew-storectl"), "shards"});
  EXPECT_EQ(no_etcd.exit_code, 1);
  EXPECT_NE(no_etcd.output.find("--etcd"), std::string::npos) << no_etcd.output;
  testing::RefusingPort refusing;
  ToolRun down = RunTool({testing::BinaryPath("sinew-storectl"), "--etcd",
                          "127.0.0.1:" + std::to_string(refusing.port()), "shards"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.output.find("unavailable"), std::string::npos) << down.output;

  ToolRun bad = RunTool({testing::BinaryPath("sinew-store"), "--db", dir_.Sub("d"), "--listen",
                         "127.0.0.1:0", "--metrics-listen", "no-port"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--metrics-listen must be host:port"), std::string::npos) << bad.output;
  ToolRun wide = RunTool({testing::BinaryPath("sinew-store"), "--db", dir_.Sub("d"), "--listen",
                          "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"});
  EXPECT_EQ(wide.exit_code, 2) << "plain HTTP on every interface needs --insecure";
  EXPECT_NE(wide.output.find("--insecure"), std::string::npos) << wide.output;
}

// A sync primary without etcd: a write with no follower times out (and is counted so);
// one that may degrade counts its switch to async and, once a follower is back, to sync.
TEST(StoreMetricsTest, SyncTimeoutsAndDegradedSwitchesAreCounted) {
  testing::TempDir dir;
  auto start = [&](const std::string& db, const std::vector<std::string>& extra, std::string* grpc,
                   std::string* metrics) {
    std::vector<std::string> args{testing::BinaryPath("sinew-store"),
                                  "--db",
                                  db,
                                  "--listen",
                                  "127.0.0.1:0",
                                  "--metrics-listen",
                                  "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto proc = std::make_unique<testing::Subprocess>(args);
    auto m = proc->WaitForLine("metrics on", seconds(20));
    auto l = proc->WaitForLine("listening on", seconds(20));
    if (!m || !l) return std::unique_ptr<testing::Subprocess>();
    *metrics = m->substr(m->rfind(' ') + 1);
    *grpc = l->substr(l->rfind(' ') + 1);
    return proc;
  };
  std::string blocking_grpc, blocking_metrics;
  auto blocking =
      start(dir.Sub("blocking"), {"--replication", "sync", "--follower-timeout-ms", "200"},
            &blocking_grpc, &blocking_metrics);
  ASSERT_NE(blocking, nullptr);
  auto client = ConnectSessionStore(blocking_grpc);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto created = (*client)->CreateSession(test::CreateOf("acme", "alone"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable) << created.status().ToString();
  auto m = Scrape(blocking_metrics);
  EXPECT_EQ(m["sinew_store_replication_sync_waits_total"], 1);
  EXPECT_EQ(m["sinew_store_replication_sync_timeouts_total"], 1);
  EXPECT_EQ(m["sinew_store_writes_total{op=\"create_session\",outcome=\"unavailable\"}"], 1);
  EXPECT_EQ(m["sinew_store_role{role=\"primary\"}"], 1);
  EXPECT_EQ(m["sinew_store_replication_followers"], 0);

  std::string grpc, metrics;
  auto degrading =
      start(dir.Sub("degrading"), {"--replication", "sync", "--when-no-follower", "degrade"}, &grpc,
            &metrics);
  ASSERT_NE(degrading, nullptr);
  client = ConnectSessionStore(grpc);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "degraded"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  m = Scrape(metrics);
  EXPECT_EQ(m["sinew_store_replication_degraded_switches_total{to=\"async\"}"], 1);
  EXPECT_EQ(m["sinew_store_replication_degraded_switches_total{to=\"sync\"}"], 0);
  EXPECT_EQ(m["sinew_store_replication_sync_waits_total"], 0)
      << "a degraded write waits for nobody";

  std::string follower_metrics;
  testing::Subprocess follower({testing::BinaryPath("sinew-store"), "--db", dir.Sub("follower"),
                                "--follow", grpc, "--follower-name", "f1", "--metrics-listen",
                                "127.0.0.1:0"});
  auto fm = follower.WaitForLine("metrics on", seconds(20));
  ASSERT_TRUE(fm);
  follower_metrics = fm->substr(fm->rfind(' ') + 1);
  for (int i = 0; i < 200 && Scrape(metrics)["sinew_store_replication_followers"] != 1; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  auto r = (*client)->Append(test::AppendOf(meta->id(), 2, 0, {"replicated"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  m = Scrape(metrics);
  EXPECT_EQ(m["sinew_store_replication_degraded_switches_total{to=\"sync\"}"], 1);
  EXPECT_EQ(m["sinew_store_replication_sync_waits_total"], 1);
  auto f = Scrape(follower_metrics);
  EXPECT_EQ(f["sinew_store_role{role=\"follower\"}"], 1);
  EXPECT_GE(f["sinew_store_last_sequence"],
            m["sinew_store_replication_follower_synced_sequence{follower=\"f1\"}"])
      << "the follower has at least what the primary knows it synced";
}

}  // namespace
}  // namespace sinew::store
