#include "api_handler.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <chrono>

#include "openai_request.h"
#include "anthropic_request.h"
#include "anthropic_response.h"
#include "openai_response.h"
#include "sinew/trace.h"

namespace sinew::model {
namespace json = boost::json;
namespace {

using Clock = std::chrono::steady_clock;

// Recorded (never sent) for a generation cancelled because its client hung up.
constexpr int kClientClosedRequest = 499;

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsJsonContentType(std::string_view content_type) {
  std::string lower = Lower(content_type);
  std::string_view media = std::string_view(lower).substr(0, lower.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  return media == "application/json";
}

}  // namespace

ApiError ApiErrorFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return {400, "invalid_request_error", "invalid_parameter"};
    case StatusCode::kNotFound:
      return {400, "invalid_request_error", "model_not_found"};
    case StatusCode::kOutOfRange:
      return {400, "invalid_request_error", "context_length_exceeded"};
    case StatusCode::kUnimplemented:
      return {400, "invalid_request_error", "unsupported_parameter"};
    case StatusCode::kResourceExhausted:
      return {503, "server_error", "server_busy"};
    default:
      return {500, "server_error", "internal_error"};
  }
}

ApiHandler::ApiHandler(ModelRunner& runner, Metrics& metrics, JobQueue& queue)
    : runner_(runner), metrics_(metrics), queue_(queue), started_at_(UnixSeconds()) {}

std::string ApiHandler::ModelsBody() const {
  const ModelInfo& info = runner_.info();
  json::object meta;
  meta["arch"] = info.arch;
  meta["n_ctx"] = info.n_ctx;
  meta["n_ctx_train"] = info.n_ctx_train;
  meta["n_vocab"] = info.n_vocab;
  meta["n_params"] = info.n_params;
  meta["weight_type"] = info.weight_type;
  meta["device"] = info.device;
  meta["backend"] = info.simd;
  meta["cache_type_k"] = info.cache_type_k;
  meta["cache_type_v"] = info.cache_type_v;
  meta["chat_template"] = runner_.chat_template().name();
  json::object model;
  model["id"] = runner_.model_id();
  model["object"] = "model";
  model["created"] = started_at_;
  model["owned_by"] = "sinew";
  model["meta"] = std::move(meta);
  json::object body;
  body["object"] = "list";
  body["data"] = json::array{std::move(model)};
  return json::serialize(body);
}

void ApiHandler::Handle(HttpRequest request, std::shared_ptr<ResponseStream> stream) {
  Clock::time_point start = Clock::now();
  std::string path = request.target.substr(0, request.target.find('?'));
  auto reply = [&](const std::string& endpoint, int status, std::string content_type,
                   std::string body) {
    metrics_.RecordRequest(endpoint, status, SecondsSince(start));
    stream->Send(status, std::move(content_type), std::move(body));
  };
  bool is_get = request.method == "GET";
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (request.method != "POST") {
      reply(path, 405, "application/json",
            ErrorBody("use POST for " + path, "invalid_request_error", "method_not_allowed"));
      return;
    }
    HandleGeneration(path, path == "/v1/chat/completions", std::move(request), std::move(stream));
    return;
  }
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens") {
    if (request.method != "POST") {
      SendError(ApiFormat::kAnthropic, path, start, *stream, 405, "use POST for " + path,
                "invalid_request_error", "method_not_allowed");
      return;
    }
    HandleMessages(path, std::move(request), std::move(stream));
    return;
  }
  if (path.starts_with("/v1/messages/")) {
    SendError(ApiFormat::kAnthropic, "other", start, *stream, 404,
              "no route for " + request.method + " " + path, "invalid_request_error", "not_found");
    return;
  }
  if (path == "/apply-template") {
    if (request.method != "POST") {
      reply(path, 405, "application/json",
            ErrorBody("use POST for " + path, "invalid_request_error", "method_not_allowed"));
      return;
    }
    std::optional<OpenAiRequest> parsed = ParseChatBody(path, request, true, *stream, start);
    if (!parsed) return;
    Result<std::string> prompt = runner_.PromptText(parsed->generation);
    if (!prompt.ok()) {
      ApiError error = ApiErrorFor(prompt.status());
      reply(path, error.http_status, "application/json",
            ErrorBody(prompt.status().message(), error.type, error.code));
      return;
    }
    reply(path, 200, "application/json", json::serialize(json::object{{"prompt", *prompt}}));
    return;
  }
  if (path.starts_with("/v1/models/") && is_get) {
    std::string id = path.substr(std::string("/v1/models/").size());
    if (id != runner_.model_id()) {
      reply("/v1/models", 404, "application/json",
            ErrorBody("model \"" + id + "\" does not exist", "invalid_request_error",
                      "model_not_found"));
      return;
    }
    json::value models = json::parse(ModelsBody());
    reply("/v1/models", 200, "application/json", json::serialize(models.at("data").at(0)));
    return;
  }
  if (path == "/health" || path == "/metrics" || path == "/v1/models") {
    if (!is_get) {
      reply(path, 405, "application/json",
            ErrorBody("use GET for " + path, "invalid_request_error", "method_not_allowed"));
      return;
    }
    if (path == "/health") {
      json::object body;
      body["status"] = "ok";
      body["model"] = runner_.model_id();
      reply(path, 200, "application/json", json::serialize(body));
    } else if (path == "/metrics") {
      metrics_.RecordRequest(path, 200, SecondsSince(start));
      stream->Send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.Render());
    } else {
      reply(path, 200, "application/json", ModelsBody());
    }
    return;
  }
  reply("other", 404, "application/json",
        ErrorBody("no route for " + request.method + " " + path, "invalid_request_error",
                  "not_found"));
}

