// A replicated store shard with etcd, as real processes on loopback: two sinew-store
// members elect a primary, a client reaches the shard through the shard map, and the
// primary's machine is lost (SIGKILL and its directory deleted) while the client writes.
// The whole binary runs in a network namespace of its own (when it may: root), where the
// partition tests put members on machines of a private network and cut their links.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "etcd_process.h"
#include "private_network.h"
#include "sinew/coord/etcd_client.h"
#include "sinew/grpc_tls.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/session_store/shard_map.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"
#include "tcp_proxy.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::AllEvents;
using test::AppendOf;

// Before main, while the process has one thread: "" or why there is no private network.
const std::string kNoPrivateNetwork = test::EnterPrivateNetwork();

class ReplicatedShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (coord::test::EtcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
    etcd_ = std::make_unique<coord::test::EtcdProcess>(coord::test::EtcdTls{}, etcd_host_);
    ASSERT_FALSE(etcd_->endpoint().empty()) << "etcd did not start";
  }
  // Where etcd serves; set before SetUp.
  std::string etcd_host_ = "127.0.0.1";
  // A member of shard s1; *address (when given) is where it listens; it reaches etcd at
  // `etcd` (default: etcd's own address).
  std::unique_ptr<testing::Subprocess> Member(const std::string& db, std::vector<std::string> extra = {},
                                              std::string* address = nullptr, std::string etcd = "") {
    return MemberWith({}, "127.0.0.1", db, std::move(extra), address, std::move(etcd));
  }
  // The same, run by `prefix` and listening on `host`.
  std::unique_ptr<testing::Subprocess> MemberWith(std::vector<std::string> prefix, const std::string& host,
                                                  const std::string& db, std::vector<std::string> extra,
                                                  std::string* address, std::string etcd = "") {
    std::vector<std::string> args{testing::BinaryPath("sinew-store"), "--db", db, "--listen", host + ":0",
                                  "--etcd", etcd.empty() ? etcd_->endpoint() : etcd, "--shard-id", "s1",
                                  "--replication", "sync",
                                  "--primary-lease-seconds", "2", "--shard-grace-ms", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.begin(), prefix.begin(), prefix.end());
    auto proc = std::make_unique<testing::Subprocess>(args);
    auto line = proc->WaitForLine("listening on", seconds(20));
    if (!line) return nullptr;
    if (address != nullptr) *address = line->substr(line->rfind(' ') + 1);
    return proc;
  }
  // The shard's primary in etcd now: its address and term ("" and 0 while there is none).
  std::pair<std::string, int64_t> PrimaryNow(coord::EtcdClient& etcd) {
    auto listing = etcd.GetPrefix("/sinew/store-primaries/s1");
    if (!listing.ok()) return {"", 0};
    for (const auto& kv : listing->kvs) {
      if (kv.key == "/sinew/store-primaries/s1") return {kv.value, kv.create_revision};
    }
    return {"", 0};
  }
  // The primary's replication status; nullopt when it does not answer.
  std::optional<v1::ReplicationStatus> StatusOf(const std::string& address) {
    auto channel = GrpcChannel(address, {});
    if (!channel.ok()) return std::nullopt;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    v1::ReplicationStatus out;
    if (!v1::StoreReplication::NewStub(*channel)->GetReplicationStatus(&ctx, {}, &out).ok()) return std::nullopt;
    return out;
  }
  // Checks that the session holds exactly the acknowledged writes, once each, in order.
  void ExpectExactly(SessionStore& store, const std::string& id, const std::map<uint64_t, std::string>& acknowledged) {
    auto events = AllEvents(store, id);
    for (int i = 0; i < 300 && !events.ok(); ++i) {  // the shard map may still name the old primary
      std::this_thread::sleep_for(milliseconds(100));
      events = AllEvents(store, id);
    }
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    ASSERT_EQ(events->events_size(), static_cast<int>(1 + acknowledged.size())) << "every write once, nothing else";
    for (int i = 0; i < events->events_size(); ++i) EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
    for (const auto& [seq, text] : acknowledged) {
      ASSERT_LE(seq, static_cast<uint64_t>(events->events_size()));
      EXPECT_EQ(events->events(static_cast<int>(seq - 1)).user_message().text(), text) << "at " << seq;
    }
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

// Three members; one follower falls behind (frozen while the writes go on), then the
// primary's machine is lost while the other follower does not answer either. The follower
// that is behind must not lead: it waits for the one that holds more, which leads with
// every acknowledged write.
TEST_F(ReplicatedShardTest, TheMostAdvancedFollowerLeadsAfterThePrimaryIsLost) {
  // Long enough that the frozen follower's progress outlives the primary's lease.
  const std::vector<std::string> slow_progress{"--member-lease-seconds", "10"};
  std::string b_address;
  const std::string c_dir = dir_.Sub("c");
  a_ = Member(a_dir_, slow_progress);
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = Member(b_dir_, slow_progress, &b_address);
  auto c = Member(c_dir, slow_progress);
  ASSERT_TRUE(b_ != nullptr && c != nullptr);
  RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "most advanced"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  std::map<uint64_t, std::string> acknowledged;
  auto append = [&](const std::string& text) {
    const uint64_t seq = AppendThroughFailover(**client, id, text);
    ASSERT_NE(seq, 0u);
    acknowledged[seq] = text;
  };
  for (int i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(append("both-" + std::to_string(i)));
  // Both followers in sync with this term, then C stops while B keeps up.
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  const auto [a_address, term] = PrimaryNow(**etcd);
  auto in_sync = [&] {
    auto st = StatusOf(a_address);
    int n = 0;
    for (int i = 0; st && i < st->followers_size(); ++i) n += st->followers(i).in_sync() ? 1 : 0;
    return n;
  };
  for (int i = 0; i < 400 && in_sync() < 2; ++i) std::this_thread::sleep_for(milliseconds(25));
  ASSERT_EQ(in_sync(), 2) << "both followers in sync";
  c->Signal(SIGSTOP);
  for (int i = 0; i < 20; ++i) ASSERT_NO_FATAL_FAILURE(append("b-only-" + std::to_string(i)));

  b_->Signal(SIGSTOP);
  a_->Signal(SIGKILL);
  a_->Wait();
  std::filesystem::remove_all(a_dir_);
  c->Signal(SIGCONT);
  // C, with fewer writes, holds back for B even while B does not answer.
  EXPECT_TRUE(c->WaitForLine("it waits for " + b_address, seconds(30))) << "C did not wait for B";
  EXPECT_EQ(PrimaryNow(**etcd).second, 0) << "a member led while the most advanced one was frozen";
  b_->Signal(SIGCONT);
  ASSERT_TRUE(b_->WaitForLine("primary at term", seconds(30))) << "B did not take over";
  EXPECT_TRUE(c->WaitForLine("following the primary at " + b_address, seconds(30))) << "C does not follow B";
  ASSERT_NO_FATAL_FAILURE(append("after"));
  ExpectExactly(**client, id, acknowledged);
}

// Two failures at once: the follower that holds the last acknowledged writes is frozen
// past its progress lease while the primary's machine is lost, so the one behind leads
// without them. When the frozen one wakes it holds batches the new primary never had: it
// sets its directory aside and copies the new primary's from the start, so that its copy
// is the new primary's and not a mix of both logs.
TEST_F(ReplicatedShardTest, AFollowerHoldingWritesTheNewPrimaryNeverHadStartsItsCopyAgain) {
  std::string c_address;
  const std::string c_dir = dir_.Sub("c");
  a_ = Member(a_dir_);
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = Member(b_dir_);
  auto c = Member(c_dir, {}, &c_address);
  ASSERT_TRUE(b_ != nullptr && c != nullptr);
  RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "diverged"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  for (int i = 0; i < 5; ++i) ASSERT_NE(AppendThroughFailover(**client, id, "all-" + std::to_string(i)), 0u);
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  auto in_sync_followers = [&](const std::string& address) {
    auto st = StatusOf(address);
    int n = 0;
    for (int i = 0; st && i < st->followers_size(); ++i) n += st->followers(i).in_sync() ? 1 : 0;
    return n;
  };
  const std::string a_address = PrimaryNow(**etcd).first;
  for (int i = 0; i < 400 && in_sync_followers(a_address) < 2; ++i) std::this_thread::sleep_for(milliseconds(25));
  ASSERT_EQ(in_sync_followers(a_address), 2);
  b_->Signal(SIGSTOP);
  for (int i = 0; i < 10; ++i) ASSERT_NE(AppendThroughFailover(**client, id, "c-only-" + std::to_string(i)), 0u);
  c->Signal(SIGSTOP);
  a_->Signal(SIGKILL);
  a_->Wait();
  std::filesystem::remove_all(a_dir_);
  b_->Signal(SIGCONT);
  ASSERT_TRUE(b_->WaitForLine("primary at term", seconds(30))) << "B did not lead once C's progress ran out";
  // A new member in A's place, so that B acknowledges writes again; then C wakes.
  a_ = Member(a_dir_);
  ASSERT_NE(a_, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_NE(AppendThroughFailover(**client, id, "b-" + std::to_string(i)), 0u);
  c->Signal(SIGCONT);
  EXPECT_TRUE(c->WaitForLine("holds writes the primary never had", seconds(30))) << "C kept its diverged copy";
  const std::string b_address = PrimaryNow(**etcd).first;
  for (int i = 0; i < 1200 && in_sync_followers(b_address) < 2; ++i) std::this_thread::sleep_for(milliseconds(25));
  ASSERT_EQ(in_sync_followers(b_address), 2) << "C did not get in sync with B";
  auto on_b = AllEvents(**client, id);
  ASSERT_TRUE(on_b.ok()) << on_b.status().ToString();
  c->Signal(SIGKILL);
  c->Wait();
  auto copy = OpenSessionStore(c_dir, StoreOptions{});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto on_c = AllEvents(**copy, id);
  ASSERT_TRUE(on_c.ok()) << on_c.status().ToString();
  EXPECT_EQ(on_c->SerializeAsString(), on_b->SerializeAsString()) << "C's copy is not B's";
}

// A network partition: the primary loses etcd (its packets dropped) while its followers
// and the client still reach it. It stops acknowledging before its lease can run out and a
// follower leads; the partition heals while the client goes on writing. Every write the
// client was told is kept is on the new primary once, in order: none was acknowledged by
// the old primary after the new one took over. (That a deposed primary ends once it sees
// its lease gone is AFrozenPrimaryIsDeposedAndRejoinsWithItsDirectorySetAside's.)
TEST_F(ReplicatedShardTest, APrimaryCutOffFromEtcdStopsAcknowledgingAndAFollowerLeads) {
  test::TcpProxy etcd_link(etcd_->endpoint());
  a_ = Member(a_dir_, {}, nullptr, etcd_link.address());
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = Member(b_dir_);
  auto c = Member(dir_.Sub("c"));
  ASSERT_TRUE(b_ != nullptr && c != nullptr);
  RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "partition"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  const std::string a_address = PrimaryNow(**etcd).first;

  std::mutex mu;
  std::map<uint64_t, std::string> acknowledged;  // guarded by mu
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      const std::string text = "p-" + std::to_string(i);
      const uint64_t seq = AppendThroughFailover(**client, id, text);
      if (seq == 0) return;
      std::lock_guard<std::mutex> lock(mu);
      acknowledged[seq] = text;
    }
  });
  auto acked = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return acknowledged.size();
  };
  auto await_acks = [&](size_t n) {
    const size_t from = acked();
    for (int i = 0; i < 2400 && acked() < from + n; ++i) std::this_thread::sleep_for(milliseconds(25));
    return acked() >= from + n;
  };
  EXPECT_TRUE(await_acks(10)) << "no writes before the partition";
  etcd_link.Cut();
  std::string leader;
  for (int i = 0; i < 2400; ++i) {
    leader = PrimaryNow(**etcd).first;
    if (!leader.empty() && leader != a_address) break;
    std::this_thread::sleep_for(milliseconds(25));
  }
  EXPECT_FALSE(leader.empty() || leader == a_address) << "no follower took over from the cut-off primary";
  EXPECT_TRUE(await_acks(10)) << "no writes after the failover";
  // Healed, the old primary (still running, its lease gone) takes no write from anyone.
  etcd_link.Heal();
  EXPECT_TRUE(await_acks(10)) << "no writes after the partition healed";
  stop = true;
  writer.join();
  std::map<uint64_t, std::string> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    all = acknowledged;
  }
  ExpectExactly(**client, id, all);
}

