// Validation of events and requests shared by the embedded store and the server.
#pragma once

#include <string>
#include <string_view>

#include "sinew/session_store/session_store.h"

namespace sinew::store {

// Checks an event that a client wants appended: it has a payload (or a type name for a
// payload this build does not know), it is no session_created event, it fits the size limit.
Status ValidateEventForAppend(const v1::Event& event, size_t index, size_t max_bytes);
Status ValidateStatus(v1::SessionStatus status, const char* field);
Status ValidateCreateRequest(const v1::CreateSessionRequest& req, size_t max_event_bytes);
Status ValidateLeaseArgs(const std::string& owner, std::chrono::milliseconds ttl);

// Walks the top-level fields of a serialized Event without decoding any of them but seq.
// Returns false when the framing is malformed (a bad tag, a length past the end); else
// true, with *seq set to the seq field (0 when absent). Payloads are skipped unread.
bool ReadEnvelopeSeq(std::string_view bytes, uint64_t* seq);

}  // namespace sinew::store
