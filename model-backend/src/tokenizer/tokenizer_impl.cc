#include "tokenizer_impl.h"

#include <algorithm>

#include "sinew/model/unicode.h"

namespace sinew::model {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Result<PreTokenizerKind> PreTokenizerFor(const std::string& name) {
  if (name == "default" || name == "gpt-2" || name == "gpt2" || name == "phi-2" ||
      name == "starcoder" || name == "refact" || name == "jina-es" || name == "jina-de" ||
      name == "olmo" || name == "stablelm2" || name == "mpt" || name == "falcon" ||
      name == "poro-chat") {
    return PreTokenizerKind::kGpt2;
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "smaug-bpe" ||
      name == "dbrx") {
    return PreTokenizerKind::kLlama3;
  }
  if (name == "qwen2" || name == "qwen2.5" || name == "deepseek-r1-qwen") {
    return PreTokenizerKind::kQwen2;
  }
  if (name == "deepseek-coder") return PreTokenizerKind::kDeepseekCoder;
  if (name == "deepseek-llm") return PreTokenizerKind::kDeepseekLlm;
  return Status::InvalidArgument("tokenizer.ggml.pre \"" + name +
                                 "\" is not supported (supported: default, gpt-2, llama3 "
                                 "(llama-bpe), qwen2, deepseek-coder, deepseek-llm)");
}

Status Validate(const Vocab& vocab) {
  size_t n = vocab.tokens.size();
  if (n == 0) return Status::InvalidArgument("vocabulary has no tokens");
  if (n > (1u << 24)) return Status::InvalidArgument("vocabulary has too many tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return Status::InvalidArgument("tokenizer.ggml.scores has " +
                                   std::to_string(vocab.scores.size()) + " entries for " +
                                   std::to_string(n) + " tokens");
  }
  if (!vocab.types.empty() && vocab.types.size() != n) {
    return Status::InvalidArgument("tokenizer.ggml.token_type has " +
                                   std::to_string(vocab.types.size()) + " entries for " +
                                   std::to_string(n) + " tokens");
  }
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", vocab.bos_id},
                          {"eos", vocab.eos_id},
                          {"eot", vocab.eot_id},
                          {"unknown", vocab.unk_id},
                          {"padding", vocab.pad_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Status::InvalidArgument(std::string(name) + " token id " + std::to_string(id) +
                                     " is outside the vocabulary of " + std::to_string(n));
    }
  }
  if (vocab.model == VocabModel::kBytePairEncoding) {
    for (size_t index = 0; index < vocab.merges.size(); ++index) {
      if (vocab.merges[index].find(' ', 1) == std::string::npos) {
        return Status::InvalidArgument("tokenizer.ggml.merges[" + std::to_string(index) +
                                       "] has no separating space");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  SINEW_RETURN_IF_ERROR(Validate(vocab));
  PreTokenizerKind pre = PreTokenizerKind::kGpt2;
  if (vocab.model == VocabModel::kBytePairEncoding) {
    SINEW_ASSIGN_OR_RETURN(pre, PreTokenizerFor(vocab.pre_tokenizer));
  }
  bool ignore_merges = pre == PreTokenizerKind::kLlama3;
  return std::unique_ptr<Tokenizer>(new TokenizerImpl(std::move(vocab), pre, ignore_merges));
}

TokenizerImpl::TokenizerImpl(Vocab vocab, PreTokenizerKind pre, bool ignore_merges)
    : vocab_(std::move(vocab)), pre_(pre), ignore_merges_(ignore_merges) {
  token_to_id_.reserve(vocab_.tokens.size());
  for (size_t id = 0; id < vocab_.tokens.size(); ++id) {
    token_to_id_[vocab_.tokens[id]] = static_cast<int32_t>(id);
  }
  merge_rank_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& merge = vocab_.merges[rank];
    size_t split = merge.find(' ', 1);
    std::string key = merge.substr(0, split) + '\n' + merge.substr(split + 1);
    merge_rank_.emplace(std::move(key), static_cast<int>(rank));
  }
  for (size_t id = 0; id < vocab_.tokens.size(); ++id) {
    TokenType type = TypeOf(static_cast<int32_t>(id));
    if ((type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown) &&
        !vocab_.tokens[id].empty()) {
      special_ids_.push_back(static_cast<int32_t>(id));
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [this](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
  for (int32_t id : {vocab_.eos_id, vocab_.eot_id}) {
    if (id >= 0) end_of_generation_ids_.push_back(id);
  }
  for (std::string_view text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                "<|endoftext|>", "<|end_of_text|>", "<EOT>", "<|eom_id|>"}) {
    int32_t id = Find(text);
    if (id >= 0 && TypeOf(id) == TokenType::kControl) end_of_generation_ids_.push_back(id);
  }
}

TokenType TokenizerImpl::TypeOf(int32_t id) const {
  if (vocab_.types.empty()) return TokenType::kNormal;
  return vocab_.types[static_cast<size_t>(id)];
}

float TokenizerImpl::ScoreOf(int32_t id) const {
  return vocab_.scores.empty() ? 0.0f : vocab_.scores[static_cast<size_t>(id)];
}

int32_t TokenizerImpl::Find(std::string_view text) const {
  auto it = token_to_id_.find(std::string(text));
  return it == token_to_id_.end() ? -1 : it->second;
}

bool TokenizerImpl::IsEndOfGeneration(int32_t id) const {
  return std::find(end_of_generation_ids_.begin(), end_of_generation_ids_.end(), id) !=
         end_of_generation_ids_.end();
}

std::vector<TokenizerImpl::Fragment> TokenizerImpl::PartitionSpecial(std::string_view text,
                                                                     bool parse_special) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({text, -1});
  for (int32_t id : special_ids_) {
    TokenType type = TypeOf(id);
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& special = vocab_.tokens[static_cast<size_t>(id)];
    std::vector<Fragment> next;
    next.reserve(fragments.size());
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0 || fragment.text.size() < special.size()) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      size_t found;
      while ((found = rest.find(special)) != std::string_view::npos) {
        if (found > 0) next.push_back({rest.substr(0, found), -1});
        next.push_back({{}, id});
        rest.remove_prefix(found + special.size());
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::vector<int32_t> TokenizerImpl::Encode(std::string_view text, EncodeOptions options) const {
  std::vector<int32_t> out;
  if (options.add_special && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  bool previous_special = true;  // SPM: the text start counts as after a special token
  for (const Fragment& fragment : PartitionSpecial(text, options.parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      previous_special = true;
      continue;
    }
    if (vocab_.model == VocabModel::kSentencePiece) {
      std::string piece;
      if (vocab_.add_space_prefix && previous_special) piece = " ";
      piece.append(fragment.text);
      EncodeSpm(piece, out);
    } else if (vocab_.normalizer == Normalizer::kNfc) {
      EncodeBpe(unicode::NormalizeNfc(fragment.text), out);
    } else {
      EncodeBpe(fragment.text, out);
    }
    previous_special = false;
  }
  if (options.add_special && vocab_.add_eos && vocab_.eos_id >= 0) out.push_back(vocab_.eos_id);
  return out;
}

std::string TokenizerImpl::TokenPiece(int32_t id, bool render_special) const {
  if (id < 0 || id >= size()) return {};
  const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
  switch (TypeOf(id)) {
    case TokenType::kControl:
      return render_special ? text : std::string();
    case TokenType::kUserDefined:
      return text;
    case TokenType::kUnknown:
      return vocab_.model == VocabModel::kSentencePiece ? std::string("\xE2\x96\x85") : text;
    case TokenType::kByte:
      if (vocab_.model == VocabModel::kSentencePiece && text.size() == 6 && text[0] == '<' &&
          text[1] == '0' && text[2] == 'x' && text[5] == '>') {
        int high = HexValue(text[3]);
        int low = HexValue(text[4]);
        if (high >= 0 && low >= 0) return std::string(1, static_cast<char>(high * 16 + low));
      }
      break;  // a malformed byte token is decoded as its text
    default:
      break;
  }
  if (vocab_.model == VocabModel::kSentencePiece) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    size_t found;
    while ((found = text.find(kSpaceMarker, pos)) != std::string::npos) {
      out.append(text, pos, found - pos);
      out.push_back(' ');
      pos = found + kSpaceMarker.size();
    }
    out.append(text, pos, std::string::npos);
    return out;
  }
  std::string out;
  for (const unicode::CodePoint& cp : unicode::DecodeUtf8(text)) {
    int byte = unicode::PrintableToByte(cp.value);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text, cp.offset, cp.length);
    }
  }
  return out;
}

std::string TokenizerImpl::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id == vocab_.bos_id && first && !render_special) continue;
    std::string piece = TokenPiece(id, render_special);
    if (first && vocab_.model == VocabModel::kSentencePiece && vocab_.add_space_prefix &&
        !piece.empty() && piece[0] == ' ') {
      piece.erase(0, 1);
    }
    first = false;
    out += piece;
  }
  return out;
}

}  // namespace sinew::model
