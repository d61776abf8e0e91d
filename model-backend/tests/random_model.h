// Writes GGUF models with random weights in the engine's architectures, shapes
// and tensor types, for the reference tests and the benchmarks.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>

#include "sinew/model/gguf.h"
#include "sinew/status.h"

namespace sinew::model::testing {

// Vocabularies of at least kRandomVocabBytesFrom + 256 tokens are complete
// SentencePiece vocabularies (byte fallback for any text, see WriteRandomModel).
inline constexpr int32_t kRandomVocabBytesFrom = 3;

struct RandomModelSpec {
  std::string arch = "llama";  // llama, qwen2 (q/k/v biases), qwen3 (q/k norms)
  int32_t n_vocab = 320;
  int32_t n_embd = 256;
  int32_t n_layer = 2;
  int32_t n_head = 8;
  int32_t n_head_kv = 4;
  int32_t head_dim = 0;  // 0: n_embd / n_head
  int32_t n_ff = 512;
  int32_t n_ctx = 256;
  // Type of the linear layers and the output matrix. Rows whose length is not a
  // multiple of its block size fall back to Q8_0, then F32.
  GgmlType weight_type = GgmlType::kF32;
  // Type of token_embd.weight. Default: F32
  GgmlType embd_type = GgmlType::kF32;
  bool tied_output = false;   // no output.weight; the embedding is reused
  float rope_base = 10000.0f;
  float rope_linear_factor = 0.0f;  // > 0: rope.scaling.type = linear
  float rope_yarn_factor = 0.0f;    // > 0: rope.scaling.type = yarn with this factor
  int32_t rope_yarn_orig_ctx = 0;   // > 0: rope.scaling.original_context_length
  float rope_yarn_attn_factor = 0.0f;  // > 0: rope.scaling.attn_factor
  int32_t rope_dims = 0;            // 0: head_dim
  int32_t eos_id = 2;  // tokenizer.ggml.eos_token_id
  std::string chat_template;  // tokenizer.chat_template (Jinja). Default: "" (none)
  uint64_t seed = 1;
  // Hand-set weights instead of random ones: the induction circuit of copy_circuit.h,
  // whose greedy output continues its context as it went before (llama shapes only).
  bool copy_circuit = false;
};

// Total parameter count of the model `spec` describes.
int64_t RandomModelParams(const RandomModelSpec& spec);

// Writes the model to `path`. IOError if it cannot be written. The tokenizer
// metadata is that of a llama SentencePiece model: tokens, scores, token types,
// unk/bos/eos ids and add_bos/add_eos; ids 0..2 are <unk>, <s>, </s>, and when
// n_vocab >= 259 ids 3..258 are the byte tokens <0x00>..<0xFF>, so that any
// text tokenizes (here and in llama.cpp, which needs them).
[[nodiscard]] Status WriteRandomModel(const RandomModelSpec& spec, const std::string& path);

}  // namespace sinew::model::testing
