// sinew-store as a real process on loopback, used through gRPC by the remote client.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using std::chrono::milliseconds;
using test::AllEvents;
using test::AppendOf;
using test::StoreServer;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<StoreServer>(dir_.Sub("db"));
    ASSERT_FALSE(server_->address().empty()) << "sinew-store did not start";
    auto c = ConnectSessionStore(server_->address());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }
  testing::TempDir dir_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<SessionStore> client_;
};

TEST_F(ServerTest, CreateAppendReadWatchThroughGrpc) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "remote"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  auto watcher = client_->Watch(meta->id(), 1);
  ASSERT_TRUE(watcher.ok());
  v1::Event ev;
  ASSERT_TRUE(*(*watcher)->Next(&ev, std::chrono::seconds(10)));
  EXPECT_EQ(ev.type(), "session_created");

  // A second client appends; the first client's watch sees it.
  auto other = ConnectSessionStore(server_->address());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Append(AppendOf(meta->id(), 2, 0, {"hello"})).ok());
  auto got = (*watcher)->Next(&ev, std::chrono::seconds(10));
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(ev.user_message().text(), "hello");
  EXPECT_EQ(ev.seq(), 2u);
  auto events = AllEvents(*client_, meta->id());
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->events_size(), 2);
  v1::ListSessionsRequest list;
  list.set_tenant("acme");
  EXPECT_EQ(client_->ListSessions(list)->sessions_size(), 1);
}

// The remote watcher reads through gRPC's callback API; a second client appends.
TEST_F(ServerTest, OnReadyCallsBackOnAnotherClientsAppend) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "ready"));
  ASSERT_TRUE(meta.ok());
  auto other = ConnectSessionStore(server_->address());
  ASSERT_TRUE(other.ok());
  test::CheckOnReady(*client_, **other, meta->id(), 2);
}

TEST_F(ServerTest, ErrorsKeepTheirCodesAcrossTheWire) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "x"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(client_->GetSession(std::string(32, 'f')).status().code(), StatusCode::kNotFound);
  auto malformed = client_->GetSession("nope");
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("malformed session id"), std::string::npos);
  EXPECT_EQ(client_->Append(AppendOf(meta->id(), 5, 0, {"x"})).status().code(),
            StatusCode::kFailedPrecondition);
  // A 4 MiB+ event passes gRPC's size limits and is refused by the store's own limit.
  auto big = client_->Append(AppendOf(meta->id(), 2, 0, {std::string((4u << 20) + 10, 'x')}));
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument) << big.status().ToString();
  EXPECT_EQ(AllEvents(*client_, meta->id())->events_size(), 1);
  auto down = ConnectSessionStore("127.0.0.1:1", RemoteOptions{milliseconds(1000),
                                                              milliseconds(300)});
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("is sinew-store running"), std::string::npos);
}

// Two writers with different lease epochs: the stale one is refused, the log unchanged.
TEST_F(ServerTest, StaleWriterIsFencedOut) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "fencing"));
  ASSERT_TRUE(meta.ok());
  const std::string id = meta->id();
  auto writer_b = ConnectSessionStore(server_->address());
  ASSERT_TRUE(writer_b.ok());

  auto lease_a = client_->AcquireLease(id, {"writer-a", ""}, milliseconds(200));
  ASSERT_TRUE(lease_a.ok());
  ASSERT_TRUE(client_->Append(AppendOf(id, 2, lease_a->epoch(), {"a1"})).ok());
  std::this_thread::sleep_for(milliseconds(300));  // writer A stalls past its lease
  auto lease_b = (*writer_b)->AcquireLease(id, {"writer-b", ""}, milliseconds(60000));
  ASSERT_TRUE(lease_b.ok());
  ASSERT_GT(lease_b->epoch(), lease_a->epoch());
  ASSERT_TRUE((*writer_b)->Append(AppendOf(id, 3, lease_b->epoch(), {"b1"})).ok());

  auto before = AllEvents(*client_, id);
  ASSERT_TRUE(before.ok());
  // The zombie writes with its old epoch and the correct next seq: refused.
  auto zombie = client_->Append(AppendOf(id, 4, lease_a->epoch(), {"zombie"}));
  ASSERT_FALSE(zombie.ok());
  EXPECT_EQ(zombie.status().code(), StatusCode::kAborted);
  EXPECT_NE(zombie.status().message().find("fenced out"), std::string::npos);
  auto after = AllEvents(*client_, id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->SerializeAsString(), before->SerializeAsString());
}

TEST_F(ServerTest, DataSurvivesServerKillAndRestart) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "restart"));
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE(client_->Append(AppendOf(meta->id(), 2, 0, {"durable"})).ok());
  server_->process().Signal(SIGKILL);
  server_->process().Wait();
  client_.reset();
  server_ = std::make_unique<StoreServer>(dir_.Sub("db"));
  ASSERT_FALSE(server_->address().empty());
  auto c = ConnectSessionStore(server_->address());
  ASSERT_TRUE(c.ok());
  auto events = AllEvents(**c, meta->id());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).user_message().text(), "durable");
}