// The kill loop: three members and a client writing all along; the primary of the moment
// is SIGKILLed and its disk deleted, again and again, a new member with an empty disk
// taking each lost one's place; followers crash too (restarted on their directory), a
// follower's machine is lost now and then, and etcd is killed and restarted on its data.
// Primaries keep their log 1 s and are flushed every cycle, so new members are seeded
// from checkpoints as they would be in a shard that has run for a while.
// SINEW_FAILOVER_CYCLES sets the count (default 4; the `long` label runs 40).
TEST_F(ReplicatedShardTest, RepeatedLossOfThePrimaryLosesNoAcknowledgedWrite) {
  const char* env = std::getenv("SINEW_FAILOVER_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 4;
  std::map<std::string, std::unique_ptr<testing::Subprocess>> members;  // by directory
  std::map<std::string, std::string> addresses;                          // directory by address
  int made = 0;
  auto add_member = [&](std::string db = "") {
    if (db.empty()) db = dir_.Sub("m" + std::to_string(made++));
    std::string address;
    members[db] = Member(db, {"--wal-ttl-seconds", "1"}, &address);
    addresses[address] = db;
    return members[db] != nullptr;
  };
  ASSERT_TRUE(add_member());
  ASSERT_TRUE(members.begin()->second->WaitForLine("primary at term", seconds(20)));
  ASSERT_TRUE(add_member());
  ASSERT_TRUE(add_member());
  RemoteOptions lazy;
  lazy.wait_for_server = false;
  auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto meta = (*client)->CreateSession(test::CreateOf("acme", "kill loop"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const std::string id = meta->id();
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());

  // The client: appends one event after another, each retried with its key until acknowledged.
  std::mutex mu;
  std::map<uint64_t, std::string> acknowledged;                 // guarded by mu
  std::vector<std::chrono::steady_clock::time_point> ack_times;  // guarded by mu
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      const std::string text = "w-" + std::to_string(i);
      const uint64_t seq = AppendThroughFailover(**client, id, text);
      if (seq == 0) return;
      std::lock_guard<std::mutex> lock(mu);
      acknowledged[seq] = text;
      ack_times.push_back(std::chrono::steady_clock::now());
    }
  });
  auto acked = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return ack_times.size();
  };
  // Waits until the writer got `n` more acknowledgements; the time of the first of them.
  auto await_acks = [&](size_t n) -> std::optional<std::chrono::steady_clock::time_point> {
    const size_t from = acked();
    for (int i = 0; i < 2400 && acked() < from + n; ++i) std::this_thread::sleep_for(milliseconds(25));
    std::lock_guard<std::mutex> lock(mu);
    if (ack_times.size() < from + n) return std::nullopt;
    return ack_times[from];
  };
  // The primary now, once `followers` of its followers are in sync; its directory.
  auto leader_with = [&](int followers) -> std::string {
    for (int i = 0; i < 2400; ++i) {
      auto [address, term] = PrimaryNow(**etcd);
      auto st = address.empty() ? std::nullopt : StatusOf(address);
      int n = 0;
      for (int f = 0; st && f < st->followers_size(); ++f) n += st->followers(f).in_sync() ? 1 : 0;
      if (n >= followers && addresses.count(address)) return addresses[address];
      std::this_thread::sleep_for(milliseconds(25));
    }
    return "";
  };
  auto a_follower_of = [&](const std::string& leader_db) {
    for (const auto& [db, proc] : members) {
      if (db != leader_db) return db;
    }
    return std::string();
  };
  std::vector<double> failover_ms;  // from a primary's SIGKILL to the client's next acknowledgement
  std::vector<double> failover_etcd_ms;  // the same, with etcd restarted during the failover
  int follower_crashes = 0, follower_losses = 0, etcd_restarts = 0, seeds = 0;
  auto count_seeds = [&](testing::Subprocess& proc) {
    while (auto line = proc.ReadLine(milliseconds(1))) seeds += line->find("seeded") != std::string::npos ? 1 : 0;
  };
  auto kill = [&](const std::string& db) {
    members[db]->Signal(SIGKILL);
    members[db]->Wait();
    count_seeds(*members[db]);
  };
  int flushes = 0;
  for (int cycle = 0; cycle < cycles && !::testing::Test::HasFailure(); ++cycle) {
    ASSERT_TRUE(await_acks(5)) << "cycle " << cycle << ": the client made no progress";
    std::string leader_db = leader_with(1);
    ASSERT_FALSE(leader_db.empty()) << "cycle " << cycle << ": no primary with an in-sync follower";
    {
      // A checkpoint flushes the primary's memtables: its log files become old ones.
      auto direct = ConnectSessionStore(PrimaryNow(**etcd).first);
      if (direct.ok()) (void)(*direct)->Checkpoint(dir_.Sub("flush-" + std::to_string(flushes++)));
    }
    if (cycle % 2 == 1) {
      // A follower's process crashes and comes back on its directory.
      const std::string db = a_follower_of(leader_db);
      kill(db);
      ASSERT_TRUE(add_member(db)) << "cycle " << cycle;
      ++follower_crashes;
      ASSERT_TRUE(await_acks(3)) << "cycle " << cycle;
    }
    if (cycle % 4 == 3) {
      // A follower's machine is lost; a new member takes its place and catches up.
      const std::string db = a_follower_of(leader_db);
      kill(db);
      members.erase(db);
      std::filesystem::remove_all(db);
      ASSERT_TRUE(add_member()) << "cycle " << cycle;
      ++follower_losses;
      ASSERT_EQ(leader_with(2), leader_db) << "cycle " << cycle << ": the new member did not get in sync";
    }
    // The primary's machine is lost.
    const auto killed = std::chrono::steady_clock::now();
    kill(leader_db);
    members.erase(leader_db);
    std::filesystem::remove_all(leader_db);
    const bool etcd_restart = cycle % 3 == 2;
    if (etcd_restart) {
      // ... and etcd crashes during the failover, and comes back on its data.
      etcd_->Kill();
      std::this_thread::sleep_for(milliseconds(500));
      ASSERT_TRUE(etcd_->Start()) << "cycle " << cycle << ": etcd did not come back";
      ++etcd_restarts;
    }
    ASSERT_TRUE(add_member()) << "cycle " << cycle;
    auto next = await_acks(1);
    ASSERT_TRUE(next) << "cycle " << cycle << ": no write was acknowledged after the failover";
    (etcd_restart ? failover_etcd_ms : failover_ms)
        .push_back(std::chrono::duration<double, std::milli>(*next - killed).count());
  }
  stop = true;
  writer.join();
  std::map<uint64_t, std::string> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    all = acknowledged;
  }
  ExpectExactly(**client, id, all);
  for (auto& [db, proc] : members) count_seeds(*proc);
  std::sort(failover_ms.begin(), failover_ms.end());
  std::sort(failover_etcd_ms.begin(), failover_etcd_ms.end());
  std::printf("%d cycles, %zu acknowledged writes, %d follower crashes, %d follower machines lost, %d etcd restarts, "
              "%d members seeded from a checkpoint\n",
              cycles, all.size(), follower_crashes, follower_losses, etcd_restarts, seeds);
  if (!failover_ms.empty()) {
    std::printf("failover (3 members, primary lease 2 s), kill to next acknowledged write over %zu: p50 %.0f ms, "
                "max %.0f ms\n",
                failover_ms.size(), failover_ms[failover_ms.size() / 2], failover_ms.back());
  }
  if (!failover_etcd_ms.empty()) {
    std::printf("the same with etcd killed and restarted during the failover, over %zu: p50 %.0f ms, max %.0f ms\n",
                failover_etcd_ms.size(), failover_etcd_ms[failover_etcd_ms.size() / 2], failover_etcd_ms.back());
  }
}


