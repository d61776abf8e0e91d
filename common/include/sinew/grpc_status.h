// Conversions between sinew::Status and grpc::Status, for the gRPC edges of each role.
// Header-only; include it only from targets that link gRPC.
#pragma once

#include <grpcpp/support/status.h>

#include "sinew/status.h"

namespace sinew {

inline grpc::StatusCode ToGrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kAborted: return grpc::StatusCode::ABORTED;
    case StatusCode::kOutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCorruption: return grpc::StatusCode::DATA_LOSS;
    case StatusCode::kIOError: return grpc::StatusCode::INTERNAL;
    case StatusCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case StatusCode::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

// The sinew code travels in the message prefix "[code_name] " so that codes that share
// a gRPC code (io_error and internal) survive the round trip.
inline grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(s.code()),
                      "[" + std::string(StatusCodeName(s.code())) + "] " + s.message());
}

inline Status FromGrpcStatus(const grpc::Status& g) {
  if (g.ok()) return Status::Ok();
  const std::string& msg = g.error_message();
  if (msg.size() > 2 && msg[0] == '[') {
    auto close = msg.find("] ");
    if (close != std::string::npos) {
      std::string_view name(msg.data() + 1, close - 1);
      for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
        if (StatusCodeName(static_cast<StatusCode>(c)) == name) {
          return Status(static_cast<StatusCode>(c), msg.substr(close + 2));
        }
      }
    }
  }
  switch (g.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT: return Status::InvalidArgument(msg);
    case grpc::StatusCode::NOT_FOUND: return Status::NotFound(msg);
    case grpc::StatusCode::ALREADY_EXISTS: return Status::AlreadyExists(msg);
    case grpc::StatusCode::FAILED_PRECONDITION: return Status::FailedPrecondition(msg);
    case grpc::StatusCode::ABORTED: return Status::Aborted(msg);
    case grpc::StatusCode::OUT_OF_RANGE: return Status::OutOfRange(msg);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return Status::ResourceExhausted(msg);
    case grpc::StatusCode::UNAVAILABLE: return Status::Unavailable(msg);
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Status::DeadlineExceeded(msg);
    case grpc::StatusCode::DATA_LOSS: return Status::Corruption(msg);
    case grpc::StatusCode::PERMISSION_DENIED: return Status::PermissionDenied(msg);
    case grpc::StatusCode::UNAUTHENTICATED: return Status::Unauthenticated(msg);
    case grpc::StatusCode::CANCELLED: return Status::Cancelled(msg);
    case grpc::StatusCode::UNIMPLEMENTED: return Status::Unimplemented(msg);
    default: return Status::Internal(msg);
  }
}

}  // namespace sinew
