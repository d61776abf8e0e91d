// The ModelClient implementations and the pieces they share (internal): the HTTP
// clients' base (calls without a thread), the retry loop with the streaming fallback,
// the retry policy, server error messages and the <think> splitter.
#pragma once

#include <boost/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "async.h"
#include "outgoing_http.h"
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

class ReplicaRouting;  // replica_routing.h

// A model client over HTTP (OpenAI, Anthropic): a call is a coroutine whose requests go
// out on the client's own http::AsyncClient (libcurl's multi interface, one thread for
// every call of the client), so a call in flight holds no thread of the caller's: the
// agent loop's coroutine waits for it like for a timer. Complete, for callers that do
// block, runs the same coroutine on an io_context of its own: one code path for both.
//
// What every protocol shares lives here: the retries (RunWithRetries), the request's
// common parts (POST {base}{Path()}, JSON, the trace, timeout, cancellation, CA file), a
// whole reply's handling (error bodies, a body that is not JSON, an error inside a 200,
// tool call ids, the stop reason) and where each attempt goes: config.base_url, or with
// config.replicas the replica ReplicaRouting picks. A protocol's subclass writes the
// body, its headers, and reads a whole reply's object and a stream.
class HttpModelClient : public ModelClient {
 public:
  HttpModelClient(ModelEndpointConfig config, std::string api_key);
  ~HttpModelClient() override;
  Result<ModelReply> Complete(const ModelCall& call, const TokenCallback& on_token) final;
  Task<Result<ModelReply>> CompleteAsync(const ModelCall& call, const TokenCallback& on_token,
                                         asio::thread_pool& blocking) final;
  void Shutdown() override;
  // The replicas' metrics (ReplicaRouter::MetricsText); "" without replicas.
  std::string MetricsText(std::string_view model) const final;

 protected:
  // Error bodies are kept up to this size (the message in them is bounded further).
  static constexpr size_t kMaxErrorBody = 16384;

  // The call's request body, without the streaming fields.
  virtual boost::json::object RequestBody(const ModelCall& call) const = 0;
  // Sets the streaming fields of one attempt's body (default: "stream").
  virtual void SetStream(boost::json::object* body, bool stream) const;
  // The path after the base URL, like "/chat/completions".
  virtual std::string Path() const = 0;
  // The protocol's own headers (authentication with `api_key`, which may be empty;
  // versions), after Content-Type and Accept.
  virtual std::vector<std::string> ProtocolHeaders(const std::string& api_key) const = 0;
  // Reads a whole 2xx reply's JSON object into *reply (text, reasoning, usage, stop
  // reason) and *tool_calls (by position). False when the object reports an error
  // instead: the attempt is then answered as the server's HTTP 500 with that body.
  virtual bool ReadWholeReply(const boost::json::object& o, ModelReply* reply,
                              std::map<uint64_t, ModelToolCall>* tool_calls) const = 0;
  // One streamed attempt of `req` (built here, Accept: text/event-stream): fills *reply
  // (ending with FinishReply) and passes answer text to `on_token` as it comes. Returns
  // as ModelAttempt says.
  virtual Task<Result<HttpResponse>> StreamedAttempt(const ModelCall& call, HttpRequest req,
                                                     const TokenCallback& on_token, ModelReply* reply) = 0;
  // The prefix of the ids given to tool calls that came without one ("call", "toolu").
  virtual std::string_view ToolCallIdPrefix() const = 0;

  // Moves `tool_calls` into the reply, each with an id ("<prefix>_<turn>_<index>" when it
  // had none) and an input ("{}" when empty), and sets the stop reason when the server
  // gave none ("tool_use" with calls, else "end_turn").
  void FinishReply(const ModelCall& call, std::map<uint64_t, ModelToolCall> tool_calls,
                   ModelReply* reply) const;
  // One HTTP request on the client's thread; `on_chunk` runs there. A transfer stopped
  // (request.stop set, or on_chunk returned false) is kCancelled; other errors: Fetch's.
  Task<Result<HttpResponse>> Perform(HttpRequest request, http::ChunkCallback on_chunk = nullptr);

  const ModelEndpointConfig& config() const { return config_; }

 private:
  // One call, with its retries.
  Task<Result<ModelReply>> Call(const ModelCall& call, const TokenCallback& on_token);
  // One attempt against the server at `base_url`.
  Task<Result<HttpResponse>> Attempt(const ModelCall& call, std::string body, bool stream,
                                     const std::string& base_url, const TokenCallback& on_token,
                                     ModelReply* reply);
  HttpRequest Request(const ModelCall& call, std::string body, bool stream,
                      const std::string& base_url) const;
  Task<Result<HttpResponse>> WholeAttempt(const ModelCall& call, HttpRequest req,
                                          const TokenCallback& on_token, ModelReply* reply);
  http::AsyncClient& Http();

  const ModelEndpointConfig config_;
  const std::string api_key_;
  StreamMemory memory_;
  std::unique_ptr<ReplicaRouting> routing_;  // set when config_.replicas is
  std::once_flag http_once_;
  std::unique_ptr<http::AsyncClient> http_;  // made at the first call
};

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
