#include "sandboxd/provisioner_service.h"

#include <spdlog/spdlog.h>

#include "sinew/grpc_status.h"
#include "sinew/grpc_trace.h"

namespace sinew::sandbox {
namespace {

grpc::Status Reply(Result<v1::SandboxInfo> r, v1::SandboxInfo* resp) {
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

Status CheckId(const std::string& id, const char* what = "sandbox") {
  if (id.empty()) return Status::InvalidArgument(std::string(what) + " id is empty");
  if (id.size() > 64) return Status::InvalidArgument(std::string(what) + " id is too long");
  return Status::Ok();
}

Status CheckOwner(const std::string& owner) {
  if (owner.size() > 128) return Status::InvalidArgument("owner is longer than 128 bytes");
  return Status::Ok();
}

template <typename T>
grpc::Status ReplyWith(Result<T> r, T* resp) {
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

// Logs the start and end of `method` at info, with the caller's trace (and `extra`
// fields) in the log context of everything logged while `fn` runs.
template <typename Fn>
grpc::Status Traced(const grpc::ServerContext* ctx, const char* method,
                    std::vector<std::pair<std::string, std::string>> extra, Fn&& fn) {
  LogFields fields = FieldsForCall(*ctx);
  fields.extra.insert(fields.extra.end(), extra.begin(), extra.end());
  ScopedLogContext scope(std::move(fields));
  spdlog::info("sandboxd {} started", method);
  grpc::Status s = fn();
  spdlog::info("sandboxd {} ended: {}", method, s.ok() ? "OK" : s.error_message());
  return s;
}

}  // namespace

// How much of a provision's deadline must be left for sandboxd to hand a sandbox over.
constexpr auto kAnswerMargin = std::chrono::seconds(1);

grpc::Status ProvisionerService::Provision(grpc::ServerContext* ctx, const v1::ProvisionRequest* req,
                                           v1::SandboxInfo* resp) {
  if (req->label().size() > 256)
    return ToGrpcStatus(Status::InvalidArgument("label is longer than 256 bytes"));
  if (req->claim_within_seconds() > 3600)
    return ToGrpcStatus(Status::InvalidArgument("claim_within_seconds is " +
                                                std::to_string(req->claim_within_seconds()) +
                                                "; at most 3600 (0: no claim step)"));
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  if (!req->from_snapshot().empty()) {
    if (Status s = CheckId(req->from_snapshot(), "snapshot"); !s.ok()) return ToGrpcStatus(s);
  }
  return Traced(ctx, "Provision", {{"label", req->label()}}, [&] {
    // The caller's deadline and cancellation travel into the start line: a provision
    // nobody waits for any more is not started, or not left running. "Still waiting"
    // means with kAnswerMargin of its deadline left, so that a sandbox handed over at the
    // last moment is not lost with an answer that arrives after the caller gave up.
    auto still_wanted = [ctx] {
      return !ctx->IsCancelled() && std::chrono::system_clock::now() + kAnswerMargin < ctx->deadline();
    };
    grpc::Status s = Reply(manager_.Provision(req->resources(), req->label(),
                                              std::chrono::seconds(req->claim_within_seconds()),
                                              still_wanted, {req->owner(), req->from_snapshot()}),
                           resp);
    if (s.ok()) spdlog::info("provisioned sandbox {}", resp->id());
    return s;
  });
}

grpc::Status ProvisionerService::Claim(grpc::ServerContext* ctx, const v1::ClaimRequest* req,
                                       v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "Claim", {{"sandbox", req->id()}}, [&] { return Reply(manager_.Claim(req->id()), resp); });
}

grpc::Status ProvisionerService::Destroy(grpc::ServerContext* ctx, const v1::DestroyRequest* req,
                                         v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "Destroy", {{"sandbox", req->id()}}, [&] { return Reply(manager_.Destroy(req->id()), resp); });
}

grpc::Status ProvisionerService::Get(grpc::ServerContext*, const v1::GetSandboxRequest* req,
                                     v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  return Reply(manager_.Get(req->id()), resp);
}

grpc::Status ProvisionerService::List(grpc::ServerContext*, const v1::ListSandboxesRequest* req,
                                      v1::ListSandboxesResponse* resp) {
  for (auto& info : manager_.List(req->include_ended())) *resp->add_sandboxes() = std::move(info);
  return grpc::Status::OK;
}

grpc::Status ProvisionerService::Health(grpc::ServerContext*, const v1::ProvisionerHealthRequest*,
                                        v1::ProvisionerHealthResponse* resp) {
  *resp = manager_.Health();
  return grpc::Status::OK;
}

grpc::Status ProvisionerService::Snapshot(grpc::ServerContext* ctx, const v1::SnapshotRequest* req,
                                          v1::SnapshotInfo* resp) {
  if (Status s = CheckId(req->sandbox_id()); !s.ok()) return ToGrpcStatus(s);
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "Snapshot", {{"sandbox", req->sandbox_id()}},
                [&] { return ReplyWith(manager_.Snapshot(req->sandbox_id(), req->owner()), resp); });
}

