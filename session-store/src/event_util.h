// Validation of events and requests shared by the embedded store and the server.
#pragma once

#include <string>

#include "sinew/session_store/session_store.h"

namespace sinew::store {

// Checks an event that a client wants appended: it has a payload (or a type name for a
// payload this build does not know), it is no session_created event, it fits the size limit.
Status ValidateEventForAppend(const v1::Event& event, size_t index, size_t max_bytes);
Status ValidateStatus(v1::SessionStatus status, const char* field);
Status ValidateCreateRequest(const v1::CreateSessionRequest& req, size_t max_event_bytes);
Status ValidateLeaseArgs(const std::string& owner, std::chrono::milliseconds ttl);

}  // namespace sinew::store
