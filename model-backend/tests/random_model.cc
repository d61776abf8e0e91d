#include "random_model.h"

#include <cmath>
#include <random>
#include <vector>

#include "copy_circuit.h"
#include "sinew/model/gguf_writer.h"

namespace sinew::model::testing {
namespace {

GgmlType Fit(GgmlType want, int64_t row) {
  if (row % GgmlBlockSize(want) == 0) return want;
  if (row % 32 == 0) return GgmlType::kQ8_0;
  return GgmlType::kF32;
}

class Filler {
 public:
  explicit Filler(uint64_t seed) : rng_(seed) {}
  // Uniform in [center - spread, center + spread].
  std::vector<float> Values(int64_t n, float center, float spread) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
      x = center + spread * static_cast<float>(2 * u - 1);
    }
    return v;
  }

 private:
  std::mt19937_64 rng_;
};


// A SentencePiece-style vocabulary that other GGUF readers (llama.cpp's
// llama-server) can tokenize any text with: <unk>, <s>, </s>, the 256 byte
// tokens <0x00>..<0xFF> (byte fallback), then "▁" and every printable ASCII
// character alone and after "▁", then filler pieces "t<id>". Vocabularies too
// small for the byte tokens get the specials and filler only.
void WriteVocabulary(const RandomModelSpec& s, GgufWriter& w) {
  constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  if (s.n_vocab >= kRandomVocabBytesFrom + 256) {
    static const char* kHex = "0123456789ABCDEF";
    for (int byte = 0; byte < 256; ++byte) {
      tokens.push_back(std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">");
      types.push_back(kByte);
    }
    const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's space
    std::vector<std::string> pieces = {space};
    for (char c = '!'; c <= '~'; ++c) pieces.push_back(std::string(1, c));
    for (char c = '!'; c <= '~'; ++c) pieces.push_back(space + c);
    for (const std::string& piece : pieces) {
      if (static_cast<int32_t>(tokens.size()) >= s.n_vocab) break;
      tokens.push_back(piece);
      types.push_back(kNormal);
    }
  }
  while (static_cast<int32_t>(tokens.size()) < s.n_vocab) {
    tokens.push_back("t" + std::to_string(tokens.size()));
    types.push_back(kNormal);
  }
  tokens.resize(static_cast<size_t>(s.n_vocab));
  types.resize(static_cast<size_t>(s.n_vocab));
  std::vector<float> scores;
  for (int32_t i = 0; i < s.n_vocab; ++i) scores.push_back(-static_cast<float>(i));
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos_id));
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace

int64_t RandomModelParams(const RandomModelSpec& s) {
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t qd = hd * s.n_head, kd = hd * s.n_head_kv;
  int64_t per_layer = 2 * s.n_embd + s.n_embd * (qd + 2 * kd) + qd * s.n_embd +
                      3 * int64_t{s.n_embd} * s.n_ff;
  if (s.arch == "qwen2") per_layer += qd + 2 * kd;
  if (s.arch == "qwen3") per_layer += 2 * hd;
  int64_t total = int64_t{s.n_layer} * per_layer + int64_t{s.n_vocab} * s.n_embd + s.n_embd;
  if (!s.tied_output) total += int64_t{s.n_vocab} * s.n_embd;
  return total;
}

