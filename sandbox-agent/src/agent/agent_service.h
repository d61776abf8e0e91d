// AgentService: the Sandbox gRPC service (proto/sandbox.proto) over a ToolRegistry.
// Calls with a call id go through a CallRegistry (exactly once, results kept); every call
// is checked by an AgentAuth first.
//
// Ownership: borrows the registry, which must outlive the service.
// Thread-safety: gRPC calls its methods from many threads; the call registry is
// thread-safe, the auth is replaced under a lock, and everything else is immutable.
#pragma once

#include <memory>
#include <mutex>

#include "agent/agent_auth.h"
#include "agent/call_registry.h"
#include "agent/tools.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {

class AgentService final : public v1::Sandbox::Service {
 public:
  // `files` is the configuration of ReadFile and WriteFile (workspace, size cap).
  explicit AgentService(const ToolRegistry& registry, AgentAuth auth = {}, ToolConfig files = {})
      : registry_(registry),
        files_(std::move(files)),
        calls_(registry),
        auth_(std::make_shared<const AgentAuth>(std::move(auth))) {}

  // Calls from now on are checked against `auth` (a sandbox restored from a checkpoint
  // under another id and secret); the calls the registry keeps stay.
  void SetAuth(AgentAuth auth);

  grpc::Status Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                       v1::ExecuteResult* resp) override;
  grpc::Status ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                             grpc::ServerWriter<v1::ExecuteChunk>* writer) override;
  grpc::Status ListTools(grpc::ServerContext* ctx, const v1::ListToolsRequest* req,
                         v1::ListToolsResponse* resp) override;
  grpc::Status CancelCall(grpc::ServerContext* ctx, const v1::CancelCallRequest* req,
                          v1::CancelCallResponse* resp) override;
  grpc::Status ReadFile(grpc::ServerContext* ctx, const v1::ReadFileRequest* req,
                        grpc::ServerWriter<v1::FileChunk>* writer) override;
  grpc::Status WriteFile(grpc::ServerContext* ctx, grpc::ServerReader<v1::FileChunk>* reader,
                         v1::WriteFileResult* resp) override;

 private:
  // Checks a call with the current auth.
  grpc::Status CheckAuth(grpc::ServerContext* ctx) const;

  const ToolRegistry& registry_;
  const ToolConfig files_;
  CallRegistry calls_;
  mutable std::mutex auth_mu_;
  std::shared_ptr<const AgentAuth> auth_;  // guarded by auth_mu_
};

}  // namespace sinew::sandbox