// The Anthropic error type of an HTTP status (AnthropicErrorFor's, and those the handler
// answers itself).
std::string_view AnthropicTypeFor(int status) {
  switch (status) {
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

void ApiHandler::SendError(ApiFormat format, const std::string& endpoint, Clock::time_point start,
                           ResponseStream& stream, int status, std::string_view message,
                           std::string_view type, std::string_view code) {
  metrics_.RecordRequest(endpoint, status, SecondsSince(start));
  if (format == ApiFormat::kAnthropic) {
    // Overloaded: when to retry, as the transport adds to a 503 (Anthropic's SDKs read it).
    http::Headers headers;
    if (status == 529) headers.emplace_back("Retry-After", "1");
    stream.Send({status, "application/json", AnthropicErrorBody(AnthropicTypeFor(status), message),
                 std::move(headers)});
  } else {
    stream.Send(status, "application/json", ErrorBody(message, type, code));
  }
}

void ApiHandler::SendStatusError(ApiFormat format, const std::string& endpoint,
                                 Clock::time_point start, ResponseStream& stream,
                                 const Status& status) {
  if (format == ApiFormat::kAnthropic) {
    SendError(format, endpoint, start, stream, AnthropicErrorFor(status).http_status,
              status.message(), "", "");
    return;
  }
  ApiError error = ApiErrorFor(status);
  SendError(format, endpoint, start, stream, error.http_status, status.message(), error.type,
            error.code);
}

std::optional<json::value> ApiHandler::ParseJsonBody(ApiFormat format, const std::string& endpoint,
                                                     const HttpRequest& request,
                                                     ResponseStream& stream,
                                                     Clock::time_point start) {
  if (!IsJsonContentType(request.content_type)) {
    SendError(format, endpoint, start, stream, 400,
              "Content-Type must be application/json (got \"" + request.content_type + "\")",
              "invalid_request_error", "unsupported_media_type");
    return std::nullopt;
  }
  boost::system::error_code ec;
  json::parse_options options;
  options.max_depth = 64;
  json::value body = json::parse(request.body, ec, json::storage_ptr(), options);
  if (ec) {
    SendError(format, endpoint, start, stream, 400, "malformed JSON body: " + ec.message(),
              "invalid_request_error", "invalid_json");
    return std::nullopt;
  }
  return body;
}

std::optional<OpenAiRequest> ApiHandler::ParseChatBody(const std::string& endpoint,
                                                       const HttpRequest& request, bool chat,
                                                       ResponseStream& stream,
                                                       Clock::time_point start) {
  std::optional<json::value> body =
      ParseJsonBody(ApiFormat::kOpenAi, endpoint, request, stream, start);
  if (!body) return std::nullopt;
  ParseLimits limits;
  limits.model_id = runner_.model_id();
  limits.default_max_tokens = chat ? runner_.info().n_ctx : 16;
  Result<OpenAiRequest> parsed = ParseOpenAiRequest(*body, chat, limits);
  if (!parsed.ok()) {
    SendStatusError(ApiFormat::kOpenAi, endpoint, start, stream, parsed.status());
    return std::nullopt;
  }
  return std::move(parsed).value();
}

void ApiHandler::HandleGeneration(const std::string& endpoint, bool chat, HttpRequest request,
                                  std::shared_ptr<ResponseStream> stream) {
  Clock::time_point start = Clock::now();
  // The caller's trace (W3C traceparent; a new one when absent or invalid) is in the log
  // context of this thread and of the job's (docs/logging.md).
  LogFields fields = FieldsForIncoming(request.Header("traceparent"));
  fields.extra.emplace_back("endpoint", endpoint);
  ScopedLogContext log_context(fields);
  spdlog::info("request started: {} {}", request.method, endpoint);
  std::optional<OpenAiRequest> parsed = ParseChatBody(endpoint, request, chat, *stream, start);
  if (!parsed) {
    spdlog::info("request ended: refused before generation");
    return;
  }
  auto shared_request = std::make_shared<OpenAiRequest>(std::move(*parsed));
  GenerationJob job;
  job.endpoint = endpoint;
  job.format = ApiFormat::kOpenAi;
  job.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(started_at_) + "-" +
           std::to_string(next_id_.fetch_add(1));
  job.start = start;
  job.stream = shared_request->stream;
  job.generation =
      std::shared_ptr<const GenerationRequest>(shared_request, &shared_request->generation);
  job.make_responder = [this, shared_request, id = job.id] {
    return std::make_unique<OpenAiResponder>(*shared_request, runner_.tokenizer(),
                                             runner_.model_id(), id, UnixSeconds());
  };
  Submit(std::move(job), std::move(stream));
}

void ApiHandler::HandleMessages(const std::string& endpoint, HttpRequest request,
                                std::shared_ptr<ResponseStream> stream) {
  Clock::time_point start = Clock::now();
  LogFields fields = FieldsForIncoming(request.Header("traceparent"));
  fields.extra.emplace_back("endpoint", endpoint);
  ScopedLogContext log_context(fields);
  spdlog::info("request started: {} {}", request.method, endpoint);
  std::optional<json::value> body =
      ParseJsonBody(ApiFormat::kAnthropic, endpoint, request, *stream, start);
  if (!body) {
    spdlog::info("request ended: refused before generation");
    return;
  }
  AnthropicParseLimits limits;
  limits.model_id = runner_.model_id();
  limits.count_only = endpoint == "/v1/messages/count_tokens";
  Result<AnthropicRequest> parsed = ParseAnthropicRequest(*body, limits);
  if (!parsed.ok()) {
    SendStatusError(ApiFormat::kAnthropic, endpoint, start, *stream, parsed.status());
    spdlog::info("request ended: refused before generation");
    return;
  }
  if (limits.count_only) {
    Result<std::vector<int32_t>> tokens = runner_.PromptTokens(parsed->generation);
    if (!tokens.ok()) {
      SendStatusError(ApiFormat::kAnthropic, endpoint, start, *stream, tokens.status());
      return;
    }
    metrics_.RecordRequest(endpoint, 200, SecondsSince(start));
    stream->Send(200, "application/json",
                 json::serialize(json::object{{"input_tokens", tokens->size()}}));
    return;
  }
  auto shared_request = std::make_shared<AnthropicRequest>(std::move(parsed).value());
  GenerationJob job;
  job.endpoint = endpoint;
  job.format = ApiFormat::kAnthropic;
  job.id = "msg_" + std::to_string(started_at_) + "_" + std::to_string(next_id_.fetch_add(1));
  job.start = start;
  job.stream = shared_request->stream;
  job.generation =
      std::shared_ptr<const GenerationRequest>(shared_request, &shared_request->generation);
  job.make_responder = [this, shared_request, id = job.id] {
    // message_start carries the prompt's length before the generation reports it.
    int32_t input_tokens = 0;
    if (shared_request->stream) {
      Result<std::vector<int32_t>> prompt = runner_.PromptTokens(shared_request->generation);
      if (prompt.ok()) input_tokens = static_cast<int32_t>(prompt->size());
    }
    return std::make_unique<AnthropicResponder>(*shared_request, runner_.model_id(), id,
                                                input_tokens);
  };
  Submit(std::move(job), std::move(stream));
}

void ApiHandler::Submit(GenerationJob job, std::shared_ptr<ResponseStream> stream) {
  const std::string endpoint = job.endpoint;
  const ApiFormat format = job.format;
  const Clock::time_point start = job.start;
  auto run = [this, job = std::move(job), stream, fields = CurrentLogFields()] {
    ScopedLogContext job_context(fields);
    RunJob(job, *stream);
  };
  if (!queue_.TrySubmit(std::move(run))) {
    const int status = format == ApiFormat::kAnthropic ? 529 : 503;
    spdlog::info("request ended: {} server_busy", status);
    SendError(format, endpoint, start, *stream, status,
              "the server is busy: too many generations are waiting; retry later", "server_error",
              "server_busy");
  }
}

void ApiHandler::RunJob(const GenerationJob& job, ResponseStream& stream) {
  const std::string& endpoint = job.endpoint;
  const Clock::time_point start = job.start;
  const GenerationRequest& g = *job.generation;
  std::unique_ptr<GenerationResponder> responder = job.make_responder();
  if (g.chat) {  // a prompt ending in <think> (DeepSeek R1) starts the output in reasoning
    Result<std::string> prompt = runner_.PromptText(g);
    if (prompt.ok()) {
      std::string_view p = *prompt;
      while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.remove_suffix(1);
      responder->SetReasoningOpenedByPrompt(p.ends_with("<think>"));
    }
  }
  if (g.chat && !g.tools.empty() && g.tool_choice != ToolChoice::kNone) {
    responder->EnableTools(runner_.chat_template(), g.tool_choice != ToolChoice::kAuto);
  }
  bool started = false;
  auto start_events = [&] {
    started = true;
    if (!stream.StartEvents()) return false;
    std::string first = responder->StreamStart();
    return first.empty() || stream.SendEvent(std::move(first));
  };
  auto sink = [&](TextChunk&& chunk) -> bool {
    if (!job.stream) {
      responder->Accumulate(chunk);
      return stream.ClientConnected();
    }
    if (!started && !start_events()) return false;
    std::string event = responder->StreamChunk(chunk);
    return event.empty() || stream.SendEvent(std::move(event));
  };
  Result<GenerationOutcome> outcome = Status::Internal("not run");
  try {
    outcome = runner_.Run(g, sink);
  } catch (const std::exception& error) {  // request boundary: answer instead of dying
    outcome = Status::Internal(std::string("generation failed: ") + error.what());
  }
  if (!outcome.ok()) {
    spdlog::info("request ended: {}", outcome.status().message());
    if (!started) {
      SendStatusError(job.format, endpoint, start, stream, outcome.status());
      return;
    }
    if (job.format == ApiFormat::kAnthropic) {
      AnthropicError error = AnthropicErrorFor(outcome.status());
      metrics_.RecordRequest(endpoint, error.http_status, SecondsSince(start));
      stream.SendEvent(AnthropicErrorEvent(error.type, outcome.status().message()));
    } else {
      ApiError error = ApiErrorFor(outcome.status());
      metrics_.RecordRequest(endpoint, error.http_status, SecondsSince(start));
      stream.SendEvent("data: " + ErrorBody(outcome.status().message(), error.type, error.code) +
                       "\n\n");
    }
    stream.EndEvents();
    return;
  }
  metrics_.RecordGeneration(outcome->prompt_tokens, outcome->completion_tokens,
                            outcome->prompt_ms / 1000.0, outcome->generation_ms / 1000.0);
  spdlog::info("request ended: {} {}, {} prompt and {} completion tokens, {:.0f} ms", job.id,
               outcome->finish_reason, outcome->prompt_tokens, outcome->completion_tokens,
               SecondsSince(start) * 1000);
  if (outcome->finish_reason == "cancelled") {
    metrics_.RecordRequest(endpoint, kClientClosedRequest, SecondsSince(start));
    return;  // nobody is listening
  }
  // Recorded before the answer leaves, so a client that reads /metrics next sees it.
  metrics_.RecordRequest(endpoint, 200, SecondsSince(start));
  if (job.stream) {
    if (!started) start_events();
    stream.SendEvent(responder->StreamEnd(*outcome));
    stream.EndEvents();
  } else {
    stream.Send(200, "application/json", responder->Body(*outcome));
  }
}

}  // namespace sinew::model
