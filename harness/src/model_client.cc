#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <chrono>
#include <ctime>
#include <exception>
#include <optional>

#include "async.h"
#include "model_clients.h"
#include "replica_routing.h"
#include "sinew/http/url.h"
#include "sinew/trace.h"

namespace sinew::harness {

Task<Result<ModelReply>> ModelClient::CompleteAsync(const ModelCall& call, const TokenCallback& on_token,
                                                    asio::thread_pool& blocking) {
  co_return co_await OnPool(blocking, [&] { return Complete(call, on_token); });
}

namespace {

namespace json = boost::json;

constexpr long kMaxRetryAfterSeconds = 60;

// Cuts `text` to at most `max` bytes on a UTF-8 boundary, marking the cut with "...".
std::string Bounded(std::string text, size_t max) {
  if (text.size() <= max) return text;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + "...";
}

// Waits `ms` on a timer, ending early when the call is cancelled.
Task<void> SleepUnlessCancelled(uint32_t ms, const std::atomic<bool>* cancelled) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (cancelled != nullptr && cancelled->load()) co_return;
    co_await SleepFor(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50),
                                                                     until - std::chrono::steady_clock::now()));
  }
}

}  // namespace

HttpModelClient::HttpModelClient(ModelEndpointConfig config, std::string api_key)
    : config_(std::move(config)), api_key_(std::move(api_key)) {
  if (!config_.replicas.empty()) routing_ = std::make_unique<ReplicaRouting>(config_);
}

HttpModelClient::~HttpModelClient() = default;

std::string HttpModelClient::MetricsText(std::string_view model) const {
  return routing_ ? routing_->MetricsText(model) : std::string();
}

void HttpModelClient::SetStream(json::object* body, bool stream) const { (*body)["stream"] = stream; }

void HttpModelClient::FinishReply(const ModelCall& call, std::map<uint64_t, ModelToolCall> tool_calls,
                                  ModelReply* reply) const {
  for (auto& [index, tc] : tool_calls) {
    if (tc.id.empty()) {
      tc.id = std::string(ToolCallIdPrefix()) + "_" + std::to_string(call.turn) + "_" + std::to_string(index);
    }
    if (tc.input_json.empty()) tc.input_json = "{}";
    reply->tool_calls.push_back(std::move(tc));
  }
  if (reply->stop_reason.empty()) reply->stop_reason = reply->tool_calls.empty() ? "end_turn" : "tool_use";
}

Task<Result<ModelReply>> HttpModelClient::Call(const ModelCall& call, const TokenCallback& on_token) {
  const json::object base = RequestBody(call);
  co_return co_await RunWithRetries(
      config_, call, &memory_, [&](bool stream, ModelReply* reply) -> Task<Result<HttpResponse>> {
        json::object body = base;
        SetStream(&body, stream);
        if (!routing_) co_return co_await Attempt(call, json::serialize(body), stream, config_.base_url, on_token, reply);
        co_return co_await routing_->Route(call.affinity.empty() ? call.session_id : call.affinity, [&](const std::string& base_url) {
          return Attempt(call, json::serialize(body), stream, base_url, on_token, reply);
        });
      });
}

Task<Result<HttpResponse>> HttpModelClient::Attempt(const ModelCall& call, std::string body, bool stream,
                                                    const std::string& base_url, const TokenCallback& on_token,
                                                    ModelReply* reply) {
  HttpRequest req = Request(call, std::move(body), stream, base_url);
  if (stream) co_return co_await StreamedAttempt(call, std::move(req), on_token, reply);
  co_return co_await WholeAttempt(call, std::move(req), on_token, reply);
}

HttpRequest HttpModelClient::Request(const ModelCall& call, std::string body, bool stream,
                                     const std::string& base_url) const {
  HttpRequest req;
  req.method = "POST";
  req.url = base_url + Path();
  req.headers = {"Content-Type: application/json", stream ? "Accept: text/event-stream" : "Accept: application/json"};
  for (auto& h : ProtocolHeaders(api_key_)) req.headers.push_back(std::move(h));
  // The session's trace, a fresh span per attempt (docs/logging.md).
  if (std::string tp = OutgoingTraceparent(); !tp.empty()) req.headers.push_back("traceparent: " + tp);
  req.body = std::move(body);
  req.timeout_ms = config_.timeout_seconds * 1000;
  req.stop = call.cancelled;
  req.tls.ca_file = config_.ca_file;
  return req;
}

