// ProvisionerService: the Provisioner gRPC service over a SandboxManager.
//
// Ownership: borrows the manager, which must outlive the service.
// Thread-safety: thread-safe (the manager is).
#pragma once

#include "sandboxd/sandbox_manager.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {

class ProvisionerService final : public v1::Provisioner::Service {
 public:
  explicit ProvisionerService(SandboxManager& manager) : manager_(manager) {}

  grpc::Status Provision(grpc::ServerContext*, const v1::ProvisionRequest* req,
                         v1::SandboxInfo* resp) override;
  grpc::Status Claim(grpc::ServerContext*, const v1::ClaimRequest* req, v1::SandboxInfo* resp) override;
  grpc::Status Destroy(grpc::ServerContext*, const v1::DestroyRequest* req,
                       v1::SandboxInfo* resp) override;
  grpc::Status Get(grpc::ServerContext*, const v1::GetSandboxRequest* req,
                   v1::SandboxInfo* resp) override;
  grpc::Status List(grpc::ServerContext*, const v1::ListSandboxesRequest* req,
                    v1::ListSandboxesResponse* resp) override;
  grpc::Status Health(grpc::ServerContext*, const v1::ProvisionerHealthRequest* req,
                      v1::ProvisionerHealthResponse* resp) override;

 private:
  SandboxManager& manager_;
};

}  // namespace sinew::sandbox
