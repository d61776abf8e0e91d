// Tokenizers read from GGUF metadata: SentencePiece-style (`tokenizer.ggml.model` =
// "llama": score-ordered merges, byte fallback <0xNN>, "▁" for spaces) and byte-level
// BPE ("gpt2": rank-ordered merges after a family pre-tokenizer: GPT-2, Llama 3,
// Qwen 2, DeepSeek coder / llm). Control and user-defined tokens are matched in the
// text before BPE/SPM runs.
//
// Ownership: a Tokenizer owns its Vocab. Thread-safety: a Tokenizer is immutable
// after Create(); all const methods may be called from several threads at once.
// A StreamingDetokenizer is a small mutable value owned by one request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sinew/status.h"

namespace sinew::model {

class GgufFile;

// Token types as stored in `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabModel {
  kSentencePiece,     // "llama"
  kBytePairEncoding,  // "gpt2"
};

// What the text goes through before it is split (Hugging Face's `normalizer`).
enum class Normalizer {
  kNone,
  kNfc,  // Unicode NFC, e.g. Qwen 2/3 ({"type": "NFC"} in their tokenizer.json)
};

// Everything a tokenizer needs, as read from the GGUF metadata.
struct Vocab {
  VocabModel model = VocabModel::kSentencePiece;
  // `tokenizer.ggml.pre` (BPE only). Default: "default" (the GPT-2 split).
  std::string pre_tokenizer = "default";
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty or one per token
  std::vector<TokenType> types;     // empty (all normal) or one per token
  std::vector<std::string> merges;  // BPE only: "left right", highest priority first
  int32_t bos_id = -1;              // -1: none
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn (e.g. <|eot_id|>, <|im_end|>), -1: none
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;  // prepend BOS when encoding a prompt
  bool add_eos = false;
  bool add_space_prefix = true;  // SPM: prefix the text with a space ("▁")
  // GGUF key `tokenizer.sinew.normalizer` ("nfc" or "none"; llama.cpp has no such key).
  // Without it: kNfc for the qwen2 pre-tokenizer (what Qwen's own tokenizer does), kNone
  // otherwise. Applied to the text between special tokens, as Hugging Face does.
  Normalizer normalizer = Normalizer::kNone;
};

// Reads the vocabulary from `tokenizer.ggml.*` keys. Errors: InvalidArgument naming the
// key for a missing/ill-typed key, an unsupported model or pre-tokenizer, or ids out of
// range. Defaults follow other GGUF engines (SPM: add_bos true; BPE: add_bos false).
[[nodiscard]] Result<Vocab> LoadVocabFromGguf(const GgufFile& file);

class Tokenizer {
 public:
  struct EncodeOptions {
    // Prepend BOS if the vocabulary defines one and asks for it (add_bos). Default: true.
    bool add_special = true;
    // Match control tokens (e.g. "<|im_start|>") in the text. User-defined tokens are
    // always matched. Default: false.
    bool parse_special = false;
  };

  // Validates `vocab` (sizes, ids, merges). Errors: InvalidArgument.
  [[nodiscard]] static Result<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  // LoadVocabFromGguf + Create.
  [[nodiscard]] static Result<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);

  virtual ~Tokenizer() = default;

  // Never fails: any byte string has an encoding (unencodable bytes map to <unk>).
  virtual std::vector<int32_t> Encode(std::string_view text, EncodeOptions options) const = 0;
  std::vector<int32_t> Encode(std::string_view text) const { return Encode(text, EncodeOptions{}); }

  // The raw bytes a token stands for (may be part of a UTF-8 character). Control tokens
  // give "" unless `render_special`. Out-of-range ids give "".
  virtual std::string TokenPiece(int32_t id, bool render_special = false) const = 0;

  // Concatenated pieces; for SPM the space of the leading "▁" is removed. The result may
  // contain invalid UTF-8 if the tokens end inside a character.
  virtual std::string Decode(std::span<const int32_t> ids, bool render_special = false) const = 0;

  virtual const Vocab& vocab() const = 0;
  int32_t size() const { return static_cast<int32_t>(vocab().tokens.size()); }
  // True for EOS, EOT and other end-of-generation control tokens.
  virtual bool IsEndOfGeneration(int32_t id) const = 0;
  // Id of the token with exactly this text, or -1.
  virtual int32_t Find(std::string_view text) const = 0;
};

// Turns a stream of token ids into text that never splits a UTF-8 character: bytes of
// an unfinished character are held until it completes; bytes that can never form a
// valid character come out as U+FFFD. Not thread-safe; one per generation.
class StreamingDetokenizer {
 public:
  // REQUIRES: `tokenizer` outlives this object. `at_start`: the first token begins the
  // text (SPM drops the space of its leading "▁").
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool at_start = false);

  // Returns the text that became complete with `id` (possibly empty).
  std::string Push(int32_t id);
  // Returns whatever is held back (as U+FFFD for an unfinished character) and resets.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool strip_leading_space_;
  std::string pending_;
};

}  // namespace sinew::model
