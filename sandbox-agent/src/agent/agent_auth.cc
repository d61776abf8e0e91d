#include "agent/agent_auth.h"

#include "auth/agent_proof.h"

namespace sinew::sandbox {
namespace {

std::string_view Metadata(const grpc::ServerContext* ctx, const char* key) {
  auto it = ctx->client_metadata().find(key);
  if (it == ctx->client_metadata().end()) return {};
  return {it->second.data(), it->second.size()};
}

}  // namespace

grpc::Status AgentAuth::Check(grpc::ServerContext* ctx) const {
  if (secret_.empty()) return grpc::Status::OK;
  if (!SecretsEqual(Metadata(ctx, kSecretMetadata), secret_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this sandbox's agent needs its secret (SandboxInfo.agent_secret)");
  }
  std::string_view nonce = Metadata(ctx, kNonceMetadata);
  if (nonce.empty() || nonce.size() > 256) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or oversized x-sinew-nonce");
  }
  ctx->AddInitialMetadata(kProofMetadata, AgentProof(secret_, sandbox_id_, nonce));
  return grpc::Status::OK;
}

}  // namespace sinew::sandbox
