// ApiHandler: the OpenAI-compatible HTTP API of sinew-model. Routes a request, validates
// it, runs generations on the JobQueue and answers through the ResponseStream:
//   GET  /health, /metrics, /v1/models
//   POST /v1/completions, /v1/chat/completions   (stream: true -> server-sent events)
//   POST /apply-template   a chat request's messages, tools and add_generation_prompt
//                          (default true) -> {"prompt": the text the model would be fed}
// Errors are {"error":{"message","type","code"}} with 400 for bad requests, 404/405 for
// unknown paths/methods, 503 when the queue is full.
//
// Thread-safety: Handle() may be called from any thread; it never blocks on the model.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <memory>
#include <string>

#include "job_queue.h"
#include "metrics.h"
#include "model_runner.h"
#include "openai_request.h"
#include "response_stream.h"

namespace sinew::model {

// Maps a Status from validation or generation to (HTTP status, error type, error code).
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
  void HandleGeneration(const std::string& endpoint, bool chat, HttpRequest request,
                        std::shared_ptr<ResponseStream> stream);
  std::string ModelsBody() const;
  // Parses a JSON chat request body; on failure answers with the 400 and returns nullopt.
  std::optional<OpenAiRequest> ParseChatBody(const std::string& endpoint, const HttpRequest& request,
                                             bool chat, ResponseStream& stream,
                                             std::chrono::steady_clock::time_point start);

  ModelRunner& runner_;
  Metrics& metrics_;
  JobQueue& queue_;
  std::atomic<uint64_t> next_id_{1};
  const int64_t started_at_;
};

}  // namespace sinew::model
