// gRPC implementation of ProvisionerClient.
#include "sinew/sandbox/provisioner_client.h"

#include <grpcpp/grpcpp.h>

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
      : stub_(v1::Provisioner::NewStub(channel)), timeout_(timeout), provision_timeout_(provision_timeout) {}

  Result<v1::SandboxInfo> Provision(const v1::Resources& resources,
                                    std::string_view label) override {
    v1::ProvisionRequest req;
    *req.mutable_resources() = resources;
    req.set_label(std::string(label));
    req.set_claim_within_seconds(kClaimWithinSeconds);
    SINEW_ASSIGN_OR_RETURN(v1::SandboxInfo info,
                           Call("Provision", req, &v1::Provisioner::Stub::Provision, provision_timeout_));
    // Confirm the hand-over: a sandbox whose answer never reached us is ended by the
    // daemon instead of running unowned.
    v1::ClaimRequest claim;
    claim.set_id(info.id());
    Result<v1::SandboxInfo> claimed = Call("Claim", claim, &v1::Provisioner::Stub::Claim);
    if (claimed.ok()) return std::move(*claimed);
    if (claimed.status().code() == StatusCode::kUnimplemented) return info;  // a daemon older than Claim
    (void)Destroy(info.id());  // best effort; unclaimed, the daemon ends it anyway
    return Status::Unavailable("sandbox " + info.id() + " was handed over but not claimed (" +
                               claimed.status().message() + "); provision again");
  }

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
    ctx.set_deadline(std::chrono::system_clock::now() + (timeout.count() > 0 ? timeout : timeout_));
    AddTraceMetadata(&ctx);
    Resp resp;
    grpc::Status s = (stub_.get()->*method)(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s).WithContext("provisioner " + std::string(what));
    return resp;
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
