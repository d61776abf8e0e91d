// A replicated shard as real processes on loopback: a sinew-store primary, a follower
// (`sinew-store --follow`), clients through gRPC. What a client was told is written must
// be on the follower's disk, so that the shard survives the loss of the primary's
// machine: the tests delete the primary's directory and open the follower's.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <thread>

#include "sinew/grpc_tls.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::AllEvents;
using test::AppendOf;

std::unique_ptr<testing::Subprocess> StartStore(std::vector<std::string> args, const std::string& ready,
                                                std::string* address = nullptr) {
  args.insert(args.begin(), testing::BinaryPath("sinew-store"));
  auto proc = std::make_unique<testing::Subprocess>(args);
  auto line = proc->WaitForLine(ready, seconds(20));
  if (!line) return nullptr;
  if (address != nullptr) *address = line->substr(line->rfind(' ') + 1);
  return proc;
}

class ReplicationTest : public ::testing::Test {
 protected:
  void StartPrimary(const std::string& mode, const std::string& extra_flag = "") {
    std::vector<std::string> args{"--db", primary_dir_, "--listen", "127.0.0.1:0", "--replication", mode};
    if (!extra_flag.empty()) args.push_back(extra_flag);
    primary_ = StartStore(args, "listening on", &primary_address_);
    ASSERT_NE(primary_, nullptr) << "the primary did not start";
    auto client = ConnectSessionStore(primary_address_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    auto channel = GrpcChannel(primary_address_, {});
    ASSERT_TRUE(channel.ok());
    replication_ = v1::StoreReplication::NewStub(*channel);
  }
  void StartFollower() {
    follower_ = StartStore({"--db", follower_dir_, "--follow", primary_address_, "--follower-name", "f1"},
                           "following");
    ASSERT_NE(follower_, nullptr) << "the follower did not start";
  }
  v1::ReplicationStatus ReplicationStatus() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    v1::ReplicationStatus out;
    grpc::Status s = replication_->GetReplicationStatus(&ctx, {}, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  // Waits until the follower has synced everything the primary wrote.
  void AwaitCaughtUp() {
    for (int i = 0; i < 3000; ++i) {
      auto st = ReplicationStatus();
      if (st.followers_size() == 1 && st.followers(0).synced_sequence() == st.latest_sequence()) return;
      std::this_thread::sleep_for(milliseconds(10));
    }
    FAIL() << "the follower did not catch up: " << ReplicationStatus().ShortDebugString();
  }
  // The primary's machine is lost: its process and its directory.
  void LosePrimary() {
    client_.reset();
    primary_->Signal(SIGKILL);
    primary_->Wait();
    std::filesystem::remove_all(primary_dir_);
  }
  // The follower's directory opened as a store on its own (what a promotion serves).
  std::unique_ptr<SessionStore> OpenFollowerCopy() {
    follower_->Signal(SIGKILL);
    follower_->Wait();
    auto copy = OpenSessionStore(follower_dir_, StoreOptions{});
    EXPECT_TRUE(copy.ok()) << copy.status().ToString();
    return copy.ok() ? std::move(*copy) : nullptr;
  }

  testing::TempDir dir_;
  const std::string primary_dir_ = dir_.Sub("primary");
  const std::string follower_dir_ = dir_.Sub("follower");
  std::unique_ptr<testing::Subprocess> primary_, follower_;
  std::string primary_address_;
  std::unique_ptr<SessionStore> client_;
  std::unique_ptr<v1::StoreReplication::Stub> replication_;
};

TEST_F(ReplicationTest, EveryAcknowledgedWriteIsOnTheFollowerWhenThePrimaryAndItsDiskAreLost) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync"));
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  std::vector<std::string> ids;
  for (int s = 0; s < 4; ++s) {
    auto meta = client_->CreateSession(test::CreateOf("acme", "replicated " + std::to_string(s)));
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    ids.push_back(meta->id());
  }
  // Writers on every session at once; each keeps what it was told is written.
  std::mutex mu;
  std::map<std::pair<std::string, uint64_t>, std::string> acknowledged;
  std::vector<std::thread> writers;
  for (const auto& id : ids) {
    writers.emplace_back([&, id] {
      uint64_t next = 2;
      for (int i = 0; i < 40; ++i) {
        const std::string text = id + "/" + std::to_string(i);
        auto r = client_->Append(AppendOf(id, next, 0, {text}, "k" + std::to_string(i)));
        if (!r.ok()) continue;
        std::lock_guard<std::mutex> lock(mu);
        acknowledged[{id, r->first_seq()}] = text;
        next = r->last_seq() + 1;
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_EQ(acknowledged.size(), 160u) << "every append had a follower to acknowledge it";
  // Both machines go down the moment the last write is acknowledged, the follower first:
  // nothing acknowledged may still be on its way.
  follower_->Signal(SIGKILL);
  LosePrimary();
  auto copy = OpenFollowerCopy();
  ASSERT_NE(copy, nullptr);
  for (const auto& id : ids) {
    auto events = AllEvents(*copy, id);
    ASSERT_TRUE(events.ok()) << id << ": " << events.status().ToString();
    ASSERT_EQ(events->events_size(), 41) << id;
    for (int i = 0; i < events->events_size(); ++i) EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(copy->GetSession(id)->next_seq(), 42u);
  }
  for (const auto& [where, text] : acknowledged) {
    v1::GetEventsRequest req;
    req.set_session_id(where.first);
    req.set_from_seq(where.second);
    req.set_limit(1);
    auto got = copy->GetEvents(req);
    ASSERT_TRUE(got.ok() && got->events_size() == 1) << where.first << " " << where.second;
    EXPECT_EQ(got->events(0).user_message().text(), text);
  }
  // The copy is a store like any other: it takes the next write.
  EXPECT_TRUE(copy->Append(AppendOf(ids[0], 42, 0, {"after the failover"})).ok());
}

TEST_F(ReplicationTest, WithNoFollowerASyncWriteFailsAndItsRetryReturnsItOnceOneHasIt) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync", "--follower-timeout-ms=300"));
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  auto meta = client_->CreateSession(test::CreateOf("acme", "waits"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  follower_->Signal(SIGKILL);
  follower_->Wait();
  auto alone = client_->Append(AppendOf(meta->id(), 2, 0, {"while alone"}, "key-1"));
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kUnavailable) << alone.status().ToString();
  EXPECT_NE(alone.status().message().find("retry"), std::string::npos) << alone.status().message();
  // The follower comes back, catches up from where it stopped; the retry is acknowledged
  // as the same write, not a second one.
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  auto retried = client_->Append(AppendOf(meta->id(), 2, 0, {"while alone"}, "key-1"));
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_TRUE(retried->deduplicated());
  EXPECT_EQ(retried->first_seq(), 2u);
  LosePrimary();
  auto copy = OpenFollowerCopy();
  ASSERT_NE(copy, nullptr);
  auto events = AllEvents(*copy, meta->id());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).user_message().text(), "while alone");
}

TEST_F(ReplicationTest, AnAsyncPrimaryAcknowledgesAloneAndANewFollowerCatchesUpFromTheStart) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("async"));
  auto meta = client_->CreateSession(test::CreateOf("acme", "async"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  for (uint64_t seq = 2; seq < 52; ++seq) {
    ASSERT_TRUE(client_->Append(AppendOf(meta->id(), seq, 0, {"e" + std::to_string(seq)})).ok());
  }
  auto before = ReplicationStatus();
  EXPECT_EQ(before.mode(), "async");
  EXPECT_EQ(before.followers_size(), 0);
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp());
  auto primary_events = AllEvents(*client_, meta->id());
  ASSERT_TRUE(primary_events.ok());
  LosePrimary();
  auto copy = OpenFollowerCopy();
  ASSERT_NE(copy, nullptr);
  auto events = AllEvents(*copy, meta->id());
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->SerializeAsString(), primary_events->SerializeAsString());
}

// A stream reads on in the primary's log where it stopped; each checkpoint flushes the
// memtables and so starts a new log file, which the stream must find on its own.
TEST_F(ReplicationTest, AFollowerGetsEveryWriteAcrossThePrimarysNewLogFiles) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync"));
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  auto meta = client_->CreateSession(test::CreateOf("acme", "log files"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  uint64_t seq = 2;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 25; ++i, ++seq) {
      auto r = client_->Append(AppendOf(meta->id(), seq, 0, {"e" + std::to_string(seq)}));
      ASSERT_TRUE(r.ok()) << "round " << round << ": " << r.status().ToString();
    }
    ASSERT_TRUE(client_->Checkpoint(dir_.Sub("checkpoint-" + std::to_string(round))).ok());
  }
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp());
  auto primary_events = AllEvents(*client_, meta->id());
  ASSERT_TRUE(primary_events.ok());
  ASSERT_EQ(primary_events->events_size(), 101);
  LosePrimary();
  auto copy = OpenFollowerCopy();
  ASSERT_NE(copy, nullptr);
  auto events = AllEvents(*copy, meta->id());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_EQ(events->SerializeAsString(), primary_events->SerializeAsString());
}

