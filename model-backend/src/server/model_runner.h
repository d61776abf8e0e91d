// ModelRunner: text in, text out over the ServingEngine. Renders chat prompts, tokenizes
// (BOS when the vocabulary asks for it), checks the context, runs the generation, turns
// tokens into UTF-8-safe text chunks and applies text-level stop strings.
//
// Ownership: owns the ServingEngine and the Tokenizer. Thread-safety: Run() may be called
// from several threads at once; the serving engine batches their generations.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "generation_request.h"
#include "sinew/model/chat_template.h"
#include "sinew/model/constraint.h"
#include "sinew/model/engine.h"
#include "sinew/model/serving.h"
#include "sinew/model/tokenizer.h"
#include "sinew/status.h"

namespace sinew::model {

class ModelRunner {
 public:
  // Receives each chunk as soon as it is final; returning false cancels the generation.
  using ChunkSink = std::function<bool(TextChunk&&)>;

  // Loads the engine and the tokenizer from `gguf_path`. `model_id` names the model in
  // the API (default: the file name without .gguf). The chat template is
  // `chat_template_source` (Jinja) when not empty, else the GGUF's
  // `tokenizer.chat_template`, else the built-in plain fallback.
  // Errors: those of the engine and tokenizer; InvalidArgument naming the template
  // line for a template that does not parse.
  [[nodiscard]] static Result<std::unique_ptr<ModelRunner>> Load(const std::string& gguf_path,
                                                                 const EngineOptions& options,
                                                                 std::string model_id,
                                                                 const ServingOptions& serving = {},
                                                                 std::string_view chat_template_source = {});

  const std::string& model_id() const { return model_id_; }
  const ModelInfo& info() const { return engine_->info(); }
  ServingStats serving_stats() const { return engine_->stats(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return template_; }

  // Errors (nothing is generated): InvalidArgument for bad messages or parameters,
  // OutOfRange when the prompt (plus max_tokens when given) does not fit the context.
  [[nodiscard]] Result<GenerationOutcome> Run(const GenerationRequest& request,
                                              const ChunkSink& sink);

  // The prompt tokens `request` would be given (BOS included when the vocabulary has it).
  [[nodiscard]] Result<std::vector<int32_t>> PromptTokens(const GenerationRequest& request) const;

  // The text a chat request's prompt is tokenized from (the rendered template, plus the
  // opening of a forced tool call); a completion's prompt as given.
  // Errors: InvalidArgument from the chat template.
  [[nodiscard]] Result<std::string> PromptText(const GenerationRequest& request) const;

 private:
  ModelRunner(std::unique_ptr<ServingEngine> engine, std::unique_ptr<Tokenizer> tokenizer,
              ChatTemplate chat_template, std::string model_id);

  // Constant after construction.
  std::unique_ptr<ServingEngine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTemplate template_;
  std::string model_id_;
  std::shared_ptr<const TokenTable> token_table_;  // for constrained decoding
  // No token stands for more prompt bytes than this: a prompt longer than the context
  // times this is refused before it is tokenized (which would hold it all in memory).
  size_t max_bytes_per_token_ = 1;
};

}  // namespace sinew::model
