// AgentAuth: the agent's side of auth/agent_proof.h. With a secret, every call must carry
// it (else UNAUTHENTICATED, and the call does nothing) and gets the proof for its nonce in
// the initial metadata. Without one (agents run on a host by tests) every call is served.
//
// Thread-safety: immutable after construction.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace sinew::sandbox {

class AgentAuth {
 public:
  AgentAuth() = default;
  AgentAuth(std::string sandbox_id, std::string secret)
      : sandbox_id_(std::move(sandbox_id)), secret_(std::move(secret)) {}

  // Checks the caller and adds the proof. Call before anything is written to the call.
  grpc::Status Check(grpc::ServerContext* ctx) const;

 private:
  std::string sandbox_id_;
  std::string secret_;  // empty: no authentication
};

}  // namespace sinew::sandbox
