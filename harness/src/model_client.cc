#include <chrono>
#include <thread>

#include "model_clients.h"

namespace sinew::harness {

Result<std::unique_ptr<ModelClient>> MakeModelClient(const ModelEndpointConfig& config,
                                                     const std::string& api_key) {
  if (config.kind == "openai") return NewOpenAiClient(config, api_key);
  if (config.kind == "anthropic") return NewAnthropicClient(config, api_key);
  if (config.kind == "scripted") return NewScriptedModel(config);
  return Status::InvalidArgument("unknown model kind '" + config.kind + "'");
}

Result<ModelReply> RunWithRetries(const ModelEndpointConfig& config, const ModelCall& call,
                                  const ModelAttempt& attempt) {
  uint32_t backoff_ms = std::max<uint32_t>(config.backoff_ms, 1);
  Status last;
  for (uint32_t n = 0; n <= config.max_retries; ++n) {
    if (call.cancelled != nullptr && call.cancelled->load()) {
      return Status::Cancelled("model call cancelled");
    }
    ModelReply reply;
    auto response = attempt(&reply);
    uint32_t wait_ms = backoff_ms;
    if (response.ok()) {
      const long code = response->status;
      if (code >= 200 && code < 300) {
        reply.attempts = n + 1;
        return reply;
      }
      std::string body = response->body.substr(0, 500);
      if (code != 429 && code < 500) {
        return Status::InvalidArgument("model server refused the request: HTTP " +
                                       std::to_string(code) + ": " + body);
      }
      last = Status::Unavailable("model server answered HTTP " + std::to_string(code) + ": " + body);
      for (const auto& [name, value] : response->headers) {
        if (name == "retry-after") {
          char* end = nullptr;
          const long seconds = std::strtol(value.c_str(), &end, 10);
          if (end != value.c_str() && seconds >= 0 && seconds < 60) {
            wait_ms = std::max<uint32_t>(wait_ms, static_cast<uint32_t>(seconds * 1000));
          }
        }
      }
    } else {
      const StatusCode code = response.status().code();
      if (code == StatusCode::kCancelled || code == StatusCode::kCorruption) return response.status();
      last = response.status();
    }
    if (n == config.max_retries) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    backoff_ms = std::min<uint32_t>(backoff_ms * 2, 30000);
  }
  if (last.code() == StatusCode::kDeadlineExceeded) return last;
  return Status::Unavailable("model call failed after " + std::to_string(config.max_retries + 1) +
                             " attempts: " + last.message());
}

}  // namespace sinew::harness
