// ModelClient: one call to a language model with a prompt view, tools and streaming.
//
// Implementations: OpenAI-compatible Chat Completions and Anthropic Messages over HTTP
// (libcurl's multi interface: a call in flight holds no thread of the caller's; streaming
// or not per ModelEndpointConfig::stream, retries where a retry can help, timeouts), and
// a scripted model that replays a file of responses (for tests and demos; it is named as
// such everywhere).
//
// Thread-safety: Complete() and CompleteAsync() may be called from many threads at once.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/harness/config.h"
#include "sinew/status.h"

namespace sinew::harness {

struct ToolDefinition {
  std::string name;
  std::string description;
  std::string input_schema_json;  // a JSON Schema object
};

struct ModelToolCall {
  std::string id;
  std::string name;
  std::string input_json;  // a JSON object
};

struct ChatMessage {
  enum class Role { kUser, kAssistant, kTool };
  Role role = Role::kUser;
  std::string text;
  std::vector<ModelToolCall> tool_calls;  // kAssistant only
  std::string reasoning;                  // kAssistant only: sent back only if the model asks
  std::string tool_call_id;               // kTool only
  bool is_error = false;                  // kTool only
};

// Why a call failed, as the server said it (filled by Complete when it fails and
// ModelCall::failure is set).
struct ModelFailure {
  long http_status = 0;        // the last HTTP status; 0 for a transport error or timeout
  std::string server_message;  // the server's error message, at most kMaxServerMessage bytes
  uint32_t attempts = 0;       // HTTP requests made
  bool retryable = false;      // the last failure was of a kind worth retrying later
};

// The bound on ModelFailure::server_message and on the server text in error statuses.
inline constexpr size_t kMaxServerMessage = 2048;

struct ModelCall {
  std::string model;  // the wire name
  std::string system;
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
  uint32_t max_output_tokens = 1024;
  // How many model responses the session holds before this call (the scripted model
  // replays response number `turn`).
  uint32_t turn = 0;
  // The session this call is for (logging; the scripted model's {{session_id}} template).
  std::string session_id;
  // The key of the replica this call goes to (ModelEndpointConfig::replicas): the session
  // whose conversation the call continues. A fork's calls take its source's (the source's
  // own source for a fork of a fork), so that forks of one session (best-of-n) reach the
  // replica whose prefix cache holds their shared conversation. Empty: session_id.
  std::string affinity;
  // The session's max_wall_seconds (the built-in oracle's command timeout).
  uint32_t max_wall_seconds = 0;
  // Set by another thread to abandon the call (cancellation); may be null.
  const std::atomic<bool>* cancelled = nullptr;
  // Where to describe a failure; may be null.
  ModelFailure* failure = nullptr;
};

struct ModelReply {
  std::string text;       // the answer, without reasoning
  // Reasoning the server returned apart from the answer: `reasoning_content` (vLLM,
  // llama.cpp), `<think>...</think>` inside the content, or Anthropic thinking blocks.
  std::string reasoning;
  std::vector<ModelToolCall> tool_calls;
  std::string stop_reason;  // "end_turn", "tool_use", "max_tokens", ...
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  int64_t time_to_first_token_ms = -1;  // -1: nothing streamed
  uint32_t attempts = 1;                // HTTP requests made, the streaming fallback included
  bool streamed = false;                // the answer came as a stream
};

// Called with each streamed piece of answer text as it arrives (on a thread of the
// client's, one piece at a time, never after the call returns); without streaming, once
// with the whole answer. Reasoning is not passed.
using TokenCallback = std::function<void(std::string_view delta)>;

class ModelClient {
 public:
  virtual ~ModelClient() = default;
  // Runs one call. Retried: transport errors, timeouts, HTTP 408, 429 (after Retry-After),
  // 502, 503, 504, 529, and a 500 once. Errors: kUnavailable (retries exhausted, or a 5xx
  // not worth retrying), kDeadlineExceeded (timeout), kInvalidArgument (the server refused
  // the request: 4xx), kCancelled, kCorruption (a reply that does not parse). An HTTP
  // error's message carries the status and the server's message (up to kMaxServerMessage).
  [[nodiscard]] virtual Result<ModelReply> Complete(const ModelCall& call,
                                                    const TokenCallback& on_token) = 0;
  // The agent loop's form of Complete (the harness drives sessions as coroutines): a
  // client that can wait without a thread overrides it (the HTTP clients, the scripted
  // model); the default runs Complete on `blocking`, the harness's pool for calls that
  // block. The caller co_awaits it at once: `call` and `on_token` live until it returns.
  [[nodiscard]] virtual boost::asio::awaitable<Result<ModelReply>> CompleteAsync(
      const ModelCall& call, const TokenCallback& on_token, boost::asio::thread_pool& blocking);
  // Ends the calls in flight (kCancelled) and joins the client's own threads, so that
  // nothing of the client's touches the caller's executors afterwards; later calls are
  // answered kCancelled. The harness calls it on stop, before its executors go.
  virtual void Shutdown() {}
  // Prometheus text lines about the client's servers, labelled model="<model>" (per
  // replica: up, calls in flight, calls, failures, calls moved in); "" when it has none
  // to report.
  virtual std::string MetricsText(std::string_view model) const {
    (void)model;
    return {};
  }
};

// `api_key` is the resolved secret ("" for none).
[[nodiscard]] Result<std::unique_ptr<ModelClient>> MakeModelClient(
    const ModelEndpointConfig& config, const std::string& api_key);

}  // namespace sinew::harness
