// gRPC implementation of ProvisionerClient.
#include "sinew/sandbox/provisioner_client.h"

#include <grpcpp/grpcpp.h>

#include <future>

#include "sinew/grpc_callback_queue.h"
#include "sinew/grpc_status.h"
#include "sinew/grpc_tls.h"
#include "sinew/grpc_trace.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {
namespace {

// How long sinew-sandboxd keeps a handed-over sandbox for our Claim (the answer's way
// back plus the Claim's way there; generous, since only a lost answer ever uses it up).
constexpr uint32_t kClaimWithinSeconds = 30;

class GrpcProvisionerClient final : public ProvisionerClient {
 public:
  GrpcProvisionerClient(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds provision_timeout)
      : stub_(v1::Provisioner::NewStub(channel)), timeout_(timeout), provision_timeout_(provision_timeout) {
    PinGrpcCallbackQueue();  // ProvisionAsync and Destroy use the callback API
  }

  // The asynchronous form waited on: one code path for both.
  Result<v1::SandboxInfo> Provision(const v1::Resources& resources, std::string_view label) override {
    std::promise<Result<v1::SandboxInfo>> answer;
    auto future = answer.get_future();
    ProvisionAsync(resources, label, [&answer](Result<v1::SandboxInfo> r) { answer.set_value(std::move(r)); });
    return future.get();
  }

  // Provision, then confirm the hand-over with Claim: a sandbox whose answer never
  // reached us is ended by the daemon instead of running unowned. Both calls go through
  // gRPC's callback API; the operation's state lives until the last callback.
  void ProvisionAsync(const v1::Resources& resources, std::string_view label, ProvisionDone done) override {
    v1::ProvisionRequest request;
    *request.mutable_resources() = resources;
    request.set_label(std::string(label));
    ProvisionRequestAsync(std::move(request), std::move(done));
  }

  Result<v1::SandboxInfo> ProvisionWith(v1::ProvisionRequest request) override {
    std::promise<Result<v1::SandboxInfo>> answer;
    auto future = answer.get_future();
    ProvisionRequestAsync(std::move(request),
                          [&answer](Result<v1::SandboxInfo> r) { answer.set_value(std::move(r)); });
    return future.get();
  }

  Result<v1::SnapshotInfo> Snapshot(std::string_view sandbox_id, std::string_view owner) override {
    v1::SnapshotRequest req;
    req.set_sandbox_id(std::string(sandbox_id));
    req.set_owner(std::string(owner));
    return Call("Snapshot", req, &v1::Provisioner::Stub::Snapshot, provision_timeout_);
  }

  Result<v1::SnapshotInfo> DeleteSnapshot(std::string_view id, std::string_view owner) override {
    v1::SnapshotIdRequest req;
    req.set_id(std::string(id));
    req.set_owner(std::string(owner));
    return Call("DeleteSnapshot", req, &v1::Provisioner::Stub::DeleteSnapshot);
  }

  Result<v1::ListSnapshotsResponse> ListSnapshots(std::string_view owner) override {
    v1::ListSnapshotsRequest req;
    req.set_owner(std::string(owner));
    return Call("ListSnapshots", req, &v1::Provisioner::Stub::ListSnapshots);
  }

  Result<v1::ForkResponse> Fork(v1::ForkRequest request) override {
    request.set_claim_within_seconds(kClaimWithinSeconds);
    SINEW_ASSIGN_OR_RETURN(v1::ForkResponse forked,
                           Call("Fork", request, &v1::Provisioner::Stub::Fork, provision_timeout_));
    for (auto& box : *forked.mutable_sandboxes()) {
      v1::ClaimRequest claim;
      claim.set_id(box.id());
      auto claimed = Call("Claim", claim, &v1::Provisioner::Stub::Claim);
      if (!claimed.ok()) {
        for (const auto& other : forked.sandboxes()) DestroyUnclaimed(other.id());
        return Status::Unavailable("fork handed over sandboxes that could not be claimed (" +
                                   claimed.status().message() + "); fork again");
      }
      box = std::move(*claimed);
    }
    return forked;
  }

  Result<v1::SandboxInfo> Pause(std::string_view id, std::string_view owner, bool if_idle) override {
    v1::PauseRequest req;
    req.set_id(std::string(id));
    req.set_owner(std::string(owner));
    req.set_if_idle(if_idle);
    return Call("Pause", req, &v1::Provisioner::Stub::Pause, provision_timeout_);
  }

  Result<v1::SandboxInfo> Resume(std::string_view id, std::string_view owner) override {
    v1::PauseRequest req;
    req.set_id(std::string(id));
    req.set_owner(std::string(owner));
    return Call("Resume", req, &v1::Provisioner::Stub::Resume, provision_timeout_);
  }

