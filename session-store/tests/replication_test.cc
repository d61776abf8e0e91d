// A replicated shard as real processes on loopback: a sinew-store primary, a follower
// (`sinew-store --follow`), clients through gRPC. What a client was told is written must
// be on the follower's disk, so that the shard survives the loss of the primary's
// machine: the tests delete the primary's directory and open the follower's.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
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
  void StartPrimary(const std::string& mode, const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> args{"--db", primary_dir_, "--listen", "127.0.0.1:0", "--replication", mode};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
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
  // Whether the primary still serves its log from sequence 1 (a new follower's start).
  bool LogStartsAtOne() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    auto stream = replication_->Replicate(&ctx);
    v1::ReplicationAck start;
    start.mutable_start()->set_follower("probe");
    start.mutable_start()->set_from_sequence(1);
    v1::ReplicatedBatch batch;
    const bool got = stream->Write(start) && stream->Read(&batch);
    EXPECT_TRUE(got) << "the primary answered no batch and did not say why";
    ctx.TryCancel();
    (void)stream->Finish();
    return got && batch.seed_needed().empty();
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
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync", {"--follower-timeout-ms=300"}));
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
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync", {"--when-no-follower=degrade"}));
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

// A follower that is connected but has not yet synced what the primary had written when
// its stream began is not in sync: its fsyncs do not acknowledge writes, so a primary that
// may degrade acknowledges alone meanwhile rather than failing writes.
TEST_F(ReplicationTest, ADegradedPrimaryAcknowledgesAloneWhileItsOnlyFollowerIsStillCatchingUp) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("sync", {"--when-no-follower=degrade", "--follower-timeout-ms=300"}));
  auto meta = client_->CreateSession(test::CreateOf("acme", "catching up"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  // A follower that starts from the beginning and never acknowledges anything.
  grpc::ClientContext ctx;
  auto stream = replication_->Replicate(&ctx);
  v1::ReplicationAck start;
  start.mutable_start()->set_follower("slow");
  start.mutable_start()->set_from_sequence(1);
  v1::ReplicatedBatch batch;
  ASSERT_TRUE(stream->Write(start) && stream->Read(&batch));
  auto st = ReplicationStatus();
  ASSERT_EQ(st.followers_size(), 1);
  EXPECT_FALSE(st.followers(0).in_sync());
  auto r = client_->Append(AppendOf(meta->id(), 2, 0, {"while the follower catches up"}));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  ctx.TryCancel();
  (void)stream->Finish();
}

// A primary keeps its write-ahead log for --wal-ttl-seconds; a follower that needs older
// batches (a new one with an empty directory, or one that was away too long) is seeded
// from a checkpoint of the primary and then streams from the checkpoint's end.
TEST_F(ReplicationTest, AFollowerThePrimarysLogNoLongerCoversIsSeededFromACheckpoint) {
  ASSERT_NO_FATAL_FAILURE(StartPrimary("async", {"--wal-ttl-seconds=1"}));
  auto meta = client_->CreateSession(test::CreateOf("acme", "seeded"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  uint64_t next = 2;
  auto append = [&](int n) {
    for (int i = 0; i < n; ++i, ++next) {
      auto r = client_->Append(AppendOf(meta->id(), next, 0, {"e" + std::to_string(next)}));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  };
  ASSERT_NO_FATAL_FAILURE(append(10));
  // A follower holds the first writes, then goes away.
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  ASSERT_NO_FATAL_FAILURE(AwaitCaughtUp());
  follower_->Signal(SIGKILL);
  follower_->Wait();
  // Meanwhile the primary flushes (a checkpoint does) and drops the log past its TTL.
  int flushes = 0;
  while (LogStartsAtOne()) {
    ASSERT_LT(flushes, 300) << "the primary still serves its log from sequence 1";
    ASSERT_NO_FATAL_FAILURE(append(5));
    ASSERT_TRUE(client_->Checkpoint(dir_.Sub("flush-" + std::to_string(flushes++))).ok());
    std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_NO_FATAL_FAILURE(append(10));
  // The follower that was away, and a new one with an empty directory: both are seeded.
  ASSERT_NO_FATAL_FAILURE(StartFollower());
  const std::string new_dir = dir_.Sub("new-follower");
  // (Given with a trailing slash: the seed's scratch space is still beside it.)
  auto fresh = StartStore({"--db", new_dir + "/", "--follow", primary_address_, "--follower-name", "f2"}, "following");
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(follower_->WaitForLine("seeded", seconds(30))) << "the follower that was away was not seeded";
  EXPECT_TRUE(fresh->WaitForLine("seeded", seconds(30))) << "the new follower was not seeded";
  ASSERT_NO_FATAL_FAILURE(append(10));  // streamed after the seed
  for (int i = 0; i < 3000; ++i) {
    auto st = ReplicationStatus();
    if (st.followers_size() == 2 && st.followers(0).synced_sequence() == st.latest_sequence() &&
        st.followers(1).synced_sequence() == st.latest_sequence()) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  auto primary_events = AllEvents(*client_, meta->id());
  ASSERT_TRUE(primary_events.ok());
  ASSERT_EQ(primary_events->events_size(), static_cast<int>(next - 1));
  LosePrimary();
  fresh->Signal(SIGKILL);
  fresh->Wait();
  for (const std::string& copy_dir : {follower_dir_, new_dir}) {
    if (copy_dir == follower_dir_) {
      follower_->Signal(SIGKILL);
      follower_->Wait();
    }
    auto copy = OpenSessionStore(copy_dir, StoreOptions{});
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    auto events = AllEvents(**copy, meta->id());
    ASSERT_TRUE(events.ok()) << copy_dir << ": " << events.status().ToString();
    EXPECT_EQ(events->SerializeAsString(), primary_events->SerializeAsString()) << copy_dir;
  }
  for (const std::string& copy_dir : {follower_dir_, new_dir}) {
    EXPECT_FALSE(std::filesystem::exists(copy_dir + ".seeding")) << "a seed left its scratch directory";
    EXPECT_FALSE(std::filesystem::exists(copy_dir + "/.seeding")) << "a seed left its scratch directory";
  }
}

// A primary that needs its follower seeded and then sends a bad seed: first a file whose
// bytes do not match the manifest's SHA-256, then a manifest naming a file outside the
// directory. The follower refuses both and its directory stays as it was.
class BadSeedPrimary final : public v1::StoreReplication::Service {
 public:
  grpc::Status Replicate(grpc::ServerContext*,
                         grpc::ServerReaderWriter<v1::ReplicatedBatch, v1::ReplicationAck>* stream) override {
    v1::ReplicationAck start;
    if (!stream->Read(&start)) return grpc::Status::OK;
    v1::ReplicatedBatch seed;
    seed.set_seed_needed("this test's primary keeps no log");
    stream->Write(seed);
    return grpc::Status::OK;
  }
  grpc::Status Seed(grpc::ServerContext*, const v1::SeedRequest*, grpc::ServerWriter<v1::SeedChunk>* out) override {
    const bool traversal = seeds_++ % 2 == 1;
    v1::SeedChunk manifest;
    manifest.mutable_manifest()->set_sequence(1);
    auto* file = manifest.mutable_manifest()->add_files();
    file->set_name(traversal ? "../outside" : "CURRENT");
    file->set_size(5);
    file->set_sha256(std::string(32, '\0'));  // not the SHA-256 of the bytes below
    out->Write(manifest);
    v1::SeedChunk data;
    data.mutable_data()->set_file(0);
    data.mutable_data()->set_bytes("abcde");
    out->Write(data);
    return grpc::Status::OK;
  }

 private:
  std::atomic<int> seeds_{0};
};

TEST_F(ReplicationTest, AFollowerRefusesABadSeedAndKeepsItsDirectory) {
  std::string id;
  {
    auto own = OpenSessionStore(follower_dir_, StoreOptions{});
    ASSERT_TRUE(own.ok()) << own.status().ToString();
    auto meta = (*own)->CreateSession(test::CreateOf("acme", "kept"));
    ASSERT_TRUE(meta.ok());
    id = meta->id();
    ASSERT_TRUE((*own)->Append(AppendOf(id, 2, 0, {"mine"})).ok());
  }
  BadSeedPrimary fake;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  follower_ = StartStore({"--db", follower_dir_, "--follow", "127.0.0.1:" + std::to_string(port)}, "following");
  ASSERT_NE(follower_, nullptr);
  EXPECT_TRUE(follower_->WaitForLine("does not match its SHA-256", seconds(30))) << "a corrupt file was taken";
  EXPECT_TRUE(follower_->WaitForLine("unusable file '../outside'", seconds(30))) << "a file outside was taken";
  follower_->Signal(SIGKILL);
  follower_->Wait();
  server->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("outside")));
  EXPECT_FALSE(std::filesystem::exists(follower_dir_ + ".seeding"));
  auto copy = OpenSessionStore(follower_dir_, StoreOptions{});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto events = AllEvents(**copy, id);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).user_message().text(), "mine");
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
