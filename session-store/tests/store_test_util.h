// Helpers shared by the session-store tests.
#pragma once

#include <string>

#include "sinew/session_store/session_store.h"

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

}  // namespace sinew::store::test