grpc::Status ProvisionerService::DeleteSnapshot(grpc::ServerContext* ctx, const v1::SnapshotIdRequest* req,
                                                v1::SnapshotInfo* resp) {
  if (Status s = CheckId(req->id(), "snapshot"); !s.ok()) return ToGrpcStatus(s);
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "DeleteSnapshot", {{"snapshot", req->id()}},
                [&] { return ReplyWith(manager_.DeleteSnapshot(req->id(), req->owner()), resp); });
}

grpc::Status ProvisionerService::ListSnapshots(grpc::ServerContext*, const v1::ListSnapshotsRequest* req,
                                               v1::ListSnapshotsResponse* resp) {
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  *resp = manager_.ListSnapshots(req->owner());
  return grpc::Status::OK;
}

grpc::Status ProvisionerService::Fork(grpc::ServerContext* ctx, const v1::ForkRequest* req,
                                      v1::ForkResponse* resp) {
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  if (req->label().size() > 256) return ToGrpcStatus(Status::InvalidArgument("label is longer than 256 bytes"));
  if (req->claim_within_seconds() > 3600) {
    return ToGrpcStatus(Status::InvalidArgument("claim_within_seconds is at most 3600 (0: no claim step)"));
  }
  if (!req->sandbox_id().empty()) {
    if (Status s = CheckId(req->sandbox_id()); !s.ok()) return ToGrpcStatus(s);
  }
  if (!req->snapshot_id().empty()) {
    if (Status s = CheckId(req->snapshot_id(), "snapshot"); !s.ok()) return ToGrpcStatus(s);
  }
  return Traced(ctx, "Fork", {{"label", req->label()}}, [&] {
    auto still_wanted = [ctx] {
      return !ctx->IsCancelled() && std::chrono::system_clock::now() + kAnswerMargin < ctx->deadline();
    };
    return ReplyWith(manager_.Fork(*req, still_wanted), resp);
  });
}

grpc::Status ProvisionerService::Pause(grpc::ServerContext* ctx, const v1::PauseRequest* req,
                                       v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "Pause", {{"sandbox", req->id()}},
                [&] { return Reply(manager_.Pause(req->id(), req->owner(), req->if_idle()), resp); });
}

grpc::Status ProvisionerService::Resume(grpc::ServerContext* ctx, const v1::PauseRequest* req,
                                        v1::SandboxInfo* resp) {
  if (Status s = CheckId(req->id()); !s.ok()) return ToGrpcStatus(s);
  if (Status s = CheckOwner(req->owner()); !s.ok()) return ToGrpcStatus(s);
  return Traced(ctx, "Resume", {{"sandbox", req->id()}},
                [&] { return Reply(manager_.Resume(req->id(), req->owner()), resp); });
}

}  // namespace sinew::sandbox
