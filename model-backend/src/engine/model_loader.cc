#include "model_loader.h"

#include <algorithm>
#include <string_view>
#include <thread>

#include "kv_cache.h"

namespace sinew::model {
namespace {

// Token ids of the vocabulary's end-of-generation tokens.
std::vector<int32_t> FindEogTokens(const GgufFile& f, int32_t n_vocab, int32_t eos) {
  std::vector<int32_t> ids;
  if (eos >= 0) ids.push_back(eos);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    auto v = f.GetInt(key);
    if (v.ok() && *v >= 0 && *v < n_vocab) ids.push_back(static_cast<int32_t>(*v));
  }
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (tokens.ok()) {
    for (size_t i = 0; i < tokens->size() && i < static_cast<size_t>(n_vocab); ++i) {
      const std::string_view t = (*tokens)[i];
      if (t == "<|eot_id|>" || t == "<|im_end|>" || t == "<|end|>" || t == "<|endoftext|>" ||
          t == "<|end_of_text|>" || t == "<end_of_turn>" || t == "<|eom_id|>") {
        ids.push_back(static_cast<int32_t>(i));
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

Result<LoadedModel> LoadModel(const std::string& path, const EngineOptions& options) {
  if (options.n_ctx < 0 || options.n_ctx > EngineOptions::kMaxContext) {
    return Status::InvalidArgument("n_ctx must be in [0, " +
                                   std::to_string(EngineOptions::kMaxContext) + "]");
  }
  if (options.n_batch < 1 || options.n_batch > 8192) {
    return Status::InvalidArgument("n_batch must be in [1, 8192]");
  }
  LoadedModel m;
  SINEW_ASSIGN_OR_RETURN(m.file, GgufFile::Open(path));
  CpuBackendOptions backend_options;
  backend_options.n_threads = options.n_threads;
  backend_options.simd = options.simd;
  SINEW_ASSIGN_OR_RETURN(m.backend, CreateBackendForDevice(options.device, backend_options));
  auto model = Model::Load(*m.file, *m.backend);
  if (!model.ok()) return model.status().WithContext(path);
  m.model = std::move(model).value();
  const HParams& hp = m.model->hparams();

  m.info.arch = hp.arch;
  m.info.name = std::string(m.file->GetStringOr("general.name", "").value_or(""));
  m.info.n_ctx_train = hp.n_ctx_train;
  m.info.n_ctx = options.n_ctx > 0 ? options.n_ctx
                                   : std::min(hp.n_ctx_train, EngineOptions::kDefaultMaxContext);
  m.info.n_vocab = hp.n_vocab;
  m.info.n_embd = hp.n_embd;
  m.info.n_layer = hp.n_layer;
  m.info.n_head = hp.n_head;
  m.info.n_head_kv = hp.n_head_kv;
  m.info.head_dim = hp.head_dim;
  m.info.n_ff = hp.n_ff;
  m.info.n_params = m.model->n_params();
  auto token_id = [&](const char* key) -> int32_t {
    auto v = m.file->GetInt(key);
    return v.ok() && *v >= 0 && *v < hp.n_vocab ? static_cast<int32_t>(*v) : -1;
  };
  m.info.bos_id = token_id("tokenizer.ggml.bos_token_id");
  m.info.eos_id = token_id("tokenizer.ggml.eos_token_id");
  m.info.eog_ids = FindEogTokens(*m.file, hp.n_vocab, m.info.eos_id);
  const bool spm = m.file->GetStringOr("tokenizer.ggml.model", "").value_or("") == "llama";
  auto add_bos = m.file->GetBool("tokenizer.ggml.add_bos_token");
  m.info.add_bos = m.info.bos_id >= 0 && (add_bos.ok() ? *add_bos : spm);
  m.info.weight_type = std::string(GgmlTypeName(m.model->main_weight_type()));
  m.info.simd = std::string(m.backend->name());
  m.info.device = m.backend->device();
  m.info.cache_type_k = std::string(GgmlTypeName(options.cache_type_k));
  m.info.cache_type_v = std::string(GgmlTypeName(options.cache_type_v));
  m.info.n_threads = options.n_threads > 0
                         ? options.n_threads
                         : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  // The cache types are checked here, where a load fails for the rest, though
  // each user creates its own cache.
  const int64_t kv_dim = int64_t{hp.n_head_kv} * hp.head_dim;
  for (GgmlType type : {options.cache_type_k, options.cache_type_v}) {
    if (Status s = CheckKvType(*m.backend, type, kv_dim); !s.ok()) return s.WithContext(path);
  }
  return m;
}

Status CheckPrompt(const std::vector<int32_t>& tokens, const ModelInfo& info) {
  if (tokens.empty()) return Status::InvalidArgument("the prompt has no tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= info.n_vocab) {
      return Status::InvalidArgument("prompt token " + std::to_string(i) + " has id " +
                                     std::to_string(tokens[i]) + ", outside the vocabulary of " +
                                     std::to_string(info.n_vocab));
    }
  }
  if (tokens.size() + 1 > static_cast<size_t>(info.n_ctx)) {
    return Status::OutOfRange("the prompt has " + std::to_string(tokens.size()) +
                              " tokens; the context holds " + std::to_string(info.n_ctx) +
                              " (prompt plus at least one new token)");
  }
  return Status::Ok();
}

}  // namespace sinew::model
