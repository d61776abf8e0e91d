// A replicated store shard with etcd, as real processes on loopback: two sinew-store
// members elect a primary, a client reaches the shard through the shard map, and the
// primary's machine is lost (SIGKILL and its directory deleted) while the client writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "etcd_process.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/session_store/shard_map.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::AllEvents;
using test::AppendOf;

class ReplicatedShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
    etcd_ = std::make_unique<coord::test::EtcdProcess>();
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start";
  }
  std::unique_ptr<testing::Subprocess> Member(const std::string& db) {
    auto proc = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0", "--etcd", etcd_->endpoint(),
        "--shard-id", "s1", "--replication", "sync", "--primary-lease-seconds", "2", "--shard-grace-ms", "0"});
    if (!proc->WaitForLine("listening on", seconds(20))) return nullptr;
    return proc;
  }
  // Appends `text` at the session's end, retrying through a failover with the same key;
  // returns its sequence number.
  uint64_t AppendThroughFailover(SessionStore& store, const std::string& id, const std::string& text) {
    const auto give_up = std::chrono::steady_clock::now() + seconds(60);
    Status last = Status::Ok();
    while (std::chrono::steady_clock::now() < give_up) {
      auto meta = store.GetSession(id);
      if (!meta.ok()) last = meta.status();
      if (meta.ok()) {
        auto r = store.Append(AppendOf(id, meta->next_seq(), 0, {text}, "key-" + text));
        if (r.ok()) return r->first_seq();
        last = r.status();
        // A retry that finds its own write already there at another position is a bug:
        // the idempotency key would have returned it.
        if (r.status().code() != StatusCode::kUnavailable && r.status().code() != StatusCode::kFailedPrecondition) {
          ADD_FAILURE() << text << ": " << r.status().ToString();
          return 0;
        }
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ADD_FAILURE() << text << ": the shard did not take the write within 60 s; last: " << last.ToString();
    return 0;
  }
  // Two members, A leading and B following it, and a client through the shard map with
  // one session; *id is the session.
  void StartShard(const std::string& title, std::string* id) {
    a_ = Member(a_dir_);
    ASSERT_NE(a_, nullptr);
    ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20))) << "the first member did not lead";
    b_ = Member(b_dir_);
    ASSERT_NE(b_, nullptr);
    ASSERT_TRUE(b_->WaitForLine("following the primary", seconds(20)));
    RemoteOptions lazy;
    lazy.wait_for_server = false;
    auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto meta = client_->CreateSession(test::CreateOf("acme", title));
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    *id = meta->id();
  }
  testing::TempDir dir_;
  std::unique_ptr<coord::test::EtcdProcess> etcd_;
  const std::string a_dir_ = dir_.Sub("a"), b_dir_ = dir_.Sub("b");
  std::unique_ptr<testing::Subprocess> a_, b_;
  std::unique_ptr<SessionStore> client_;
};

