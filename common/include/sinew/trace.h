// W3C Trace Context (https://www.w3.org/TR/trace-context/) and the thread-local log
// context that every Sinew log line and outgoing call picks up.
//
// One session is one trace. Its trace id is derived from the session id
// (TraceIdForSession): a session id is 16 random-ish bytes in lowercase hex, which is
// exactly a W3C trace id, so any harness that takes a session over continues the same
// trace without storing anything. Each outgoing call (model HTTP, sandbox and store gRPC)
// gets a fresh span id, sent as `traceparent: 00-<trace>-<span>-01`.
//
// Thread-safety: the parse/format functions are pure; the log context is per thread (a
// session is driven by one thread at a time in the harness; a gRPC or HTTP handler sets
// its own for the request it serves).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sinew {

struct TraceParent {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0x01;  // bit 0: sampled

  std::string TraceIdHex() const;
  std::string SpanIdHex() const;
};

// Parses a `traceparent` header value. Returns nullopt for anything the W3C spec says to
// ignore: wrong length or separators, upper-case or non-hex digits, version "ff", an
// all-zero trace or span id, or version 00 with trailing data. A version above 00 is read
// by its first four fields when it is followed by nothing or by "-" (forward compatibility).
std::optional<TraceParent> ParseTraceparent(std::string_view value);

// "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>".
std::string FormatTraceparent(const TraceParent& tp);

// 16 random bytes (never all zero) as 32 lowercase hex characters.
std::string NewTraceIdHex();
// 8 random bytes (never all zero) as 16 lowercase hex characters.
std::string NewSpanIdHex();

// The trace id of session `session_id`: the id itself when it is 32 lowercase hex digits
// and not all zero (every id the session store makes), otherwise a 128-bit hash of it.
std::string TraceIdForSession(std::string_view session_id);

// The structured fields of the current thread's log lines. Empty strings / seq 0 are
// "absent" and left out of the line.
struct LogFields {
  std::string session = {};
  uint64_t seq = 0;
  std::string trace_id = {};  // 32 hex
  std::string span_id = {};   // 16 hex: the span this thread is serving (a receiver's own)
  std::vector<std::pair<std::string, std::string>> extra = {};  // more fields, in order
};

// The current thread's fields (empty when no ScopedLogContext is alive on it).
const LogFields& CurrentLogFields();

// Replaces the current thread's fields, restoring nothing later: for a coroutine that
// resumes on a thread after a wait and carries its own fields across (harness/src/async.h).
void ReplaceLogFields(LogFields fields);

// Sets the current thread's log fields for its lifetime and restores the previous ones
// on destruction (scopes nest; destroy in reverse order, on the same thread).
class ScopedLogContext {
 public:
  explicit ScopedLogContext(LogFields fields);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  LogFields saved_;
};

// Sets the seq field of the current thread's fields (the innermost ScopedLogContext
// restores what was before it when it ends).
void SetLogSeq(uint64_t seq);

// The `traceparent` value for a call this thread makes now: the context's trace with a
// fresh span id; "" when the context has no trace.
std::string OutgoingTraceparent();

// The log fields of a receiver serving one request that came with `traceparent` (may be
// empty): its trace when valid, a new trace when absent or invalid; a new span id (the
// receiver's own) either way; and, when valid, the caller's span as extra field
// "parent_span_id".
LogFields FieldsForIncoming(std::string_view traceparent);

}  // namespace sinew
