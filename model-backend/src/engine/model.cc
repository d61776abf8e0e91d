// Model::Load: the hyperparameters and weights of a GGUF model, placed on a backend.
#include "model.h"

#include <cstring>
#include <map>
#include <optional>

#include "quant/quants.h"

namespace sinew::model {
namespace {

Status Bad(const std::string& msg) { return Status::Corruption("model: " + msg); }

Result<int32_t> IntKey(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi,
                       std::optional<int64_t> fallback = std::nullopt) {
  if (!f.HasKey(key)) {
    if (fallback) return static_cast<int32_t>(*fallback);
    return Bad("missing metadata key '" + key + "'");
  }
  auto v = f.GetInt(key);
  if (!v.ok()) return Bad(v.status().message());
  if (*v < lo || *v > hi) {
    return Bad("metadata '" + key + "' = " + std::to_string(*v) + " is outside [" +
               std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const GgufFile& file, Backend& backend) {
  std::unique_ptr<Model> model(new Model(backend));
  SINEW_RETURN_IF_ERROR(model->LoadHParams(file));
  if (Status s = model->LoadWeights(file); !s.ok()) {
    if (s.code() != StatusCode::kResourceExhausted) return s;
    int64_t need = 0;
    for (const GgufTensorInfo& t : file.tensors()) need += static_cast<int64_t>(t.size_bytes);
    return s.WithContext("loading the model's " + std::to_string(need) + " bytes of tensors onto " +
                         backend.device());
  }
  SINEW_RETURN_IF_ERROR(model->CheckBackendSupport());
  return model;
}

Status Model::LoadHParams(const GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return Bad(arch.status().message());
  hp_.arch = std::string(*arch);
  if (hp_.arch != "llama" && hp_.arch != "qwen2" && hp_.arch != "qwen3") {
    return Status::Unimplemented("model: architecture '" + hp_.arch +
                                 "' is not supported (llama, qwen2, qwen3)");
  }
  const std::string p = hp_.arch + ".";
  SINEW_ASSIGN_OR_RETURN(hp_.n_embd, IntKey(f, p + "embedding_length", 1, 1 << 16));
  SINEW_ASSIGN_OR_RETURN(hp_.n_layer, IntKey(f, p + "block_count", 1, 1024));
  SINEW_ASSIGN_OR_RETURN(hp_.n_ff, IntKey(f, p + "feed_forward_length", 1, 1 << 20));
  SINEW_ASSIGN_OR_RETURN(hp_.n_head, IntKey(f, p + "attention.head_count", 1, 1024));
  SINEW_ASSIGN_OR_RETURN(hp_.n_head_kv,
                         IntKey(f, p + "attention.head_count_kv", 1, hp_.n_head, hp_.n_head));
  if (hp_.n_head % hp_.n_head_kv != 0) {
    return Bad("head_count " + std::to_string(hp_.n_head) + " is not a multiple of head_count_kv " +
               std::to_string(hp_.n_head_kv));
  }
  SINEW_ASSIGN_OR_RETURN(hp_.n_ctx_train, IntKey(f, p + "context_length", 1, 1 << 24, 2048));
  SINEW_ASSIGN_OR_RETURN(hp_.head_dim, IntKey(f, p + "attention.key_length", 1, 4096,
                                              hp_.n_embd / hp_.n_head));
  SINEW_ASSIGN_OR_RETURN(int32_t v_dim, IntKey(f, p + "attention.value_length", 1, 4096,
                                               hp_.head_dim));
  if (v_dim != hp_.head_dim) {
    return Status::Unimplemented("model: value_length != key_length is not supported");
  }
  if (hp_.head_dim < 2 || hp_.head_dim % 2 != 0) return Bad("head size must be even");
  auto eps = f.GetFloatOr(p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps.ok() || !(*eps > 0 && *eps < 1)) return Bad("invalid layer_norm_rms_epsilon");
  hp_.rms_eps = static_cast<float>(*eps);

  hp_.rope.style = hp_.arch == "llama" ? RopeStyle::kNormal : RopeStyle::kNeox;
  SINEW_ASSIGN_OR_RETURN(hp_.rope.n_rot,
                         IntKey(f, p + "rope.dimension_count", 2, hp_.head_dim, hp_.head_dim));
  if (hp_.rope.n_rot % 2 != 0) return Bad("rope.dimension_count must be even");
  auto base = f.GetFloatOr(p + "rope.freq_base", 10000.0);
  if (!base.ok() || !(*base > 1)) return Bad("invalid rope.freq_base");
  hp_.rope.freq_base = static_cast<float>(*base);
  auto scaling = f.GetStringOr(p + "rope.scaling.type", "none");
  if (!scaling.ok()) return Bad(scaling.status().message());
  if (*scaling == "linear") {
    auto factor = f.GetFloatOr(p + "rope.scaling.factor", 1.0);
    if (!factor.ok() || !(*factor >= 1)) return Bad("invalid rope.scaling.factor");
    hp_.rope.freq_scale = static_cast<float>(1.0 / *factor);
  } else if (*scaling == "yarn") {
    SINEW_RETURN_IF_ERROR(LoadYarn(f, p));
  } else if (*scaling != "none") {
    return Status::Unimplemented("model: rope scaling '" + std::string(*scaling) +
                                 "' is not supported (none, linear, yarn)");
  }
  return Status::Ok();
}

// The keys llama.cpp reads for YaRN: factor, original_context_length (default
// the training context), attn_factor (default 1); beta fast/slow default to
// llama.cpp's 32 and 1 (its later versions read them as rope.scaling.yarn_beta_fast
// and yarn_beta_slow, which are honoured when present). ext_factor is 1.
Status Model::LoadYarn(const GgufFile& f, const std::string& p) {
  auto factor = f.GetFloatOr(p + "rope.scaling.factor", 1.0);
  if (!factor.ok() || !(*factor >= 1 && *factor <= 1024)) return Bad("invalid rope.scaling.factor");
  SINEW_ASSIGN_OR_RETURN(const int32_t n_ctx_orig,
                         IntKey(f, p + "rope.scaling.original_context_length", 1, 1 << 24,
                                hp_.n_ctx_train));
  auto attn = f.GetFloatOr(p + "rope.scaling.attn_factor", 1.0);
  if (!attn.ok() || !(*attn > 0 && *attn <= 16)) return Bad("invalid rope.scaling.attn_factor");
  auto fast = f.GetFloatOr(p + "rope.scaling.yarn_beta_fast", 32.0);
  auto slow = f.GetFloatOr(p + "rope.scaling.yarn_beta_slow", 1.0);
  if (!fast.ok() || !slow.ok() || !(*fast > 0) || !(*slow > 0)) {
    return Bad("invalid rope.scaling.yarn_beta_fast / yarn_beta_slow");
  }
  hp_.rope.freq_scale = static_cast<float>(1.0 / *factor);
  hp_.rope.ext_factor = 1.0f;
  hp_.rope.attn_factor = static_cast<float>(*attn);
  const auto [low, high] = YarnCorrDims(hp_.rope.n_rot, n_ctx_orig, hp_.rope.freq_base,
                                        static_cast<float>(*fast), static_cast<float>(*slow));
  hp_.rope.corr_low = low;
  hp_.rope.corr_high = high;
  return Status::Ok();
}

Result<Tensor> Model::Weight(const GgufFile& f, const std::string& name,
                             std::vector<int64_t> shape, bool required) {
  const GgufTensorInfo* info = f.FindTensor(name);
  if (info == nullptr) {
    if (!required) return Tensor{};
    return Bad("missing tensor '" + name + "'");
  }
  if (info->shape != shape) {
    std::string want, got;
    for (int64_t d : shape) want += std::to_string(d) + " ";
    for (int64_t d : info->shape) got += std::to_string(d) + " ";
    return Bad("tensor '" + name + "' has shape [ " + got + "], expected [ " + want + "]");
  }
  auto buf = backend_.memory().WrapHost(info->data, info->size_bytes);
  if (!buf.ok()) {
    SINEW_ASSIGN_OR_RETURN(buf, backend_.memory().Allocate(info->size_bytes));
    SINEW_RETURN_IF_ERROR((*buf)->Write(0, info->data, info->size_bytes));
  }
  Tensor t;
  t.type = info->type;
  for (size_t d = 0; d < shape.size(); ++d) t.ne[d] = shape[d];
  t.data = (*buf)->data();
  buffers_.push_back(std::move(buf).value());
  n_params_ += info->n_elements;
  return t;
}

Result<Tensor> Model::F32Vector(const GgufFile& f, const std::string& name, int64_t n,
                                bool required) {
  const GgufTensorInfo* info = f.FindTensor(name);
  if (info == nullptr) {
    if (!required) return Tensor{};
    return Bad("missing tensor '" + name + "'");
  }
  if (info->shape.size() != 1 || info->shape[0] != n) {
    return Bad("tensor '" + name + "' must be a vector of " + std::to_string(n));
  }
  std::vector<float> values(static_cast<size_t>(n));
  quant::DequantizeRow(static_cast<uint32_t>(info->type), info->data, values.data(), n);
  SINEW_ASSIGN_OR_RETURN(auto buf, backend_.memory().Allocate(static_cast<size_t>(n) * 4));
  SINEW_RETURN_IF_ERROR(buf->Write(0, values.data(), values.size() * 4));
  Tensor t = Tensor::F32(static_cast<float*>(buf->data()), n);
  buffers_.push_back(std::move(buf));
  n_params_ += n;
  return t;
}

Status Model::LoadWeights(const GgufFile& f) {
  const GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr || emb->shape.size() != 2) return Bad("missing or malformed token_embd.weight");
  if (emb->shape[1] < 1 || emb->shape[1] > (1 << 24)) return Bad("vocabulary size out of range");
  hp_.n_vocab = static_cast<int32_t>(emb->shape[1]);
  const int64_t E = hp_.n_embd, V = hp_.n_vocab, F = hp_.n_ff;
  const int64_t QD = int64_t{hp_.n_head} * hp_.head_dim, KD = int64_t{hp_.n_head_kv} * hp_.head_dim;
  SINEW_ASSIGN_OR_RETURN(tok_embd_, Weight(f, "token_embd.weight", {E, V}));
  SINEW_ASSIGN_OR_RETURN(output_norm_, F32Vector(f, "output_norm.weight", E));
  SINEW_ASSIGN_OR_RETURN(output_, Weight(f, "output.weight", {E, V}, /*required=*/false));
  if (output_.data == nullptr) output_ = tok_embd_;  // tied embeddings
  if (const GgufTensorInfo* rf = f.FindTensor("rope_freqs.weight"); rf != nullptr) {
    if (rf->shape.size() != 1 || rf->shape[0] != hp_.rope.n_rot / 2 || rf->type != GgmlType::kF32) {
      return Bad("rope_freqs.weight must be F32 [n_rot/2]");
    }
    rope_freqs_.resize(static_cast<size_t>(rf->shape[0]));
    std::memcpy(rope_freqs_.data(), rf->data, rope_freqs_.size() * 4);
    hp_.rope.freq_factors = rope_freqs_.data();
  }
  std::map<GgmlType, int64_t> bytes_by_type;
  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    LayerWeights& w = layers_[static_cast<size_t>(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    SINEW_ASSIGN_OR_RETURN(w.attn_norm, F32Vector(f, b + "attn_norm.weight", E));
    SINEW_ASSIGN_OR_RETURN(w.wq, Weight(f, b + "attn_q.weight", {E, QD}));
    SINEW_ASSIGN_OR_RETURN(w.wk, Weight(f, b + "attn_k.weight", {E, KD}));
    SINEW_ASSIGN_OR_RETURN(w.wv, Weight(f, b + "attn_v.weight", {E, KD}));
    SINEW_ASSIGN_OR_RETURN(w.wo, Weight(f, b + "attn_output.weight", {QD, E}));
    SINEW_ASSIGN_OR_RETURN(w.bq, F32Vector(f, b + "attn_q.bias", QD, false));
    SINEW_ASSIGN_OR_RETURN(w.bk, F32Vector(f, b + "attn_k.bias", KD, false));
    SINEW_ASSIGN_OR_RETURN(w.bv, F32Vector(f, b + "attn_v.bias", KD, false));
    SINEW_ASSIGN_OR_RETURN(w.q_norm, F32Vector(f, b + "attn_q_norm.weight", hp_.head_dim, false));
    SINEW_ASSIGN_OR_RETURN(w.k_norm, F32Vector(f, b + "attn_k_norm.weight", hp_.head_dim, false));
    SINEW_ASSIGN_OR_RETURN(w.ffn_norm, F32Vector(f, b + "ffn_norm.weight", E));
    SINEW_ASSIGN_OR_RETURN(w.w_gate, Weight(f, b + "ffn_gate.weight", {E, F}));
    SINEW_ASSIGN_OR_RETURN(w.w_up, Weight(f, b + "ffn_up.weight", {E, F}));
    SINEW_ASSIGN_OR_RETURN(w.w_down, Weight(f, b + "ffn_down.weight", {F, E}));
    for (const Tensor* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      bytes_by_type[t->type] += t->bytes();
    }
  }
  int64_t best = -1;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > best) {
      best = bytes;
      main_type_ = type;
    }
  }
  return Status::Ok();
}

Status Model::CheckBackendSupport() {
  BackendOps& ops = backend_.ops();
  auto need = [&](Op op, GgmlType type, const std::string& what) -> Status {
    if (ops.Supports(op, type)) return Status::Ok();
    return Status::Unimplemented("backend " + std::string(backend_.name()) + " has no " +
                                 std::string(OpName(op)) + " for " +
                                 std::string(GgmlTypeName(type)) + " (" + what + ")");
  };
  SINEW_RETURN_IF_ERROR(need(Op::kGetRows, tok_embd_.type, "token_embd.weight"));
  SINEW_RETURN_IF_ERROR(need(Op::kMatMul, output_.type, "output.weight"));
  for (const LayerWeights& w : layers_) {
    for (const Tensor* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      SINEW_RETURN_IF_ERROR(need(Op::kMatMul, t->type, "layer weight"));
    }
  }
  for (Op op : {Op::kGetRows, Op::kAddBias, Op::kAdd, Op::kRmsNorm, Op::kRope, Op::kSwiGlu}) {
    SINEW_RETURN_IF_ERROR(need(op, GgmlType::kF32, "activations"));
  }
  // YaRN is implemented by the CPU backend only (the CUDA Rope refuses it).
  const bool yarn = hp_.rope.ext_factor != 0.0f || hp_.rope.attn_factor != 1.0f;
  if (yarn && !backend_.name().starts_with("cpu")) {
    return Status::Unimplemented("backend " + std::string(backend_.name()) +
                                 " has no YaRN rope scaling (use --device cpu)");
  }
  return Status::Ok();
}

}  // namespace sinew::model
