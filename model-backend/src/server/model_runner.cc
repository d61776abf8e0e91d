#include "model_runner.h"

#include "stop_matcher.h"
#include "forced_tool_call.h"

#include <algorithm>
#include <boost/json.hpp>

namespace sinew::model {

ModelRunner::ModelRunner(std::unique_ptr<ServingEngine> engine, std::unique_ptr<Tokenizer> tokenizer,
                         ChatTemplate chat_template, std::string model_id)
    : engine_(std::move(engine)),
      tokenizer_(std::move(tokenizer)),
      template_(std::move(chat_template)),
      model_id_(std::move(model_id)) {
  auto table = std::make_shared<TokenTable>();
  for (int32_t id = 0; id < tokenizer_->size(); ++id) table->pieces.push_back(tokenizer_->TokenPiece(id));
  table->eog_ids = engine_->info().eog_ids;
  token_table_ = std::move(table);
  // A token's stored text is at least as long as the bytes it covers (byte-level BPE and
  // SPM's "▁" only lengthen it); NFC can shrink text up to 3x before the split.
  for (const std::string& token : tokenizer_->vocab().tokens) {
    max_bytes_per_token_ = std::max(max_bytes_per_token_, token.size());
  }
  if (tokenizer_->vocab().normalizer == Normalizer::kNfc) max_bytes_per_token_ *= 3;
}

Result<std::unique_ptr<ModelRunner>> ModelRunner::Load(const std::string& gguf_path,
                                                       const EngineOptions& options,
                                                       std::string model_id,
                                                       const ServingOptions& serving,
                                                       std::string_view chat_template_source) {
  SINEW_ASSIGN_OR_RETURN(std::unique_ptr<ServingEngine> engine,
                         ServingEngine::Load(gguf_path, options, serving));
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(engine->gguf());
  if (!tokenizer.ok()) return tokenizer.status().WithContext("tokenizer of " + gguf_path);
  if ((*tokenizer)->size() > engine->info().n_vocab) {
    return Status::InvalidArgument("the vocabulary has " + std::to_string((*tokenizer)->size()) +
                                   " tokens but the model only " +
                                   std::to_string(engine->info().n_vocab));
  }
  Result<std::string_view> source = engine->gguf().GetStringOr("tokenizer.chat_template", "");
  if (!source.ok()) return source.status().WithContext("tokenizer.chat_template");
  ChatTemplate chat_template(ChatTemplateKind::kPlain);
  const bool overridden = !chat_template_source.empty();
  if (overridden || !source->empty()) {
    const Vocab& vocab = (*tokenizer)->vocab();
    ChatTemplateTokens tokens;
    if (vocab.bos_id >= 0) tokens.bos = (*tokenizer)->TokenPiece(vocab.bos_id, /*render_special=*/true);
    if (vocab.eos_id >= 0) tokens.eos = (*tokenizer)->TokenPiece(vocab.eos_id, /*render_special=*/true);
    Result<ChatTemplate> jinja =
        ChatTemplate::FromJinja(overridden ? chat_template_source : *source, std::move(tokens));
    if (!jinja.ok()) {
      return jinja.status().WithContext(overridden ? std::string("--chat-template")
                                                   : "tokenizer.chat_template of " + gguf_path +
                                                         " (override it with --chat-template FILE)");
    }
    chat_template = std::move(jinja).value();
  }
  if (model_id.empty()) {
    size_t slash = gguf_path.find_last_of('/');
    model_id = slash == std::string::npos ? gguf_path : gguf_path.substr(slash + 1);
    if (model_id.size() > 5 && model_id.ends_with(".gguf")) model_id.resize(model_id.size() - 5);
  }
  return std::unique_ptr<ModelRunner>(new ModelRunner(
      std::move(engine), std::move(tokenizer).value(), std::move(chat_template), std::move(model_id)));
}

Result<std::vector<int32_t>> ModelRunner::PromptTokens(const GenerationRequest& request) const {
  if (!request.chat && !request.prompt_tokens.empty()) {
    for (int32_t id : request.prompt_tokens) {
      if (id >= info().n_vocab) {
        return Status::InvalidArgument("prompt token id " + std::to_string(id) +
                                       " is outside the vocabulary of " +
                                       std::to_string(info().n_vocab));
      }
    }
    return request.prompt_tokens;
  }
  SINEW_ASSIGN_OR_RETURN(std::string text, PromptText(request));
  const auto n_ctx = static_cast<size_t>(info().n_ctx);
  if (text.size() / max_bytes_per_token_ >= n_ctx) {
    return Status::OutOfRange("the prompt has " + std::to_string(text.size()) +
                              " bytes, more than the context of " + std::to_string(n_ctx) +
                              " tokens can hold (refused before tokenizing)");
  }
  // A template that prints {{ bos_token }} itself gets no second BOS.
  const std::string& bos = template_.tokens().bos;
  const bool has_bos = request.chat && template_.is_jinja() && !bos.empty() && text.starts_with(bos);
  std::vector<int32_t> tokens =
      tokenizer_->Encode(text, {.add_special = !has_bos, .parse_special = true});
  if (tokens.empty()) return Status::InvalidArgument("the prompt is empty");
  return tokens;
}

Result<std::string> ModelRunner::PromptText(const GenerationRequest& request) const {
  if (!request.chat) return request.prompt;
  std::vector<ChatTool> tools;
  if (request.tool_choice != ToolChoice::kNone) {
    for (const ToolSpec& t : request.tools) {
      tools.push_back({t.name, t.description, boost::json::serialize(t.parameters), t.json});
    }
  }
  SINEW_ASSIGN_OR_RETURN(std::string text,
                         template_.Render(request.messages, tools, request.add_generation_prompt));
  // A forced call: the family's opening text is part of the prompt; the output is the
  // rest of the call (PlanForcedToolCall). A prompt that opened reasoning (DeepSeek R1,
  // Qwen 3) gets it closed first: the call is the answer.
  if (!tools.empty() && request.tool_choice != ToolChoice::kAuto) {
    if (text.ends_with("<think>\n") || text.ends_with("<think>")) text += "\n</think>\n\n";
    text += PlanForcedToolCall(request, template_.tool_format()).frame.open;
  }
  return text;
}

Result<GenerationOutcome> ModelRunner::Run(const GenerationRequest& request,
                                           const ChunkSink& sink) {
  SINEW_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptTokens(request));
  const int64_t n_ctx = info().n_ctx;
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt + 1 > n_ctx) {
    return Status::OutOfRange("the prompt has " + std::to_string(n_prompt) +
                              " tokens but the context holds " + std::to_string(n_ctx) +
                              " (including at least one generated token)");
  }
  SamplingParams params = request.sampling;
  if (params.max_tokens > n_ctx - n_prompt) {
    if (request.max_tokens_given) {
      return Status::OutOfRange("the prompt has " + std::to_string(n_prompt) +
                                " tokens and max_tokens is " + std::to_string(params.max_tokens) +
                                ", more than the context of " + std::to_string(n_ctx) + " tokens");
    }
    params.max_tokens = static_cast<int32_t>(n_ctx - n_prompt);
  }
  std::vector<std::string> stops = request.stop;
  if (request.chat) {
    for (std::string& stop : template_.StopStrings()) stops.push_back(std::move(stop));
  }
  StopMatcher matcher(std::move(stops));
  StreamingDetokenizer detokenizer(*tokenizer_, /*at_start=*/false);
  TextChunk pending;
  bool cancelled = false;

  auto emit = [&](std::string text) {
    pending.text = std::move(text);
    bool keep_going = sink(std::move(pending));
    pending = TextChunk{};
    if (!keep_going) cancelled = true;
    return keep_going;
  };
  auto on_token = [&](const GeneratedToken& token) -> bool {
    pending.tokens.push_back(token);
    std::string text = matcher.Push(detokenizer.Push(token.id));
    if (!text.empty() && !emit(std::move(text))) return false;
    return !matcher.stopped();
  };
  std::unique_ptr<TokenConstraint> constraint;
  if (request.chat && request.response_schema) {
    SINEW_ASSIGN_OR_RETURN(constraint, MakeJsonSchemaConstraint(*request.response_schema,
                                                                token_table_));
  } else if (request.chat && !request.tools.empty() &&
             (request.tool_choice == ToolChoice::kRequired ||
              request.tool_choice == ToolChoice::kNamed)) {
    SINEW_ASSIGN_OR_RETURN(
        constraint, MakeFramedJsonConstraint(
                        PlanForcedToolCall(request, template_.tool_format()).alternatives,
                        token_table_));
  }
  Result<GenerationResult> result =
      engine_->Generate(prompt, params, on_token, std::move(constraint));
  if (!result.ok()) return result.status();

  if (!cancelled) {
    std::string tail;
    if (!matcher.stopped()) tail = matcher.Push(detokenizer.Flush());
    if (!matcher.stopped()) tail += matcher.Flush();
    if (!tail.empty() || !pending.tokens.empty()) emit(std::move(tail));
  }
  GenerationOutcome outcome;
  if (cancelled) {
    outcome.finish_reason = "cancelled";
  } else if (matcher.stopped() || result->finish_reason == FinishReason::kStopToken ||
             result->finish_reason == FinishReason::kCallback) {
    outcome.finish_reason = "stop";
    if (matcher.stopped() &&
        std::find(request.stop.begin(), request.stop.end(), matcher.matched()) != request.stop.end()) {
      outcome.stop_sequence = matcher.matched();
    }
  } else {
    outcome.finish_reason = "length";
  }
  outcome.prompt_tokens = static_cast<int32_t>(n_prompt);
  outcome.completion_tokens = static_cast<int32_t>(result->tokens.size());
  outcome.prompt_ms = result->timings.prompt_ms;
  outcome.generation_ms = result->timings.generation_ms;
  return outcome;
}

}  // namespace sinew::model