TEST_F(ReplicationTest, ASyncPrimaryThatMayDegradeAcknowledgesAloneAndWaitsAgainOnceAFollowerIsBack) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync", "--when-no-follower=degrade"));
  auto meta = client_->CreateSession(test::CreateOf("acme", "degraded"));
  ASSERT_TRUE(meta.ok()) << "alone, a degraded primary acknowledges: " << meta.status().ToString();
  ASSERT_TRUE(client_->Append(AppendOf(meta->id(), 2, 0, {"alone"})).ok());
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp());
  ASSERT_TRUE(client_->Append(AppendOf(meta->id(), 3, 0, {"with a follower"})).ok());
  // With the follower back, an acknowledged write is on it even if both go at once.
  follower_->Signal(SIGKILL);
  LosePrimary();
  auto copy = OpenFollowerCopy();
  ASSERT_NE(copy, nullptr);
  auto events = AllEvents(*copy, meta->id());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 3);
  EXPECT_EQ(events->events(2).user_message().text(), "with a follower");
}

TEST_F(ReplicationTest, AStreamThatDoesNotStartWithStartIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("async"));
  for (uint64_t from : {uint64_t{0}, uint64_t{1}}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto stream = replication_->Replicate(&ctx);
    v1::ReplicationAck first;
    if (from == 0) {
      first.mutable_start()->set_follower("bad");  // from_sequence 0
    } else {
      first.set_synced_sequence(7);  // an ack before any start
    }
    ASSERT_TRUE(stream->Write(first));
    stream->WritesDone();
    v1::ReplicatedBatch batch;
    EXPECT_FALSE(stream->Read(&batch));
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
  }
  EXPECT_EQ(ReplicationStatus().followers_size(), 0) << "a refused stream left a follower behind";
}

}  // namespace
}  // namespace sinew::store
