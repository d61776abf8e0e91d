// The embedded store against real RocksDB directories: every operation and error path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"
#include "store_test_util.h"

namespace sinew::store {
namespace {

using test::AllEvents;
using test::AppendOf;
using test::CreateOf;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen(StoreOptions options = {}) {
    store_.reset();
    auto s = OpenSessionStore(dir_.Sub("db"), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  std::string NewSession(const std::string& tenant = "acme") {
    auto s = store_->CreateSession(CreateOf(tenant, "t"));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->id() : "";
  }

  testing::TempDir dir_;
  std::unique_ptr<SessionStore> store_;
};

TEST_F(StoreTest, CreateWritesSessionCreatedAsEventOne) {
  v1::CreateSessionRequest req = CreateOf("acme", "fix the bug");
  (*req.mutable_metadata())["repo"] = "sinew";
  req.set_task_json(R"({"prompt":"hi"})");
  auto meta = store_->CreateSession(req);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->id().size(), 32u);
  EXPECT_EQ(meta->next_seq(), 2u);
  EXPECT_EQ(meta->status(), v1::SESSION_STATUS_QUEUED);
  auto events = AllEvents(*store_, meta->id());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 1);
  const auto& ev = events->events(0);
  EXPECT_EQ(ev.seq(), 1u);
  EXPECT_EQ(ev.type(), "session_created");
  EXPECT_EQ(ev.session_created().tenant(), "acme");
  EXPECT_EQ(ev.session_created().metadata().at("repo"), "sinew");
  EXPECT_EQ(ev.session_created().task_json(), R"({"prompt":"hi"})");
}

TEST_F(StoreTest, ImportKeepsRequestedIdAndCreationTime) {
  v1::CreateSessionRequest req = CreateOf("acme", "imported");
  req.set_session_id("0123456789abcdef0123456789abcdef");
  req.set_created_unix_ms(1700000000000);
  auto meta = store_->CreateSession(req);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->id(), req.session_id());
  EXPECT_EQ(meta->created_unix_ms(), 1700000000000);
  EXPECT_EQ(AllEvents(*store_, meta->id())->events(0).timestamp_unix_ms(), 1700000000000);
  EXPECT_EQ(store_->CreateSession(req).status().code(), StatusCode::kAlreadyExists);
  req.set_session_id("XYZ");
  EXPECT_EQ(store_->CreateSession(req).status().code(), StatusCode::kInvalidArgument);
}

// A sharded client makes the id to find the shard first (routed_session_id): a new
// session, not an import.
TEST_F(StoreTest, ARoutedIdMakesANewSessionUnderThatId) {
  v1::CreateSessionRequest req = CreateOf("acme", "routed");
  req.set_routed_session_id("01a2000000000000abcdef0123456789");
  auto meta = store_->CreateSession(req);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->id(), req.routed_session_id());
  EXPECT_FALSE(meta->imported());
  auto again = store_->CreateSession(req);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("make a new id"), std::string::npos) << again.status().message();
  req.set_session_id("0123456789abcdef0123456789abcdef");
  auto both = store_->CreateSession(req);
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->GetSession(req.session_id()).ok()) << "a refused request leaves no trace";
}

TEST_F(StoreTest, AppendAssignsConsecutiveSequenceNumbers) {
  std::string id = NewSession();
  auto r1 = store_->Append(AppendOf(id, 2, 0, {"a", "b"}));
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->first_seq(), 2u);
  EXPECT_EQ(r1->last_seq(), 3u);
  auto r2 = store_->Append(AppendOf(id, 4, 0, {"c"}));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->first_seq(), 4u);
  auto events = AllEvents(*store_, id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(events->events(i).session_id(), id);
    EXPECT_GT(events->events(i).timestamp_unix_ms(), 0);
  }
  EXPECT_EQ(events->events(3).user_message().text(), "c");
  EXPECT_EQ(events->events(3).type(), "user_message");
  EXPECT_EQ(store_->GetSession(id)->next_seq(), 5u);
}

TEST_F(StoreTest, WrongExpectedSequenceIsRefusedAndWritesNothing) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(AppendOf(id, 2, 0, {"a"})).ok());
  auto stale = store_->Append(AppendOf(id, 2, 0, {"dup"}));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("the next is 3"), std::string::npos);
  auto ahead = store_->Append(AppendOf(id, 9, 0, {"gap"}));
  EXPECT_EQ(ahead.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(AllEvents(*store_, id)->events_size(), 2);
  EXPECT_EQ(store_->GetSession(id)->next_seq(), 3u);
}

