// AgentService: the Sandbox gRPC service (proto/sandbox.proto) over a ToolRegistry.
//
// Ownership: borrows the registry, which must outlive the service.
// Thread-safety: gRPC calls its methods from many threads; it keeps no mutable state.
#pragma once

#include "agent/tools.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {

class AgentService final : public v1::Sandbox::Service {
 public:
  explicit AgentService(const ToolRegistry& registry) : registry_(registry) {}

  grpc::Status Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                       v1::ExecuteResult* resp) override;
  grpc::Status ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                             grpc::ServerWriter<v1::ExecuteChunk>* writer) override;
  grpc::Status ListTools(grpc::ServerContext* ctx, const v1::ListToolsRequest* req,
                         v1::ListToolsResponse* resp) override;

 private:
  const ToolRegistry& registry_;
};

}  // namespace sinew::sandbox
