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

// Read limits shared by the stores and the remote client.
inline constexpr uint32_t kMaxEventLimit = 100000;
// ReadEventBytes page bounds: the page size when the caller gives none, and the most a
// caller may ask for (docs/session-store.md says why 256 KiB).
inline constexpr uint64_t kDefaultPageBytes = 256u << 10;
inline constexpr uint64_t kMaxPageBytes = 32u << 20;

}  // namespace sinew::store
