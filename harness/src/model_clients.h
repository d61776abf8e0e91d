// The ModelClient implementations and the pieces they share (internal): the HTTP
// clients' base (calls without a thread), the retry loop with the streaming fallback,
// the retry policy, server error messages and the <think> splitter.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "async.h"
#include "curl_http.h"
#include "sinew/harness/model_client.h"

namespace sinew::harness {

std::unique_ptr<ModelClient> NewOpenAiClient(const ModelEndpointConfig& config, std::string api_key);
std::unique_ptr<ModelClient> NewAnthropicClient(const ModelEndpointConfig& config,
                                                std::string api_key);
// The scripted model (a test double of a language model): replays the responses of a
// JSON file, response number ModelCall::turn for each call. Errors: the file's.
Result<std::unique_ptr<ModelClient>> NewScriptedModel(const ModelEndpointConfig& config);

// The built-in agents (config.h): the oracle's first call answers with one bash tool call
// running the first user message with timeout ModelCall::max_wall_seconds, every later
// call ends the turn; nop's every call ends the turn. Neither fails.
std::unique_ptr<ModelClient> NewOracleAgent();
std::unique_ptr<ModelClient> NewNopAgent();

// A model client over HTTP (OpenAI, Anthropic): a call is a coroutine whose requests go
// out on the client's own http::AsyncClient (libcurl's multi interface, one thread for
// every call of the client), so a call in flight holds no thread of the caller's: the
// agent loop's coroutine waits for it like for a timer. Complete, for callers that do
// block, runs the same coroutine on an io_context of its own: one code path for both.
class HttpModelClient : public ModelClient {
 public:
  Result<ModelReply> Complete(const ModelCall& call, const TokenCallback& on_token) final;
  Task<Result<ModelReply>> CompleteAsync(const ModelCall& call, const TokenCallback& on_token,
                                         asio::thread_pool& blocking) final;
  void Shutdown() override;

 protected:
  // One call, with its retries (RunWithRetries).
  virtual Task<Result<ModelReply>> Call(const ModelCall& call, const TokenCallback& on_token) = 0;
  // One HTTP request on the client's thread; `on_chunk` runs there. A transfer stopped
  // (request.stop set, or on_chunk returned false) is kCancelled; other errors: Fetch's.
  Task<Result<HttpResponse>> Perform(HttpRequest request, http::ChunkCallback on_chunk = nullptr);

 private:
  http::AsyncClient& Http();
  std::once_flag http_once_;
  std::unique_ptr<http::AsyncClient> http_;  // made at the first call
};

// One HTTP attempt of a model call, streaming or not: the HTTP response (for a non-2xx
// answer its body holds the error body) or a transport error; fills *reply.
using ModelAttempt = std::function<Task<Result<HttpResponse>>(bool stream, ModelReply* reply)>;

// What a client remembers about its model's server across calls (thread-safe).
struct StreamMemory {
  std::atomic<bool> refused{false};  // the server refused streaming once (mode "auto")
  std::once_flag logged;
};

// Runs attempts until one succeeds. Streams per config.stream and *memory (see
// ModelEndpointConfig::stream); retries per RetryPolicyFor with exponential backoff from
// config.backoff_ms (Retry-After honoured) up to config.max_retries times, waiting on a
// timer (the call's cancellation ends a wait within 50 ms). Fills call.failure when it
// fails. The caller co_awaits it at once: every argument lives until it returns.
Task<Result<ModelReply>> RunWithRetries(const ModelEndpointConfig& config, const ModelCall& call,
                                  StreamMemory* memory, const ModelAttempt& attempt);

// Whether an HTTP status is worth retrying: never (4xx but 408/429, 501, 505, ...),
// once (500 with an error body: the server may have hit a passing fault, but more likely
// it fails this request every time), or up to max_retries (408, 429, 502, 503, 504, 529,
// a 500 without a body).
enum class RetryPolicy { kNever, kOnce, kRetry };
RetryPolicy RetryPolicyFor(long http_status, bool has_body);

// The server's error message from an error body: error.message (OpenAI, Anthropic,
// vLLM, llama.cpp), a string "error", or "message"; else the body itself. Bounded to
// kMaxServerMessage bytes (cut on a UTF-8 boundary, "..." appended).
std::string ServerErrorMessage(std::string_view body);

// Whether an error answer is a refusal to stream (400/422/500/501 naming "stream").
bool IsStreamRefusal(long http_status, std::string_view server_message);

// Seconds to wait from a Retry-After value (delta-seconds or an HTTP date); -1 when
// absent or unreadable.
long RetryAfterSeconds(const HttpResponse& response);

}  // namespace sinew::harness