Status WriteRandomModel(const RandomModelSpec& s, const std::string& path) {
  if (s.copy_circuit) SINEW_RETURN_IF_ERROR(CheckCopyCircuitSpec(s));
  GgufWriter w;
  const std::string a = s.arch;
  const int32_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  w.SetString("general.architecture", a);
  w.SetString("general.name", "random-" + a);
  w.SetUint32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.SetUint32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.SetUint32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.SetUint32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.SetUint32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.SetUint32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetFloat32(a + ".rope.freq_base", s.rope_base);
  if (s.head_dim > 0) {
    w.SetUint32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.SetUint32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  if (s.rope_dims > 0) w.SetUint32(a + ".rope.dimension_count", static_cast<uint32_t>(s.rope_dims));
  if (s.rope_linear_factor > 0) {
    w.SetString(a + ".rope.scaling.type", "linear");
    w.SetFloat32(a + ".rope.scaling.factor", s.rope_linear_factor);
  }
  if (s.rope_yarn_factor > 0) {
    w.SetString(a + ".rope.scaling.type", "yarn");
    w.SetFloat32(a + ".rope.scaling.factor", s.rope_yarn_factor);
    if (s.rope_yarn_orig_ctx > 0) {
      w.SetUint32(a + ".rope.scaling.original_context_length",
                  static_cast<uint32_t>(s.rope_yarn_orig_ctx));
    }
    if (s.rope_yarn_attn_factor > 0) {
      w.SetFloat32(a + ".rope.scaling.attn_factor", s.rope_yarn_attn_factor);
    }
  }
  WriteVocabulary(s, w);
  if (!s.chat_template.empty()) w.SetString("tokenizer.chat_template", s.chat_template);

  Filler fill(s.seed);
  auto matrix = [&](const std::string& name, int64_t k, int64_t n, GgmlType type) {
    const GgmlType t = Fit(type, k);
    // Scaled so that activations keep roughly unit size through the layers.
    const auto v = s.copy_circuit
                       ? CopyCircuitTensor(s, name, k, n)
                       : fill.Values(k * n, 0.0f, 1.7f / std::sqrt(static_cast<float>(k)));
    w.AddTensor(name, t, {k, n}, EncodeTensorData(t, v.data(), k * n));
  };
  auto vec = [&](const std::string& name, int64_t n, float center, float spread) {
    const auto v =
        s.copy_circuit ? CopyCircuitTensor(s, name, n, 1) : fill.Values(n, center, spread);
    w.AddTensor(name, GgmlType::kF32, {n}, EncodeTensorData(GgmlType::kF32, v.data(), n));
  };
  const int64_t E = s.n_embd, qd = int64_t{hd} * s.n_head, kd = int64_t{hd} * s.n_head_kv;
  {
    const GgmlType t = Fit(s.embd_type, E);
    const auto v = s.copy_circuit ? CopyCircuitTensor(s, "token_embd.weight", E, s.n_vocab)
                                  : fill.Values(E * s.n_vocab, 0.0f, 1.0f);
    w.AddTensor("token_embd.weight", t, {E, s.n_vocab}, EncodeTensorData(t, v.data(), E * s.n_vocab));
  }
  if (s.copy_circuit) vec("rope_freqs.weight", hd / 2, 0.0f, 0.0f);
  vec("output_norm.weight", E, 1.0f, 0.2f);
  if (!s.tied_output) matrix("output.weight", E, s.n_vocab, s.weight_type);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    vec(b + "attn_norm.weight", E, 1.0f, 0.2f);
    matrix(b + "attn_q.weight", E, qd, s.weight_type);
    matrix(b + "attn_k.weight", E, kd, s.weight_type);
    matrix(b + "attn_v.weight", E, kd, s.weight_type);
    matrix(b + "attn_output.weight", qd, E, s.weight_type);
    if (a == "qwen2") {
      vec(b + "attn_q.bias", qd, 0.0f, 0.5f);
      vec(b + "attn_k.bias", kd, 0.0f, 0.5f);
      vec(b + "attn_v.bias", kd, 0.0f, 0.5f);
    }
    if (a == "qwen3") {
      vec(b + "attn_q_norm.weight", hd, 1.0f, 0.3f);
      vec(b + "attn_k_norm.weight", hd, 1.0f, 0.3f);
    }
    vec(b + "ffn_norm.weight", E, 1.0f, 0.2f);
    matrix(b + "ffn_gate.weight", E, s.n_ff, s.weight_type);
    matrix(b + "ffn_up.weight", E, s.n_ff, s.weight_type);
    matrix(b + "ffn_down.weight", s.n_ff, E, s.weight_type);
  }
  return w.WriteFile(path);
}

}  // namespace sinew::model::testing