TEST_F(ReplicatedShardTest, TheFollowerTakesOverALostPrimaryWithEveryAcknowledgedWriteAndTheOldOneRejoins) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartShard("failover", &id));
  auto& a = a_;
  auto& b = b_;
  auto* client = &client_;
  const std::string& a_dir = a_dir_;
  const std::string& b_dir = b_dir_;

  std::map<uint64_t, std::string> acknowledged;
  for (int i = 0; i < 30; ++i) {
    const std::string text = "before-" + std::to_string(i);
    const uint64_t seq = AppendThroughFailover(**client, id, text);
    ASSERT_NE(seq, 0u);
    acknowledged[seq] = text;
  }
  // A's machine is lost, and a new one takes its place with an empty disk: B leads,
  // A follows it, and the writes go on through the failover (in sync mode a primary
  // acknowledges nothing while it has no follower).
  a->Signal(SIGKILL);
  a->Wait();
  std::filesystem::remove_all(a_dir);
  a = Member(a_dir);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 30; ++i) {
    const std::string text = "after-" + std::to_string(i);
    const uint64_t seq = AppendThroughFailover(**client, id, text);
    ASSERT_NE(seq, 0u);
    acknowledged[seq] = text;
  }
  EXPECT_TRUE(b->WaitForLine("primary at term", seconds(1))) << "B did not take over";
  EXPECT_TRUE(a->WaitForLine("following the primary", seconds(1))) << "A did not rejoin as B's follower";
  auto check = [&](SessionStore& store, int expected) {
    auto events = AllEvents(store, id);
    for (int i = 0; i < 200 && !events.ok(); ++i) {  // the shard map may still name the old primary
      std::this_thread::sleep_for(milliseconds(100));
      events = AllEvents(store, id);
    }
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    ASSERT_EQ(events->events_size(), expected) << "every write once, nothing else";
    for (int i = 0; i < events->events_size(); ++i) {
      EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
    }
    for (const auto& [seq, text] : acknowledged) {
      EXPECT_EQ(events->events(static_cast<int>(seq - 1)).user_message().text(), text) << "at " << seq;
    }
  };
  check(**client, 61);

  // Once A has caught up (it then holds B's term), B is lost in turn: A leads with
  // everything.
  for (int i = 0; i < 300 && !std::filesystem::exists(a_dir + "/TERM"); ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(a_dir + "/TERM")) << "A did not catch up with B";
  const uint64_t last = AppendThroughFailover(**client, id, "last");
  ASSERT_NE(last, 0u);
  acknowledged[last] = "last";
  b->Signal(SIGKILL);
  b->Wait();
  std::filesystem::remove_all(b_dir);
  EXPECT_TRUE(a->WaitForLine("primary at term", seconds(30))) << "A did not take over";
  check(**client, 62);
}
// A primary that stops answering (frozen past its etcd lease) is replaced; when it wakes
// up it acknowledges nothing more, ends, and rejoins as a follower with its directory set
// aside (it may hold writes nobody acknowledged).
TEST_F(ReplicatedShardTest, AFrozenPrimaryIsDeposedAndRejoinsWithItsDirectorySetAside) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(StartShard("deposed", &id));
  auto& a = a_;
  auto& b = b_;
  auto* client = &client_;
  const std::string& a_dir = a_dir_;
  const std::string& b_dir = b_dir_;
  for (int i = 0; i < 10; ++i) ASSERT_NE(AppendThroughFailover(**client, id, "one-" + std::to_string(i)), 0u);
  for (int i = 0; i < 300 && !std::filesystem::exists(b_dir + "/TERM"); ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(b_dir + "/TERM")) << "B did not catch up";

  a->Signal(SIGSTOP);
  ASSERT_TRUE(b->WaitForLine("primary at term", seconds(30))) << "B did not take over from the frozen A";
  a->Signal(SIGCONT);
  const int status = a->Wait();
  ASSERT_TRUE(WIFEXITED(status)) << "A did not end on its own";
  EXPECT_EQ(WEXITSTATUS(status), 3) << "a deposed primary ends with status 3";

  a = Member(a_dir);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->WaitForLine("following the primary", seconds(20)));
  bool set_aside = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.Sub(""))) {
    if (entry.path().filename().string().rfind("a.deposed-", 0) == 0) set_aside = true;
  }
  EXPECT_TRUE(set_aside) << "A's old directory was not set aside";
  for (int i = 0; i < 10; ++i) ASSERT_NE(AppendThroughFailover(**client, id, "two-" + std::to_string(i)), 0u);
  auto events = AllEvents(**client, id);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events_size(), 21);
  for (int i = 0; i < 21; ++i) EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
  EXPECT_EQ(events->events(20).user_message().text(), "two-9");
}

