// How the host and a sandbox's agent recognise each other on every call (docs/sandbox.md,
// "The agent channel"). The provisioner issues each sandbox a 128-bit secret at start
// (SandboxInfo.agent_secret; handed to the agent through an inherited pipe, never through
// anything the sandbox's processes can read). On each call the client sends the secret
// and a fresh nonce as metadata; the agent refuses calls without the secret and answers
// with a proof, HMAC-SHA256(secret, "sinew-agent-proof" | sandbox id | nonce), in its
// initial metadata, which the client checks: it reached the sandbox it asked for.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace sinew::sandbox {

inline constexpr const char* kSecretMetadata = "x-sinew-secret";
inline constexpr const char* kNonceMetadata = "x-sinew-nonce";
inline constexpr const char* kProofMetadata = "x-sinew-proof";

// Lower-case hex of HMAC-SHA256 over the sandbox id and nonce, keyed with the secret.
std::string AgentProof(std::string_view secret, std::string_view sandbox_id, std::string_view nonce);
// Constant-time comparison of two strings (lengths may leak; contents do not).
bool SecretsEqual(std::string_view a, std::string_view b);
// `bytes` random bytes from OpenSSL's RAND_bytes, as lower-case hex. Aborts the process
// when the generator fails (ids and secrets must never be guessable).
std::string RandomHex(size_t bytes);

}  // namespace sinew::sandbox
