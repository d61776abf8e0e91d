// Trace context on gRPC calls: the `traceparent` metadata entry (W3C trace-context, as
// on HTTP). Header-only; include it only from targets that link gRPC.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <string>
#include <string_view>

#include "sinew/trace.h"

namespace sinew {

inline constexpr char kTraceparentMetadata[] = "traceparent";

// Adds `traceparent` (the current thread's trace, a fresh span) to an outgoing call;
// nothing when the thread has no trace in its log context.
inline void AddTraceMetadata(grpc::ClientContext* ctx) {
  const std::string tp = OutgoingTraceparent();
  if (!tp.empty()) ctx->AddMetadata(kTraceparentMetadata, tp);
}

// The `traceparent` the caller sent ("" when none).
inline std::string_view IncomingTraceparent(const grpc::ServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTraceparentMetadata);
  if (it == md.end()) return {};
  return {it->second.data(), it->second.size()};
}

// The log fields of a handler serving `ctx`'s call (see FieldsForIncoming).
inline LogFields FieldsForCall(const grpc::ServerContext& ctx) {
  return FieldsForIncoming(IncomingTraceparent(ctx));
}

}  // namespace sinew