Task<Result<HttpResponse>> HttpModelClient::WholeAttempt(const ModelCall& call, HttpRequest req,
                                                         const TokenCallback& on_token, ModelReply* reply) {
  auto response = co_await Perform(std::move(req));
  if (!response.ok()) co_return response;
  if (response->status < 200 || response->status >= 300) {
    if (response->body.size() > kMaxErrorBody) response->body.resize(kMaxErrorBody);
    co_return response;
  }
  boost::system::error_code ec;
  json::value v = json::parse(response->body, ec);
  if (ec || !v.is_object()) {
    co_return Status::Corruption("model server sent a reply that is not a JSON object: " +
                                 response->body.substr(0, 200));
  }
  std::map<uint64_t, ModelToolCall> tool_calls;
  if (!ReadWholeReply(v.as_object(), reply, &tool_calls)) {
    response->status = 500;  // an error inside a 200: treated as the server's failure
    response->body.resize(std::min(response->body.size(), kMaxErrorBody));
    co_return response;
  }
  if (!reply->text.empty() && on_token) on_token(reply->text);
  FinishReply(call, std::move(tool_calls), reply);
  response->body.clear();
  co_return response;
}

Result<ModelReply> HttpModelClient::Complete(const ModelCall& call, const TokenCallback& on_token) {
  asio::io_context io;
  std::optional<Result<ModelReply>> out;
  asio::co_spawn(
      io, [&]() -> Task<void> { out.emplace(co_await Call(call, on_token)); },
      [](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
      });
  io.run();
  // The coroutine's last wake-up came from the HTTP client's thread, which may still be
  // inside asio::post on `io`.
  WaitForForeignPosts();
  return std::move(*out);
}

Task<Result<ModelReply>> HttpModelClient::CompleteAsync(const ModelCall& call, const TokenCallback& on_token,
                                                        asio::thread_pool& /*blocking*/) {
  co_return co_await Call(call, on_token);
}

void HttpModelClient::Shutdown() {
  // Made now if it never was, so that no call can make one afterwards: a stopped client
  // answers later requests as cancelled.
  Http().Stop();
}

http::AsyncClient& HttpModelClient::Http() {
  std::call_once(http_once_, [this] { http_ = std::make_unique<http::AsyncClient>(); });
  return *http_;
}

Task<Result<HttpResponse>> HttpModelClient::Perform(HttpRequest request, http::ChunkCallback on_chunk) {
  const std::string what = request.method + " " + request.url;
  auto response = co_await AwaitCallback<Result<HttpResponse>>([&](std::function<void(Result<HttpResponse>)> done) {
    Http().Start(std::move(request), std::move(on_chunk), std::move(done));
  });
  co_return CancelledIfStopped(std::move(response), what);
}

Result<std::unique_ptr<ModelClient>> MakeModelClient(const ModelEndpointConfig& config,
                                                     const std::string& api_key) {
  if (config.stream != "auto" && config.stream != "on" && config.stream != "off") {
    return Status::InvalidArgument("model stream mode must be auto, on or off, not '" + config.stream + "'");
  }
  if (config.kind == "openai") return NewOpenAiClient(config, api_key);
  if (config.kind == "anthropic") return NewAnthropicClient(config, api_key);
  if (config.kind == "scripted") return NewScriptedModel(config);
  if (config.kind == kBuiltinOracleKind) return NewOracleAgent();
  if (config.kind == kBuiltinNopKind) return NewNopAgent();
  return Status::InvalidArgument("unknown model kind '" + config.kind + "'");
}

RetryPolicy RetryPolicyFor(long http_status, bool has_body) {
  switch (http_status) {
    case 408: case 429: case 502: case 503: case 504: case 529:
      return RetryPolicy::kRetry;
    case 500:
      return has_body ? RetryPolicy::kOnce : RetryPolicy::kRetry;
    default:
      return RetryPolicy::kNever;
  }
}

std::string ServerErrorMessage(std::string_view body) {
  std::string message;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    const auto& o = v.as_object();
    if (const auto* e = o.if_contains("error")) {
      if (e->is_string()) message = std::string(e->as_string());
      if (e->is_object()) {
        if (const auto* m = e->as_object().if_contains("message"); m && m->is_string()) {
          message = std::string(m->as_string());
        } else {
          message = json::serialize(*e);
        }
      }
    }
    if (message.empty()) {
      if (const auto* m = o.if_contains("message"); m && m->is_string()) message = std::string(m->as_string());
    }
  }
  if (message.empty()) message = std::string(body);
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) message.pop_back();
  if (message.empty()) message = "(empty body)";
  return Bounded(std::move(message), kMaxServerMessage);
}

