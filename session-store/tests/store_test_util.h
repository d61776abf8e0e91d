// Helpers shared by the session-store tests.
#pragma once

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

}  // namespace sinew::store::test