// Members on machines of a private network (private_network.h), etcd and the client on
// the test's own address there; a machine's link is cut and healed while a client writes.
class PartitionedShardTest : public ReplicatedShardTest {
 protected:
  void SetUp() override {
    if (!kNoPrivateNetwork.empty()) GTEST_SKIP() << "no private network: " << kNoPrivateNetwork;
    net_ = std::make_unique<test::PrivateNetwork>();
    ASSERT_TRUE(net_->ok()) << "could not make the private network's bridge";
    etcd_host_ = test::PrivateNetwork::host();
    ReplicatedShardTest::SetUp();
  }
  // A member of shard s1 on a new machine; *machine is the machine's number.
  std::unique_ptr<testing::Subprocess> MemberOnMachine(const std::string& db, std::vector<std::string> extra,
                                                       int* machine) {
    if (*machine < 0) *machine = net_->AddMachine();
    if (*machine < 0) return nullptr;
    extra.push_back("--insecure");  // plain gRPC on the private network
    return MemberWith(net_->On(*machine, {}), test::PrivateNetwork::Address(*machine), db, std::move(extra),
                      nullptr);
  }
  // A client appending one event after another to `id`, each retried with its key
  // until acknowledged.
  class Writer {
   public:
    Writer(PartitionedShardTest* test, SessionStore* store, std::string id) {
      thread_ = std::thread([=, this] {
        for (int i = 0; !stop_; ++i) {
          const std::string text = "w-" + std::to_string(i);
          const uint64_t seq = test->AppendThroughFailover(*store, id, text);
          if (seq == 0) return;
          std::lock_guard<std::mutex> lock(mu_);
          acknowledged_[seq] = text;
        }
      });
    }
    ~Writer() { Stop(); }
    // Waits until `n` more writes are acknowledged; false after a minute.
    bool Await(size_t n) {
      const size_t from = Count();
      for (int i = 0; i < 2400 && Count() < from + n; ++i) std::this_thread::sleep_for(milliseconds(25));
      return Count() >= from + n;
    }
    // Stops writing; every write acknowledged, by sequence number.
    std::map<uint64_t, std::string> Stop() {
      stop_ = true;
      if (thread_.joinable()) thread_.join();
      std::lock_guard<std::mutex> lock(mu_);
      return acknowledged_;
    }

