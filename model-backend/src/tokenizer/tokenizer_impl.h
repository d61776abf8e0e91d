// TokenizerImpl: the one Tokenizer implementation; SPM and BPE encoders are separate
// files (spm_encoder.cc, bpe_encoder.cc) over the shared lookup tables here.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pre_tokenizer.h"
#include "sinew/model/tokenizer.h"

namespace sinew::model {

class TokenizerImpl final : public Tokenizer {
 public:
  // REQUIRES: `vocab` passed Validate().
  TokenizerImpl(Vocab vocab, PreTokenizerKind pre, bool ignore_merges);

  std::vector<int32_t> Encode(std::string_view text, EncodeOptions options) const override;
  std::string TokenPiece(int32_t id, bool render_special) const override;
  std::string Decode(std::span<const int32_t> ids, bool render_special) const override;
  const Vocab& vocab() const override { return vocab_; }
  bool IsEndOfGeneration(int32_t id) const override;
  int32_t Find(std::string_view text) const override;

 private:
  // A piece of the input: raw text still to tokenize, or an already matched token.
  struct Fragment {
    std::string_view text;
    int32_t token = -1;  // >= 0: a special token
  };

  std::vector<Fragment> PartitionSpecial(std::string_view text, bool parse_special) const;
  void EncodeSpm(std::string_view text, std::vector<int32_t>& out) const;
  void EncodeBpe(std::string_view text, std::vector<int32_t>& out) const;
  void EncodeBpeWord(std::string_view encoded_word, std::vector<int32_t>& out) const;
  int32_t ByteToken(uint8_t byte) const;
  TokenType TypeOf(int32_t id) const;
  float ScoreOf(int32_t id) const;
  int MergeRank(std::string_view left, std::string_view right) const;

  // Constant after construction.
  Vocab vocab_;
  PreTokenizerKind pre_;
  bool ignore_merges_;
  std::unordered_map<std::string, int32_t> token_to_id_;
  std::unordered_map<std::string, int> merge_rank_;  // key: left + '\n' + right
  std::vector<int32_t> special_ids_;  // control/user-defined/unknown, longest text first
  std::vector<int32_t> end_of_generation_ids_;
};

}  // namespace sinew::model