// The kill loop: the primary of the moment is SIGKILLed and its disk deleted, again and
// again, while a client keeps writing; a new member with an empty disk takes each lost
// one's place. SINEW_FAILOVER_CYCLES sets the count (default 4; the `long` label runs 40).
TEST_F(ReplicatedShardTest, RepeatedLossOfThePrimaryLosesNoAcknowledgedWrite) {
  const char* env = std::getenv("SINEW_FAILOVER_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 4;
  std::map<std::string, std::unique_ptr<testing::Subprocess>> members;
  int made = 0;
  auto add_member = [&] {
    const std::string db = dir_.Sub("m" + std::to_string(made++));
    members[db] = Member(db);
    return members[db] != nullptr;
  };
  ASSERT_TRUE(add_member());
  ASSERT_TRUE(members.begin()->second->WaitForLine("primary at term", seconds(20)));
  ASSERT_TRUE(add_member());
  RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "kill loop"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  std::map<uint64_t, std::string> acknowledged;
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  std::vector<double> failover_ms;  // from a leader's SIGKILL to the next acknowledged write
  std::chrono::steady_clock::time_point killed{};
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (int i = 0; i < 5; ++i) {
      const std::string text = std::to_string(cycle) + "-" + std::to_string(i);
      const uint64_t seq = AppendThroughFailover(**client, id, text);
      ASSERT_NE(seq, 0u) << "cycle " << cycle;
      acknowledged[seq] = text;
      if (i == 0 && cycle > 0) {
        failover_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count());
      }
    }
    // Whoever leads now, and the other has caught up with this term: lose the leader.
    auto listing = (*etcd)->GetPrefix("/sinew/store-primaries/s1");
    ASSERT_TRUE(listing.ok());
    std::string leader_address;
    int64_t term = 0;
    for (const auto& kv : listing->kvs) {
      if (kv.key == "/sinew/store-primaries/s1") {
        leader_address = kv.value;
        term = kv.create_revision;
      }
    }
    ASSERT_FALSE(leader_address.empty()) << "cycle " << cycle;
    std::string leader_db, follower_db;
    for (const auto& [db, proc] : members) {
      std::ifstream primary_marker(db + "/PRIMARY");
      int64_t led = 0;
      if (primary_marker >> led && led == term) leader_db = db; else follower_db = db;
    }
    ASSERT_FALSE(leader_db.empty() || follower_db.empty()) << "cycle " << cycle;
    auto synced = [&] {
      std::ifstream in(follower_db + "/TERM");
      int64_t t = 0;
      return (in >> t) && t == term;
    };
    for (int i = 0; i < 400 && !synced(); ++i) std::this_thread::sleep_for(milliseconds(25));
    ASSERT_TRUE(synced()) << "cycle " << cycle << ": the follower did not catch up";
    members[leader_db]->Signal(SIGKILL);
    killed = std::chrono::steady_clock::now();
    members[leader_db]->Wait();
    members.erase(leader_db);
    std::filesystem::remove_all(leader_db);
    ASSERT_TRUE(add_member()) << "cycle " << cycle;
  }
  auto events = AllEvents(**client, id);
  for (int i = 0; i < 300 && !events.ok(); ++i) {  // the last failover may be under way
    std::this_thread::sleep_for(milliseconds(100));
    events = AllEvents(**client, id);
  }
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events_size(), 1 + 5 * cycles) << "every write once, nothing else";
  std::sort(failover_ms.begin(), failover_ms.end());
  if (!failover_ms.empty()) {
    std::printf("failover (primary lease 2 s), kill to next acknowledged write over %zu: p50 %.0f ms, max %.0f ms\n",
                failover_ms.size(), failover_ms[failover_ms.size() / 2], failover_ms.back());
  }
  for (int i = 0; i < events->events_size(); ++i) EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
  for (const auto& [seq, text] : acknowledged) {
    EXPECT_EQ(events->events(static_cast<int>(seq - 1)).user_message().text(), text) << "at " << seq;
  }
}

}  // namespace
}  // namespace sinew::store