   private:
    size_t Count() {
      std::lock_guard<std::mutex> lock(mu_);
      return acknowledged_.size();
    }
    std::mutex mu_;
    std::map<uint64_t, std::string> acknowledged_;  // guarded by mu_
    std::atomic<bool> stop_{false};
    std::thread thread_;
  };
  // The primary's status once `pred` holds for it; nullopt after a minute.
  template <typename Pred>
  std::optional<v1::ReplicationStatus> AwaitStatus(coord::EtcdClient& etcd, Pred pred) {
    for (int i = 0; i < 1200; ++i) {
      const std::string address = PrimaryNow(etcd).first;
      auto st = address.empty() ? std::nullopt : StatusOf(address);
      if (st && pred(*st)) return st;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return std::nullopt;
  }
  static int InSync(const v1::ReplicationStatus& st) {
    int n = 0;
    for (const auto& f : st.followers()) n += f.in_sync() ? 1 : 0;
    return n;
  }
  // A session on the shard, through the shard map.
  void Connect(std::string* id) {
    RemoteOptions lazy;
    lazy.wait_for_server = false;
    auto client = ConnectShardedSessionStore(etcd_->endpoint(), lazy);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto meta = client_->CreateSession(test::CreateOf("acme", "partition"));
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    *id = meta->id();
  }
  std::unique_ptr<test::PrivateNetwork> net_;
};

// The primary's machine is cut off from everyone (etcd, its followers, the client) while
// the client writes: a follower leads, the writes go on; healed, the old primary finds
// its term gone, ends, and started again on its directory rejoins as a follower. Every
// acknowledged write is on the shard once, in order: the cut-off primary acknowledged
// nothing after its lease could have passed to another.
TEST_F(PartitionedShardTest, APrimaryCutOffFromEveryoneIsReplacedAndRejoinsAsAFollowerOnceHealed) {
  int ma = -1, mb = -1, mc = -1;
  a_ = MemberOnMachine(a_dir_, {}, &ma);
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = MemberOnMachine(b_dir_, {}, &mb);
  auto c = MemberOnMachine(dir_.Sub("c"), {}, &mc);
  ASSERT_TRUE(b_ != nullptr && c != nullptr);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(Connect(&id));
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  const std::string a_address = PrimaryNow(**etcd).first;
  ASSERT_EQ(a_address.rfind(test::PrivateNetwork::Address(ma) + ":", 0), 0u) << a_address;

  Writer writer(this, client_.get(), id);
  ASSERT_TRUE(writer.Await(10)) << "no writes before the partition";
  ASSERT_TRUE(net_->Cut(ma));
  auto led = AwaitStatus(**etcd, [&](const v1::ReplicationStatus&) { return PrimaryNow(**etcd).first != a_address; });
  EXPECT_TRUE(led.has_value()) << "no follower took over from the cut-off primary";
  EXPECT_TRUE(writer.Await(10)) << "no writes after the failover";
  ASSERT_TRUE(net_->Heal(ma));
  const std::optional<int> status = a_->WaitFor(seconds(60));
  if (!status) {
    std::string log;
    while (auto line = a_->ReadLine(milliseconds(1))) log += *line + "\n";
    FAIL() << "the deposed primary did not end once it could see its term gone; its log:\n" << log;
  }
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << "a deposed primary ends with status 3";
  a_ = MemberOnMachine(a_dir_, {}, &ma);
  ASSERT_NE(a_, nullptr);
  EXPECT_TRUE(a_->WaitForLine("following the primary", seconds(30))) << "the old primary did not rejoin";
  EXPECT_TRUE(writer.Await(10)) << "no writes after the partition healed";
  EXPECT_TRUE(AwaitStatus(**etcd, [](const v1::ReplicationStatus& st) { return InSync(st) == 2; }))
      << "the new primary does not have both others in sync";
  ExpectExactly(*client_, id, writer.Stop());
}

// A shard of two that may degrade: its follower's machine is cut off (its stream stays
// open, silent). The primary finds the follower stalled, acknowledges alone (degraded),
// and once the link is back the follower catches up and is in sync again, without a
// restart of either.
TEST_F(PartitionedShardTest, ASilentlyCutOffFollowerIsDroppedFromSyncAndCatchesUpWhenHealed) {
  int ma = -1, mb = -1;
  const std::vector<std::string> degrade{"--when-no-follower", "degrade", "--follower-timeout-ms", "1000"};
  a_ = MemberOnMachine(a_dir_, degrade, &ma);
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = MemberOnMachine(b_dir_, degrade, &mb);
  ASSERT_NE(b_, nullptr);
  ASSERT_TRUE(b_->WaitForLine("following the primary", seconds(20)));
  std::string id;
  ASSERT_NO_FATAL_FAILURE(Connect(&id));
  auto etcd = coord::EtcdClient::Connect(etcd_->endpoint());
  ASSERT_TRUE(etcd.ok());
  ASSERT_TRUE(AwaitStatus(**etcd, [](const v1::ReplicationStatus& st) { return InSync(st) == 1; }));

  Writer writer(this, client_.get(), id);
  ASSERT_TRUE(writer.Await(10));
  ASSERT_TRUE(net_->Cut(mb));
  EXPECT_TRUE(writer.Await(20)) << "a primary that may degrade stopped acknowledging when its follower went silent";
  EXPECT_TRUE(a_->WaitForLine("synced nothing for", seconds(1))) << "the stalled follower was not named";
  auto alone = AwaitStatus(**etcd, [](const v1::ReplicationStatus& st) { return InSync(st) == 0; });
  EXPECT_TRUE(alone.has_value()) << "the silent follower is still counted in sync";
  ASSERT_TRUE(net_->Heal(mb));
  auto caught_up = AwaitStatus(**etcd, [](const v1::ReplicationStatus& st) { return InSync(st) == 1; });
  ASSERT_TRUE(caught_up.has_value()) << "the follower did not get back in sync after the partition healed";
  EXPECT_TRUE(writer.Await(10));
  const auto acknowledged = writer.Stop();
  // Everything acknowledged is on the follower too, once it has synced the log's end.
  auto synced_all = AwaitStatus(**etcd, [](const v1::ReplicationStatus& st) {
    return InSync(st) == 1 && st.followers(0).synced_sequence() >= st.latest_sequence();
  });
  EXPECT_TRUE(synced_all.has_value()) << "the follower did not sync the log's end";
  ExpectExactly(*client_, id, acknowledged);
}

// A shard of two that blocks writes without a follower: with the follower's machine cut
// off a write is answered unavailable (kept on the primary, not acknowledged); once the
// link is back, its retry with the same key returns it, once.
TEST_F(PartitionedShardTest, ABlockingShardHoldsWritesWhileItsFollowerIsCutOffAndTakesTheirRetriesAfter) {
  int ma = -1, mb = -1;
  const std::vector<std::string> block{"--follower-timeout-ms", "500"};
  a_ = MemberOnMachine(a_dir_, block, &ma);
  ASSERT_NE(a_, nullptr);
  ASSERT_TRUE(a_->WaitForLine("primary at term", seconds(20)));
  b_ = MemberOnMachine(b_dir_, block, &mb);
  ASSERT_NE(b_, nullptr);
  ASSERT_TRUE(b_->WaitForLine("following the primary", seconds(20)));
  std::string id;
  ASSERT_NO_FATAL_FAILURE(Connect(&id));
  for (int i = 0; i < 5; ++i) ASSERT_NE(AppendThroughFailover(*client_, id, "before-" + std::to_string(i)), 0u);

  ASSERT_TRUE(net_->Cut(mb));
  auto held = client_->Append(AppendOf(id, 7, 0, {"held"}, "key-held"));
  ASSERT_FALSE(held.ok()) << "a write was acknowledged with the only follower cut off";
  EXPECT_EQ(held.status().code(), StatusCode::kUnavailable) << held.status().ToString();
  ASSERT_TRUE(net_->Heal(mb));
  const auto give_up = std::chrono::steady_clock::now() + seconds(60);
  Result<v1::AppendResponse> retried = held;
  while (!retried.ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(100));
    retried = client_->Append(AppendOf(id, 7, 0, {"held"}, "key-held"));
  }
  ASSERT_TRUE(retried.ok()) << "the retry was not taken after the partition healed: " << retried.status().ToString();
  EXPECT_EQ(retried->first_seq(), 7u);
  auto events = AllEvents(*client_, id);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events_size(), 7) << "the session, the five before, and the held write once";
  EXPECT_EQ(events->events(6).user_message().text(), "held");
}

}  // namespace
}  // namespace sinew::store
