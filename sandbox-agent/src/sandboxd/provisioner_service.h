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
  grpc::Status Snapshot(grpc::ServerContext*, const v1::SnapshotRequest* req, v1::SnapshotInfo* resp) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext*, const v1::SnapshotIdRequest* req,
                              v1::SnapshotInfo* resp) override;
  grpc::Status ListSnapshots(grpc::ServerContext*, const v1::ListSnapshotsRequest* req,
                             v1::ListSnapshotsResponse* resp) override;
  grpc::Status Fork(grpc::ServerContext*, const v1::ForkRequest* req, v1::ForkResponse* resp) override;
  grpc::Status Pause(grpc::ServerContext*, const v1::PauseRequest* req, v1::SandboxInfo* resp) override;
  grpc::Status Resume(grpc::ServerContext*, const v1::PauseRequest* req, v1::SandboxInfo* resp) override;

 private:
  SandboxManager& manager_;
};

}  // namespace sinew::sandbox