bool IsStreamRefusal(long http_status, std::string_view server_message) {
  if (http_status != 400 && http_status != 422 && http_status != 500 && http_status != 501) return false;
  std::string lower(server_message);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("stream") != std::string::npos;
}

long RetryAfterSeconds(const HttpResponse& response) {
  for (const auto& [name, value] : response.headers) {
    if (name != "retry-after" || value.empty()) continue;
    if (std::all_of(value.begin(), value.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return value.size() > 9 ? 999999999L : std::stol(value);
    }
    const std::optional<std::time_t> at = http::ParseHttpDate(value);
    if (!at) return -1;
    return std::max<long>(0, static_cast<long>(*at - std::time(nullptr)));
  }
  return -1;
}

Task<Result<ModelReply>> RunWithRetries(const ModelEndpointConfig& config, const ModelCall& call,
                                        StreamMemory* memory, const ModelAttempt& attempt) {
  uint32_t backoff_ms = std::max<uint32_t>(config.backoff_ms, 1);
  bool stream = config.stream == "on" || (config.stream == "auto" && !memory->refused.load());
  bool retried_once = false;  // a 500 with a body was retried already
  uint32_t retries = 0;
  ModelFailure failure;
  Status last;
  auto fail = [&](Status s) -> Status {
    if (call.failure != nullptr) *call.failure = failure;
    return s;
  };
  for (;;) {
    if (call.cancelled != nullptr && call.cancelled->load()) {
      co_return fail(Status::Cancelled("model call cancelled"));
    }
    ModelReply reply;
    ++failure.attempts;
    auto response = co_await attempt(stream, &reply);
    uint32_t wait_ms = backoff_ms;
    if (response.ok()) {
      const long code = response->status;
      if (code >= 200 && code < 300) {
        reply.attempts = failure.attempts;
        reply.streamed = stream;
        co_return reply;
      }
      failure.http_status = code;
      failure.server_message = ServerErrorMessage(response->body);
      const std::string what = "HTTP " + std::to_string(code) + ": " + failure.server_message;
      if (stream && IsStreamRefusal(code, failure.server_message)) {
        if (config.stream == "auto") {
          memory->refused = true;
          std::call_once(memory->logged, [&] {
            spdlog::warn("model {} at {}: the server refused streaming ({}); calling it without streaming from now on",
                         config.model, config.base_url.empty() ? "its replicas" : config.base_url, what);
          });
          stream = false;
          continue;  // the same call at once, not counted as a retry
        }
        failure.retryable = false;
        co_return fail(Status::InvalidArgument("model server refused streaming: " + what +
                                            " (this model's stream is \"on\"; \"auto\" or \"off\" calls it without)"));
      }
      RetryPolicy policy = RetryPolicyFor(code, !response->body.empty());
      if (policy == RetryPolicy::kOnce && retried_once) policy = RetryPolicy::kNever;
      const std::string attempts = failure.attempts > 1 ? " (after " + std::to_string(failure.attempts) + " attempts)" : "";
      if (policy == RetryPolicy::kNever) {
        failure.retryable = false;
        if (code < 500) co_return fail(Status::InvalidArgument("model server refused the request: " + what));
        co_return fail(Status::Unavailable("model server failed the request" + attempts + ": " + what));
      }
      if (policy == RetryPolicy::kOnce) retried_once = true;
      last = Status::Unavailable(what);
      if (const long after = RetryAfterSeconds(*response); after >= 0) {
        if (after > kMaxRetryAfterSeconds) {
          failure.retryable = true;
          co_return fail(Status::Unavailable("model server asks to retry after " + std::to_string(after) +
                                          " s, longer than the harness waits" + attempts + ": " + what));
        }
        wait_ms = std::max<uint32_t>(wait_ms, static_cast<uint32_t>(after * 1000));
      }
    } else {
      const StatusCode code = response.status().code();
      failure.http_status = 0;
      failure.server_message = Bounded(response.status().message(), kMaxServerMessage);
      if (code == StatusCode::kCancelled || code == StatusCode::kCorruption) {
        failure.retryable = false;
        co_return fail(response.status());
      }
      last = response.status();
    }
    failure.retryable = true;
    if (retries >= config.max_retries) break;
    ++retries;
    co_await SleepUnlessCancelled(wait_ms, call.cancelled);
    backoff_ms = std::min<uint32_t>(backoff_ms * 2, 30000);
  }
  const std::string summary =
      "model call failed after " + std::to_string(failure.attempts) + " attempts: " + last.message();
  if (last.code() == StatusCode::kDeadlineExceeded) co_return fail(Status::DeadlineExceeded(summary));
  co_return fail(Status::Unavailable(summary));
}

}  // namespace sinew::harness
