#include "grpc_service.h"

#include <chrono>
#include <future>

#include <spdlog/spdlog.h>

#include "sinew/grpc_status.h"
#include "sinew/grpc_trace.h"

namespace sinew::model {
namespace {

// An unknown model or a prompt too long for the context is a bad argument of the call.
Status AsClientError(const Status& status) {
  if (status.code() == StatusCode::kNotFound || status.code() == StatusCode::kOutOfRange) {
    return Status::InvalidArgument(status.message());
  }
  return status;
}

}  // namespace

Result<GenerationRequest> FromProto(const sinew::v1::GenerateRequest& request,
                                    const std::string& model_id) {
  if (!request.model().empty() && request.model() != model_id) {
    return Status::NotFound("model \"" + request.model() +
                            "\" does not exist; this server serves \"" + model_id + "\"");
  }
  GenerationRequest out;
  bool has_prompt = !request.prompt().empty();
  bool has_messages = request.messages_size() > 0;
  if (has_prompt == has_messages) {
    return Status::InvalidArgument("exactly one of prompt and messages must be set");
  }
  out.chat = has_messages;
  out.prompt = request.prompt();
  for (const auto& message : request.messages()) {
    out.messages.push_back({message.role(), message.content()});
  }
  if (request.max_tokens() < 0) return Status::InvalidArgument("max_tokens must not be negative");
  out.sampling.max_tokens = request.max_tokens() == 0 ? 16 : request.max_tokens();
  out.max_tokens_given = request.max_tokens() != 0;
  if (request.has_temperature()) {
    if (!(request.temperature() >= 0.0f && request.temperature() <= 2.0f)) {
      return Status::InvalidArgument("temperature must be between 0 and 2");
    }
    out.sampling.temperature = request.temperature();
  }
  if (request.has_top_p()) {
    if (!(request.top_p() > 0.0f && request.top_p() <= 1.0f)) {
      return Status::InvalidArgument("top_p must be in (0, 1]");
    }
    out.sampling.top_p = request.top_p();
  }
  if (request.has_top_k()) {
    if (request.top_k() < 0) return Status::InvalidArgument("top_k must not be negative");
    out.sampling.top_k = request.top_k();
  }
  if (request.has_min_p()) {
    if (!(request.min_p() >= 0.0f && request.min_p() <= 1.0f)) {
      return Status::InvalidArgument("min_p must be between 0 and 1");
    }
    out.sampling.min_p = request.min_p();
  }
  if (request.has_repetition_penalty()) {
    if (!(request.repetition_penalty() >= 0.01f && request.repetition_penalty() <= 10.0f)) {
      return Status::InvalidArgument("repetition_penalty must be between 0.01 and 10");
    }
    out.sampling.repetition_penalty = request.repetition_penalty();
  }
  if (request.has_frequency_penalty()) {
    if (!(request.frequency_penalty() >= -2.0f && request.frequency_penalty() <= 2.0f)) {
      return Status::InvalidArgument("frequency_penalty must be between -2 and 2");
    }
    out.sampling.frequency_penalty = request.frequency_penalty();
  }
  if (request.has_presence_penalty()) {
    if (!(request.presence_penalty() >= -2.0f && request.presence_penalty() <= 2.0f)) {
      return Status::InvalidArgument("presence_penalty must be between -2 and 2");
    }
    out.sampling.presence_penalty = request.presence_penalty();
  }
  if (request.has_seed()) out.sampling.seed = request.seed();
  if (request.stop_size() > 4) return Status::InvalidArgument("stop may hold at most 4 strings");
  for (const std::string& stop : request.stop()) out.stop.push_back(stop);
  out.want_logprobs = request.logprobs();
  SINEW_RETURN_IF_ERROR(out.sampling.Validate());
  return out;
}

grpc::Status GrpcModelService::Generate(grpc::ServerContext* context,
                                        const sinew::v1::GenerateRequest* request,
                                        grpc::ServerWriter<sinew::v1::GenerateResponse>* writer) {
  auto start = std::chrono::steady_clock::now();
  // The caller's trace (traceparent metadata; a new one when absent or invalid).
  LogFields fields = FieldsForCall(*context);
  fields.extra.emplace_back("endpoint", "grpc_generate");
  ScopedLogContext log_context(std::move(fields));
  spdlog::info("request started: gRPC Generate");
  auto finish = [&](const grpc::Status& status) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_.RecordRequest("grpc_generate", static_cast<int>(status.error_code()), seconds);
    spdlog::info("request ended: gRPC status {}{}{}, {:.0f} ms", static_cast<int>(status.error_code()),
                 status.ok() ? "" : ": ", status.error_message(), seconds * 1000);
    return status;
  };
  Result<GenerationRequest> generation = FromProto(*request, runner_.model_id());
  if (!generation.ok()) return finish(ToGrpcStatus(AsClientError(generation.status())));

  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  bool submitted = queue_.TrySubmit([&, promise] {
    auto sink = [&](TextChunk&& chunk) -> bool {
      if (context->IsCancelled()) return false;
      sinew::v1::GenerateResponse response;
      response.set_text(chunk.text);
      for (const GeneratedToken& token : chunk.tokens) {
        response.add_token_ids(token.id);
        if (generation->want_logprobs) response.add_logprobs(token.logprob);
      }
      return writer->Write(response);
    };
    Result<GenerationOutcome> outcome = Status::Internal("not run");
    try {
      outcome = runner_.Run(*generation, sink);
    } catch (const std::exception& error) {  // request boundary
      outcome = Status::Internal(std::string("generation failed: ") + error.what());
    }
    if (!outcome.ok()) {
      promise->set_value(outcome.status());
      return;
    }
    metrics_.RecordGeneration(outcome->prompt_tokens, outcome->completion_tokens,
                              outcome->prompt_ms / 1000.0, outcome->generation_ms / 1000.0);
    if (outcome->finish_reason == "cancelled") {
      promise->set_value(Status::Cancelled("the client went away"));
      return;
    }
    sinew::v1::GenerateResponse last;
    last.set_finish_reason(outcome->finish_reason);
    last.mutable_usage()->set_prompt_tokens(static_cast<uint64_t>(outcome->prompt_tokens));
    last.mutable_usage()->set_completion_tokens(static_cast<uint64_t>(outcome->completion_tokens));
    writer->Write(last);
    promise->set_value(Status::Ok());
  });
  if (!submitted) {
    return finish(
        ToGrpcStatus(Status::ResourceExhausted("too many generations are waiting; retry later")));
  }
  try {
    return finish(ToGrpcStatus(AsClientError(result.get())));
  } catch (const std::future_error&) {  // the job was dropped at shutdown
    return finish(ToGrpcStatus(Status::Unavailable("the server is shutting down")));
  }
}

}  // namespace sinew::model