TEST_F(StoreTest, IdempotencyKeyReturnsFirstAttemptAndWritesNothingNew) {
  std::string id = NewSession();
  auto first = store_->Append(AppendOf(id, 2, 0, {"a", "b"}, "req-1"));
  ASSERT_TRUE(first.ok());
  // The retry carries the same (now stale) expected seq, as a client whose ack was lost.
  auto retry = store_->Append(AppendOf(id, 2, 0, {"a", "b"}, "req-1"));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->deduplicated());
  EXPECT_EQ(retry->first_seq(), first->first_seq());
  EXPECT_EQ(retry->last_seq(), first->last_seq());
  EXPECT_EQ(AllEvents(*store_, id)->events_size(), 3);
  // Survives a restart.
  Reopen();
  auto after = store_->Append(AppendOf(id, 2, 0, {"a", "b"}, "req-1"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->first_seq(), 2u);
  EXPECT_EQ(AllEvents(*store_, id)->events_size(), 3);
}

TEST_F(StoreTest, BadInputGetsSpecificErrorsAndLeavesLogUnchanged) {
  std::string id = NewSession();
  auto expect_invalid = [&](const v1::AppendRequest& req, const std::string& needle) {
    auto r = store_->Append(req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  v1::AppendRequest empty_event = AppendOf(id, 2, 0, {});
  empty_event.add_events();
  expect_invalid(empty_event, "is empty");
  expect_invalid(AppendOf(id, 2, 0, {}), "no events");
  expect_invalid(AppendOf(id, 0, 0, {"x"}), "expected_next_seq is required");
  expect_invalid(AppendOf(id, 2, 0, {std::string(5u << 20, 'x')}), "over the 4194304-byte limit");
  expect_invalid(AppendOf("not-an-id", 2, 0, {"x"}), "malformed session id");
  v1::AppendRequest created = AppendOf(id, 2, 0, {});
  created.add_events()->mutable_session_created()->set_tenant("x");
  expect_invalid(created, "only CreateSession");
  v1::AppendRequest wrong_seq = AppendOf(id, 2, 0, {"x"});
  wrong_seq.mutable_events(0)->set_seq(7);
  expect_invalid(wrong_seq, "would be stored as 2");
  v1::AppendRequest bad_status = AppendOf(id, 2, 0, {});
  bad_status.add_events()->mutable_status_change()->set_to(static_cast<v1::SessionStatus>(42));
  expect_invalid(bad_status, "status_change.to");

  auto unknown = store_->Append(AppendOf(std::string(32, 'a'), 2, 0, {"x"}));
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetSession(std::string(32, 'b')).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateSession(CreateOf("", "x")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AllEvents(*store_, id)->events_size(), 1);
  EXPECT_EQ(store_->GetSession(id)->next_seq(), 2u);
}

TEST_F(StoreTest, OversizedLimitIsConfigurable) {
  StoreOptions small;
  small.max_event_bytes = 100;
  Reopen(small);
  std::string id = NewSession();
  EXPECT_TRUE(store_->Append(AppendOf(id, 2, 0, {std::string(50, 'x')})).ok());
  EXPECT_EQ(store_->Append(AppendOf(id, 3, 0, {std::string(150, 'x')})).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, UnknownPayloadTypesFromNewerWritersArePreserved) {
  std::string id = NewSession();
  v1::AppendRequest req = AppendOf(id, 2, 0, {});
  v1::Event* ev = req.add_events();
  ev->set_type("future_event");
  // Field 99 is no payload this build knows: it must survive storage byte for byte.
  ev->GetReflection()->MutableUnknownFields(ev)->AddLengthDelimited(99, "opaque");
  ASSERT_TRUE(store_->Append(req).ok());
  auto events = AllEvents(*store_, id);
  ASSERT_TRUE(events.ok());
  const v1::Event& back = events->events(1);
  EXPECT_EQ(back.type(), "future_event");
  EXPECT_EQ(EventTypeName(back), "future_event");
  ASSERT_EQ(back.GetReflection()->GetUnknownFields(back).field_count(), 1);
  EXPECT_EQ(back.GetReflection()->GetUnknownFields(back).field(0).length_delimited(), "opaque");
}

TEST_F(StoreTest, GetEventsReturnsPositionalSlices) {
  std::string id = NewSession();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store_->Append(AppendOf(id, static_cast<uint64_t>(i + 2), 0, {std::to_string(i)})).ok());
  }
  v1::GetEventsRequest req;
  req.set_session_id(id);
  req.set_from_seq(5);
  req.set_to_seq(9);
  auto slice = store_->GetEvents(req);
  ASSERT_TRUE(slice.ok());
  ASSERT_EQ(slice->events_size(), 5);
  EXPECT_EQ(slice->events(0).seq(), 5u);
  EXPECT_EQ(slice->events(4).seq(), 9u);
  EXPECT_EQ(slice->next_seq(), 22u);
  req.set_to_seq(0);
  req.set_limit(3);
  slice = store_->GetEvents(req);
  ASSERT_EQ(slice->events_size(), 3);
  EXPECT_EQ(slice->events(2).seq(), 7u);
  req.set_from_seq(100);
  slice = store_->GetEvents(req);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->events_size(), 0);
  req.set_from_seq(9);
  req.set_to_seq(5);
  EXPECT_EQ(store_->GetEvents(req).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ListSessionsNewestFirstByTenantAndStatusWithPages) {
  std::vector<std::string> acme;
  for (int i = 0; i < 5; ++i) {
    acme.push_back(NewSession("acme"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::string other = NewSession("globex");
  v1::SetStatusRequest done;
  done.set_session_id(acme[1]);
  done.set_status(v1::SESSION_STATUS_COMPLETED);
  ASSERT_TRUE(store_->SetStatus(done).ok());

  v1::ListSessionsRequest req;
  req.set_tenant("acme");
  req.set_page_size(2);
  std::vector<std::string> seen;
  int pages = 0;
  do {
    auto page = store_->ListSessions(req);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& s : page->sessions()) seen.push_back(s.id());
    req.set_page_token(page->next_page_token());
    ++pages;
  } while (!req.page_token().empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, std::vector<std::string>(acme.rbegin(), acme.rend()));

  v1::ListSessionsRequest all;
  EXPECT_EQ(store_->ListSessions(all)->sessions_size(), 6);
  EXPECT_EQ(store_->ListSessions(all)->sessions(0).id(), other);
  v1::ListSessionsRequest completed;
  completed.set_status(v1::SESSION_STATUS_COMPLETED);
  auto c = store_->ListSessions(completed);
  ASSERT_EQ(c->sessions_size(), 1);
  EXPECT_EQ(c->sessions(0).id(), acme[1]);
  v1::ListSessionsRequest bad;
  bad.set_page_token("zz");
  EXPECT_EQ(store_->ListSessions(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, SetStatusAppendsStatusChangeEvent) {
  std::string id = NewSession();
  v1::SetStatusRequest req;
  req.set_session_id(id);
  req.set_status(v1::SESSION_STATUS_RUNNING);
  req.set_reason("picked up");
  auto meta = store_->SetStatus(req);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->status(), v1::SESSION_STATUS_RUNNING);
  auto events = AllEvents(*store_, id);
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).status_change().from(), v1::SESSION_STATUS_QUEUED);
  EXPECT_EQ(events->events(1).status_change().to(), v1::SESSION_STATUS_RUNNING);
  req.set_status(v1::SESSION_STATUS_UNSPECIFIED);
  EXPECT_EQ(store_->SetStatus(req).status().code(), StatusCode::kInvalidArgument);
  // A status_change appended through Append moves the metadata too.
  v1::AppendRequest ap = AppendOf(id, 3, 0, {});
  ap.add_events()->mutable_status_change()->set_to(v1::SESSION_STATUS_COMPLETED);
  ASSERT_TRUE(store_->Append(ap).ok());
  EXPECT_EQ(store_->GetSession(id)->status(), v1::SESSION_STATUS_COMPLETED);
}

TEST_F(StoreTest, WatchDeliversPastThenNewEventsAndCancels) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(AppendOf(id, 2, 0, {"past"})).ok());
  auto watcher = store_->Watch(id, 2);
  ASSERT_TRUE(watcher.ok());
  v1::Event ev;
  ASSERT_TRUE(*(*watcher)->Next(&ev, std::chrono::milliseconds(1000)));
  EXPECT_EQ(ev.user_message().text(), "past");
  EXPECT_FALSE(*(*watcher)->Next(&ev, std::chrono::milliseconds(20)));
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(store_->Append(AppendOf(id, 3, 0, {"new"})).ok());
  });
  auto got = (*watcher)->Next(&ev, std::chrono::seconds(10));
  writer.join();
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(*got);
  EXPECT_EQ(ev.seq(), 3u);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*watcher)->Cancel();
  });
  auto cancelled = (*watcher)->Next(&ev, std::chrono::seconds(30));
  canceller.join();
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(store_->Watch(std::string(32, 'c'), 1).status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, OnReadyCallsBackOnAppendWithoutAThread) {
  std::string id = NewSession();
  test::CheckOnReady(*store_, *store_, id, 2);
}

