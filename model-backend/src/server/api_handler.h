// ApiHandler: the OpenAI-compatible HTTP API of sinew-model. Routes a request, validates
// it, runs generations on the JobQueue and answers through the ResponseStream:
//   GET  /health, /metrics, /v1/models
//   POST /v1/completions, /v1/chat/completions   (stream: true -> server-sent events)
//   POST /apply-template   a chat request's messages, tools and add_generation_prompt
//                          (default true) -> {"prompt": the text the model would be fed}
//   POST /v1/messages, /v1/messages/count_tokens   Anthropic's Messages API
//                          (anthropic_request.h, anthropic_response.h)
// Errors are {"error":{"message","type","code"}} with 400 for bad requests, 404/405 for
// unknown paths/methods, 503 when the queue is full; under /v1/messages Anthropic's
// {"type":"error","error":{"type","message"}} with 400, 404 (unknown model or path), 405
// and 529 (overloaded_error) when the queue is full.
// Every API's generation runs through one path: its parser builds a GenerationRequest,
// ModelRunner::Run generates, its GenerationResponder writes the answer.
//
// Thread-safety: Handle() may be called from any thread; it never blocks on the model.
#pragma once

#include <atomic>
#include <boost/json/value.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "generation_responder.h"
#include "job_queue.h"
#include "metrics.h"
#include "model_runner.h"
#include "openai_request.h"
#include "response_stream.h"

namespace sinew::model {

// Maps a Status from validation or generation to (HTTP status, error type, error code).
enum class ApiFormat { kOpenAi, kAnthropic };

struct ApiError {
  int http_status = 400;
  std::string type;
  std::string code;
};
ApiError ApiErrorFor(const Status& status);

class ApiHandler {
 public:
  // REQUIRES: every argument outlives the handler and every job it submitted.
  ApiHandler(ModelRunner& runner, Metrics& metrics, JobQueue& queue);

  void Handle(HttpRequest request, std::shared_ptr<ResponseStream> stream);

 private:
  using Clock = std::chrono::steady_clock;
  // One generation to run on the queue, whichever API it came from.
  struct GenerationJob {
    std::string endpoint;
    ApiFormat format = ApiFormat::kOpenAi;
    std::string id;
    Clock::time_point start;
    bool stream = false;
    std::shared_ptr<const GenerationRequest> generation;  // keeps its API request alive
    // Called on the job's thread, before the generation.
    std::function<std::unique_ptr<GenerationResponder>()> make_responder;
  };

  void HandleGeneration(const std::string& endpoint, bool chat, HttpRequest request,
                        std::shared_ptr<ResponseStream> stream);
  void HandleMessages(const std::string& endpoint, HttpRequest request,
                      std::shared_ptr<ResponseStream> stream);
  // Submits `job` to the queue (answers busy when it is full).
  void Submit(GenerationJob job, std::shared_ptr<ResponseStream> stream);
  void RunJob(const GenerationJob& job, ResponseStream& stream);
  std::string ModelsBody() const;
  // Answers an error in `format` and records it.
  void SendError(ApiFormat format, const std::string& endpoint, Clock::time_point start,
                 ResponseStream& stream, int status, std::string_view message,
                 std::string_view type, std::string_view code);
  void SendStatusError(ApiFormat format, const std::string& endpoint, Clock::time_point start,
                       ResponseStream& stream, const Status& status);
  // The body as JSON (application/json required); on failure answers with the 400 and
  // returns nullopt.
  std::optional<boost::json::value> ParseJsonBody(ApiFormat format, const std::string& endpoint,
                                                  const HttpRequest& request,
                                                  ResponseStream& stream, Clock::time_point start);
  // Parses a JSON chat request body; on failure answers with the 400 and returns nullopt.
  std::optional<OpenAiRequest> ParseChatBody(const std::string& endpoint, const HttpRequest& request,
                                             bool chat, ResponseStream& stream,
                                             Clock::time_point start);

  ModelRunner& runner_;
  Metrics& metrics_;
  JobQueue& queue_;
  std::atomic<uint64_t> next_id_{1};
  const int64_t started_at_;
};

}  // namespace sinew::model
