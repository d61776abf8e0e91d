// Helpers shared by the session-store tests.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "sinew/session_store/session_store.h"
#include "sinew/testing/subprocess.h"

namespace sinew::store::test {

inline v1::Event UserMessage(const std::string& text) {
  v1::Event ev;
  ev.mutable_user_message()->set_text(text);
  return ev;
}

inline v1::AppendRequest AppendOf(const std::string& id, uint64_t expected, uint64_t epoch,
                                  std::initializer_list<std::string> texts,
                                  const std::string& idem = "") {
  v1::AppendRequest req;
  req.set_session_id(id);
  req.set_expected_next_seq(expected);
  req.set_lease_epoch(epoch);
  req.set_idempotency_key(idem);
  for (const auto& t : texts) *req.add_events() = UserMessage(t);
  return req;
}

inline v1::CreateSessionRequest CreateOf(const std::string& tenant, const std::string& title) {
  v1::CreateSessionRequest req;
  req.set_tenant(tenant);
  req.set_title(title);
  return req;
}

// All events of a session (asserting success is the caller's job).
inline Result<v1::GetEventsResponse> AllEvents(SessionStore& store, const std::string& id) {
  v1::GetEventsRequest req;
  req.set_session_id(id);
  req.set_limit(100000);
  return store.GetEvents(req);
}

// sinew-store as a real process on loopback, serving the store directory `db`; killed
// (SIGKILL) when destroyed. address() is empty when it did not start.
class StoreServer {
 public:
  explicit StoreServer(const std::string& db) {
    proc_ = std::make_unique<testing::Subprocess>(std::vector<std::string>{
        testing::BinaryPath("sinew-store"), "--db", db, "--listen", "127.0.0.1:0"});
    auto line = proc_->WaitForLine("listening on", std::chrono::seconds(20));
    if (line) address_ = line->substr(line->rfind(' ') + 1);
  }
  const std::string& address() const { return address_; }
  testing::Subprocess& process() { return *proc_; }

 private:
  std::unique_ptr<testing::Subprocess> proc_;
  std::string address_;
};

// EventWatcher::OnReady on `store` (embedded or remote), the session `id` having
// `next_seq` next; `writer` appends (another client, or the same store). The callback
// fires on an append, at once when an event waits or after Cancel, and never after the
// watcher is gone.
inline void CheckOnReady(SessionStore& store, SessionStore& writer, const std::string& id, uint64_t next_seq) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  auto watcher = store.Watch(id, next_seq);
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto appended = std::make_shared<std::promise<void>>();
  (*watcher)->OnReady([appended] { appended->set_value(); });
  auto fired = appended->get_future();
  EXPECT_EQ(fired.wait_for(milliseconds(100)), std::future_status::timeout) << "fired with nothing to read";
  ASSERT_TRUE(writer.Append(AppendOf(id, next_seq, 0, {"one", "two"})).ok());
  ASSERT_EQ(fired.wait_for(seconds(10)), std::future_status::ready) << "the append did not wake it";
  v1::Event ev;
  auto got = (*watcher)->Next(&ev, milliseconds(0));
  ASSERT_TRUE(got.ok() && *got) << got.status().ToString();
  EXPECT_EQ(ev.seq(), next_seq);
  ASSERT_TRUE(*(*watcher)->Next(&ev, seconds(10)));
  EXPECT_EQ(ev.seq(), next_seq + 1);
  // With an event already there, OnReady fires before it returns.
  auto arrived = std::make_shared<std::promise<void>>();
  (*watcher)->OnReady([arrived] { arrived->set_value(); });
  ASSERT_TRUE(writer.Append(AppendOf(id, next_seq + 2, 0, {"three"})).ok());
  ASSERT_EQ(arrived->get_future().wait_for(seconds(10)), std::future_status::ready);
  bool at_once = false;
  (*watcher)->OnReady([&at_once] { at_once = true; });
  EXPECT_TRUE(at_once) << "an event was waiting but OnReady did not fire";
  ASSERT_TRUE(*(*watcher)->Next(&ev, milliseconds(0)));
  EXPECT_EQ(ev.seq(), next_seq + 2);
  // Cancel fires it, and Next reports the cancel.
  auto cancelled = std::make_shared<std::promise<void>>();
  (*watcher)->OnReady([cancelled] { cancelled->set_value(); });
  (*watcher)->Cancel();
  EXPECT_EQ(cancelled->get_future().wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ((*watcher)->Next(&ev, milliseconds(0)).status().code(), StatusCode::kCancelled);
  // A watcher destroyed while waiting never calls back.
  auto dropped = store.Watch(id, next_seq + 3);
  ASSERT_TRUE(dropped.ok());
  auto late = std::make_shared<std::atomic<bool>>(false);
  (*dropped)->OnReady([late] { late->store(true); });
  dropped->reset();
  ASSERT_TRUE(writer.Append(AppendOf(id, next_seq + 3, 0, {"four"})).ok());
  auto check = store.Watch(id, next_seq + 3);
  ASSERT_TRUE(check.ok());
  ASSERT_TRUE(*(*check)->Next(&ev, seconds(10)));  // the append reached the store's watchers
  EXPECT_FALSE(late->load()) << "a destroyed watcher's callback ran";
}

}  // namespace sinew::store::test