// A client whose server was SIGKILLed and restarted on the same directory and port
// reaches it with its first call after the server listens again, however long the
// server was down and however often the client called meanwhile (a channel in reconnect
// backoff would refuse that call without trying).
TEST_F(ServerTest, AClientReachesARestartedServerWithItsFirstCallOnceItListens) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "restart"));
  ASSERT_TRUE(meta.ok());
  const std::string address = server_->address();
  server_->process().Signal(SIGKILL);
  server_->process().Wait();
  // Down for 3 s, called every 100 ms: each call fails UNAVAILABLE.
  const auto up_at = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < up_at) {
    EXPECT_EQ(client_->GetSession(meta->id()).status().code(), StatusCode::kUnavailable);
    std::this_thread::sleep_for(milliseconds(100));
  }
  testing::Subprocess restarted(
      {testing::BinaryPath("sinew-store"), "--db", dir_.Sub("db"), "--listen", address});
  ASSERT_TRUE(restarted.WaitForLine("listening on", std::chrono::seconds(20)).has_value());
  auto again = client_->GetSession(meta->id());
  EXPECT_TRUE(again.ok()) << "the first call after the restart: " << again.status().ToString();
  EXPECT_TRUE(client_->Append(AppendOf(meta->id(), 2, 0, {"after the restart"})).ok());
}

// The tenant audit log through gRPC: records per tenant, oldest first, paged, apart from
// the sessions' logs, their ids still rising after a restart; bad requests refused.
TEST_F(ServerTest, TheTenantAuditLogKeepsItsOrderAcrossARestart) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "audited"));
  ASSERT_TRUE(meta.ok());
  auto record = [&](SessionStore& store, const std::string& tenant, const std::string& detail) {
    v1::AppendAuditRequest req;
    req.set_session_id(meta->id());
    req.mutable_audit()->set_tenant(tenant);
    req.mutable_audit()->set_action("export");
    req.mutable_audit()->set_detail(detail);
    return store.AppendAudit(req);
  };
  auto list = [&](SessionStore& store, const std::string& tenant, uint32_t page_size, const std::string& token) {
    v1::ListAuditRequest req;
    req.set_tenant(tenant);
    req.set_page_size(page_size);
    req.set_page_token(token);
    return store.ListAudit(req);
  };
  for (const char* d : {"one", "two", "three"}) ASSERT_TRUE(record(*client_, "acme", d).ok());
  ASSERT_TRUE(record(*client_, "other", "theirs").ok());
  // Two pages of acme's: oldest first, nothing of other's.
  auto first = list(*client_, "acme", 2, "");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->records_size(), 2);
  EXPECT_EQ(first->records(0).audit().detail(), "one");
  EXPECT_EQ(first->records(1).audit().detail(), "two");
  EXPECT_EQ(first->records(0).session_id(), meta->id());
  ASSERT_FALSE(first->next_page_token().empty());
  auto second = list(*client_, "acme", 2, first->next_page_token());
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->records_size(), 1);
  EXPECT_EQ(second->records(0).audit().detail(), "three");
  EXPECT_TRUE(second->next_page_token().empty());
  const std::string last_id = second->records(0).id();
  EXPECT_LT(first->records(1).id(), last_id);
  // The session's own log is untouched.
  EXPECT_EQ(AllEvents(*client_, meta->id())->events_size(), 1);

  server_->process().Signal(SIGKILL);
  server_->process().Wait();
  client_.reset();
  server_ = std::make_unique<StoreServer>(dir_.Sub("db"));
  ASSERT_FALSE(server_->address().empty());
  auto c = ConnectSessionStore(server_->address());
  ASSERT_TRUE(c.ok());
  auto fourth = record(**c, "acme", "four");
  ASSERT_TRUE(fourth.ok()) << fourth.status().ToString();
  EXPECT_GT(fourth->id(), last_id);
  // Continuing after the last record read finds exactly the new one.
  auto after = list(**c, "acme", 10, last_id);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->records_size(), 1);
  EXPECT_EQ(after->records(0).audit().detail(), "four");
  EXPECT_EQ(list(**c, "other", 10, "")->records_size(), 1);

  EXPECT_EQ(record(**c, "", "x").status().code(), StatusCode::kInvalidArgument);
  v1::AppendAuditRequest bad_id;
  bad_id.set_session_id("nope");
  bad_id.mutable_audit()->set_tenant("acme");
  bad_id.mutable_audit()->set_action("export");
  EXPECT_EQ((*c)->AppendAudit(bad_id).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(list(**c, "acme", 10, "zz").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(list(**c, "", 10, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(list(**c, "acme", 5000, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(list(**c, "acme", 100, "")->records_size(), 4);
}

TEST_F(ServerTest, CheckpointThroughServer) {
  auto meta = client_->CreateSession(test::CreateOf("acme", "backup"));
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE(client_->Checkpoint(dir_.Sub("backup")).ok());
  auto copy = OpenSessionStore(dir_.Sub("backup"), {});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->GetSession(meta->id())->id(), meta->id());
}

TEST(ServerStartTest, UnusableDirectoryExitsWithError) {
  testing::TempDir dir;
  std::string file = dir.Sub("plainfile");
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  testing::Subprocess proc(
      {testing::BinaryPath("sinew-store"), "--db", file + "/db", "--listen", "127.0.0.1:0"});
  int status = proc.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace sinew::store