 private:
  void ProvisionRequestAsync(v1::ProvisionRequest request, ProvisionDone done) {
    struct Op {
      grpc::ClientContext provision_ctx;
      grpc::ClientContext claim_ctx;
      v1::ProvisionRequest request;
      v1::SandboxInfo provisioned;
      v1::ClaimRequest claim;
      v1::SandboxInfo claimed;
      std::string traceparent;
      ProvisionDone done;
    };
    auto op = std::make_shared<Op>();
    op->request = std::move(request);
    op->request.set_claim_within_seconds(kClaimWithinSeconds);
    op->traceparent = OutgoingTraceparent();
    op->done = std::move(done);
    Prepare(&op->provision_ctx, provision_timeout_, op->traceparent);
    stub_->async()->Provision(&op->provision_ctx, &op->request, &op->provisioned, [this, op](grpc::Status s) {
      if (!s.ok()) return op->done(FromGrpcStatus(s).WithContext("provisioner Provision"));
      op->claim.set_id(op->provisioned.id());
      Prepare(&op->claim_ctx, {}, op->traceparent);
      stub_->async()->Claim(&op->claim_ctx, &op->claim, &op->claimed, [this, op](grpc::Status c) {
        if (c.ok()) return op->done(std::move(op->claimed));
        if (c.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
          return op->done(std::move(op->provisioned));  // a daemon older than Claim
        }
        DestroyUnclaimed(op->provisioned.id());  // best effort; unclaimed, the daemon ends it anyway
        op->done(Status::Unavailable("sandbox " + op->provisioned.id() + " was handed over but not claimed (" +
                                     FromGrpcStatus(c).WithContext("provisioner Claim").message() +
                                     "); provision again"));
      });
    });
  }


 public:
  Result<v1::SandboxInfo> Destroy(std::string_view id) override {
    v1::DestroyRequest req;
    req.set_id(std::string(id));
    return Call("Destroy", req, &v1::Provisioner::Stub::Destroy);
  }

  Result<v1::SandboxInfo> Get(std::string_view id) override {
    v1::GetSandboxRequest req;
    req.set_id(std::string(id));
    return Call("Get", req, &v1::Provisioner::Stub::Get);
  }

  Result<std::vector<v1::SandboxInfo>> List(bool include_ended) override {
    v1::ListSandboxesRequest req;
    req.set_include_ended(include_ended);
    SINEW_ASSIGN_OR_RETURN(v1::ListSandboxesResponse resp,
                           Call("List", req, &v1::Provisioner::Stub::List));
    return std::vector<v1::SandboxInfo>(resp.sandboxes().begin(), resp.sandboxes().end());
  }

  Result<v1::ProvisionerHealthResponse> Health() override {
    return Call("Health", v1::ProvisionerHealthRequest(), &v1::Provisioner::Stub::Health);
  }

 private:
  template <typename Req, typename Resp>
  Result<Resp> Call(std::string_view what, const Req& req,
                    grpc::Status (v1::Provisioner::Stub::*method)(grpc::ClientContext*, const Req&,
                                                                  Resp*),
                    std::chrono::milliseconds timeout = {}) {
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout, OutgoingTraceparent());
    Resp resp;
    grpc::Status s = (stub_.get()->*method)(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s).WithContext("provisioner " + std::string(what));
    return resp;
  }

  // Sets the call's deadline (`timeout`, or the call timeout when 0) and its trace.
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds timeout, const std::string& traceparent) const {
    ctx->set_deadline(std::chrono::system_clock::now() + (timeout.count() > 0 ? timeout : timeout_));
    if (!traceparent.empty()) ctx->AddMetadata(kTraceparentMetadata, traceparent);
  }

  // Destroy without waiting for (or reading) the answer: for a callback, which must not block.
  void DestroyUnclaimed(const std::string& id) {
    struct Op {
      grpc::ClientContext ctx;
      v1::DestroyRequest request;
      v1::SandboxInfo info;
    };
    auto op = std::make_shared<Op>();
    op->request.set_id(id);
    Prepare(&op->ctx, {}, {});
    stub_->async()->Destroy(&op->ctx, &op->request, &op->info, [op](grpc::Status) {});
  }

  // Constant after construction.
  std::unique_ptr<v1::Provisioner::Stub> stub_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds provision_timeout_;  // 0: timeout_
};

}  // namespace

Result<std::unique_ptr<ProvisionerClient>> ProvisionerClient::Connect(
    std::string address, std::chrono::milliseconds call_timeout, const GrpcTlsOptions& tls,
    std::chrono::milliseconds provision_timeout) {
  if (address.empty()) return Status::InvalidArgument("provisioner address is empty");
  SINEW_ASSIGN_OR_RETURN(auto channel, GrpcChannel(address, tls));
  return std::unique_ptr<ProvisionerClient>(new GrpcProvisionerClient(channel, call_timeout, provision_timeout));
}

}  // namespace sinew::sandbox