TEST_F(StoreTest, DataSurvivesReopenAndReadOnlyModeRefusesWrites) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(AppendOf(id, 2, 0, {"kept"})).ok());
  StoreOptions ro;
  ro.read_only = true;
  Reopen(ro);
  auto events = AllEvents(*store_, id);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_EQ(events->events(1).user_message().text(), "kept");
  EXPECT_EQ(store_->Append(AppendOf(id, 3, 0, {"x"})).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, CheckpointIsUsableAsStoreDirectory) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(AppendOf(id, 2, 0, {"before backup"})).ok());
  ASSERT_TRUE(store_->Checkpoint(dir_.Sub("backup")).ok());
  ASSERT_TRUE(store_->Append(AppendOf(id, 3, 0, {"after backup"})).ok());
  EXPECT_EQ(store_->Checkpoint(dir_.Sub("backup")).code(), StatusCode::kAlreadyExists);
  auto copy = OpenSessionStore(dir_.Sub("backup"), {});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto events = AllEvents(**copy, id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 2);
  EXPECT_EQ(events->events(1).user_message().text(), "before backup");
}

TEST_F(StoreTest, ConcurrentAppendsToOneSessionNeverDuplicateOrGap) {
  std::string id = NewSession();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int done = 0;
      while (done < kPerThread) {
        uint64_t next = store_->GetSession(id)->next_seq();
        auto r = store_->Append(AppendOf(id, next, 0, {std::to_string(t)}));
        if (r.ok()) {
          ++done;
        } else {
          ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  auto events = AllEvents(*store_, id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->events_size(), 1 + kThreads * kPerThread);
  for (int i = 0; i < events->events_size(); ++i) {
    EXPECT_EQ(events->events(i).seq(), static_cast<uint64_t>(i + 1));
  }
}

TEST(StoreOpenTest, CorruptedDirectoryIsReportedNotSkipped) {
  testing::TempDir dir;
  std::string id;
  {
    auto store = OpenSessionStore(dir.Sub("db"), {});
    ASSERT_TRUE(store.ok());
    id = (*store)->CreateSession(CreateOf("acme", "x"))->id();
    for (uint64_t i = 0; i < 200; ++i) {
      ASSERT_TRUE((*store)->Append(AppendOf(id, i + 2, 0, {std::string(200, 'a' + i % 26)})).ok());
    }
  }
  {  // Reopening flushes the recovered WAL into table files.
    auto store = OpenSessionStore(dir.Sub("db"), {});
    ASSERT_TRUE(store.ok());
  }
  int damaged = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.Sub("db"))) {
    if (entry.path().extension() != ".sst") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    auto size = std::filesystem::file_size(entry.path());
    for (std::streamoff off = 64; off < static_cast<std::streamoff>(size / 2); off += 97) {
      f.seekp(off);
      f.put('\x5a');
    }
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  auto store = OpenSessionStore(dir.Sub("db"), {});
  if (!store.ok()) {
    EXPECT_EQ(store.status().code(), StatusCode::kCorruption) << store.status().ToString();
    return;
  }
  auto events = AllEvents(**store, id);
  ASSERT_FALSE(events.ok()) << "damaged table files were read without an error";
  EXPECT_EQ(events.status().code(), StatusCode::kCorruption) << events.status().ToString();
}

TEST(StoreOpenTest, GarbageAndForeignDirectoriesGiveClearErrors) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.Sub("garbage"));
  std::ofstream(dir.Sub("garbage/CURRENT")) << "MANIFEST-999999\n";
  auto garbage = OpenSessionStore(dir.Sub("garbage"), {});
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("garbage"), std::string::npos);
  StoreOptions no_create;
  no_create.create_if_missing = false;
  auto missing = OpenSessionStore(dir.Sub("missing"), no_create);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  {
    auto first = OpenSessionStore(dir.Sub("locked"), {});
    ASSERT_TRUE(first.ok());
    auto second = OpenSessionStore(dir.Sub("locked"), {});
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
  }
}

}  // namespace
}  // namespace sinew::store
