#include "event_util.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>

namespace sinew::store {

std::string EventTypeName(const v1::Event& event) {
  if (event.payload_case() != v1::Event::PAYLOAD_NOT_SET) {
    const auto* field = v1::Event::descriptor()->FindFieldByNumber(event.payload_case());
    if (field != nullptr) return field->name();
  }
  return event.type();
}

std::string SessionStatusName(v1::SessionStatus status) {
  switch (status) {
    case v1::SESSION_STATUS_QUEUED: return "queued";
    case v1::SESSION_STATUS_RUNNING: return "running";
    case v1::SESSION_STATUS_WAITING_FOR_INPUT: return "waiting_for_input";
    case v1::SESSION_STATUS_COMPLETED: return "completed";
    case v1::SESSION_STATUS_FAILED: return "failed";
    case v1::SESSION_STATUS_CANCELLED: return "cancelled";
    case v1::SESSION_STATUS_REQUIRES_ACTION: return "requires_action";
    default: return "unspecified";
  }
}

Status DecodeEvent(std::string_view bytes, uint64_t seq, v1::Event* out) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption("event " + std::to_string(seq) + " is undecodable");
  }
  if (out->seq() != seq) {
    return Status::Corruption("event " + std::to_string(seq) + " carries seq " +
                              std::to_string(out->seq()));
  }
  return Status::Ok();
}

bool ReadEnvelopeSeq(std::string_view bytes, uint64_t* seq) {
  using google::protobuf::internal::WireFormatLite;
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  *seq = 0;
  while (!in.ExpectAtEnd()) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return false;
    if (WireFormatLite::GetTagFieldNumber(tag) == v1::Event::kSeqFieldNumber &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(seq)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return true;
}

Status ValidateEventForAppend(const v1::Event& event, size_t index, size_t max_bytes) {
  const std::string where = "event " + std::to_string(index);
  if (event.payload_case() == v1::Event::PAYLOAD_NOT_SET && event.type().empty()) {
    return Status::InvalidArgument(where + " is empty: set one payload (user_message, tool_call, ...)");
  }
  if (event.has_session_created()) {
    return Status::InvalidArgument(where +
                                   " is a session_created event; only CreateSession writes one");
  }
  if (event.has_status_change()) {
    SINEW_RETURN_IF_ERROR(ValidateStatus(event.status_change().to(), "status_change.to")
                              .WithContext(where));
  }
  size_t bytes = event.ByteSizeLong();
  if (bytes > max_bytes) {
    return Status::InvalidArgument(where + " is " + std::to_string(bytes) + " bytes, over the " +
                                   std::to_string(max_bytes) +
                                   "-byte limit (StoreOptions::max_event_bytes)");
  }
  return Status::Ok();
}

Status ValidateStatus(v1::SessionStatus status, const char* field) {
  if (!v1::SessionStatus_IsValid(status) || status == v1::SESSION_STATUS_UNSPECIFIED) {
    return Status::InvalidArgument(std::string(field) + " must be one of queued, running, " +
                                   "waiting_for_input, completed, failed, cancelled, requires_action");
  }
  return Status::Ok();
}

Status ValidateCreateRequest(const v1::CreateSessionRequest& req, size_t max_event_bytes) {
  if (req.tenant().empty()) return Status::InvalidArgument("tenant is required");
  if (req.tenant().size() > 128 || req.tenant().find('\0') != std::string::npos) {
    return Status::InvalidArgument("tenant must be at most 128 bytes without NUL characters");
  }
  if (req.title().size() > 1024) return Status::InvalidArgument("title is over 1024 bytes");
  if (req.metadata_size() > 64) return Status::InvalidArgument("metadata has over 64 entries");
  for (const auto& [k, v] : req.metadata()) {
    if (k.empty() || k.size() > 128 || v.size() > 4096) {
      return Status::InvalidArgument("metadata key '" + k.substr(0, 128) +
                                     "': keys must be 1-128 bytes, values at most 4096 bytes");
    }
  }
  if (req.task_json().size() > max_event_bytes) {
    return Status::InvalidArgument("task_json is over the event size limit");
  }
  if (req.initial_status() != v1::SESSION_STATUS_UNSPECIFIED) {
    SINEW_RETURN_IF_ERROR(ValidateStatus(req.initial_status(), "initial_status"));
  }
  return Status::Ok();
}

Status ValidateLeaseArgs(const std::string& owner, std::chrono::milliseconds ttl) {
  if (owner.empty() || owner.size() > 256) {
    return Status::InvalidArgument("lease owner must be 1-256 bytes");
  }
  if (ttl.count() <= 0 || ttl > std::chrono::hours(24)) {
    return Status::InvalidArgument("lease ttl must be between 1 ms and 24 h");
  }
  return Status::Ok();
}

}  // namespace sinew::store
