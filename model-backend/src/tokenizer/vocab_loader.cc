// LoadVocabFromGguf: tokenizer.ggml.* metadata -> Vocab.
#include <string>

#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"

namespace sinew::model {
namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string Key(std::string_view name) { return std::string(kPrefix) + std::string(name); }

// Reads an optional token id; -1 when absent.
Status ReadId(const GgufFile& file, std::string_view name, int32_t& out) {
  std::string key = Key(name);
  if (!file.HasKey(key)) return Status::Ok();
  Result<int64_t> value = file.GetInt(key);
  if (!value.ok()) return value.status().WithContext(key);
  if (*value < 0 || *value == UINT32_MAX) {  // -1 / 0xFFFFFFFF: "no such token"
    out = -1;
    return Status::Ok();
  }
  if (*value > INT32_MAX) {
    return Status::InvalidArgument(key + ": token id " + std::to_string(*value) + " out of range");
  }
  out = static_cast<int32_t>(*value);
  return Status::Ok();
}

Status ReadBool(const GgufFile& file, std::string_view name, bool& out) {
  std::string key = Key(name);
  if (!file.HasKey(key)) return Status::Ok();
  Result<bool> value = file.GetBool(key);
  if (!value.ok()) return value.status().WithContext(key);
  out = *value;
  return Status::Ok();
}

Status ReadNormalizer(const GgufFile& file, Vocab& vocab) {
  constexpr const char* kKey = "tokenizer.sinew.normalizer";
  if (!file.HasKey(kKey)) {
    const bool qwen = vocab.model == VocabModel::kBytePairEncoding &&
                      (vocab.pre_tokenizer == "qwen2" || vocab.pre_tokenizer == "qwen2.5" ||
                       vocab.pre_tokenizer == "deepseek-r1-qwen");
    vocab.normalizer = qwen ? Normalizer::kNfc : Normalizer::kNone;
    return Status::Ok();
  }
  Result<std::string_view> name = file.GetString(kKey);
  if (!name.ok()) return name.status().WithContext(kKey);
  if (*name == "nfc") {
    vocab.normalizer = Normalizer::kNfc;
  } else if (*name == "none") {
    vocab.normalizer = Normalizer::kNone;
  } else {
    return Status::InvalidArgument(std::string(kKey) + " \"" + std::string(*name) +
                                   "\" is not supported (supported: nfc, none)");
  }
  return Status::Ok();
}

}  // namespace

Result<Vocab> LoadVocabFromGguf(const GgufFile& file) {
  Vocab vocab;
  Result<std::string_view> model = file.GetString(Key("model"));
  if (!model.ok()) return model.status().WithContext("tokenizer.ggml.model");
  if (*model == "llama") {
    vocab.model = VocabModel::kSentencePiece;
    vocab.bos_id = 1;
    vocab.eos_id = 2;
    vocab.unk_id = 0;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  } else if (*model == "gpt2") {
    vocab.model = VocabModel::kBytePairEncoding;
    vocab.add_bos = false;
    vocab.add_space_prefix = false;
  } else {
    return Status::InvalidArgument("tokenizer.ggml.model \"" + std::string(*model) +
                                   "\" is not supported (supported: llama, gpt2)");
  }

  Result<std::vector<std::string_view>> tokens = file.GetStringArray(Key("tokens"));
  if (!tokens.ok()) return tokens.status().WithContext("tokenizer.ggml.tokens");
  vocab.tokens.assign(tokens->begin(), tokens->end());

  if (file.HasKey(Key("scores"))) {
    Result<std::vector<float>> scores = file.GetF32Array(Key("scores"));
    if (!scores.ok()) return scores.status().WithContext("tokenizer.ggml.scores");
    vocab.scores = std::move(scores).value();
  }
  if (file.HasKey(Key("token_type"))) {
    Result<std::vector<int32_t>> types = file.GetI32Array(Key("token_type"));
    if (!types.ok()) return types.status().WithContext("tokenizer.ggml.token_type");
    vocab.types.reserve(types->size());
    for (int32_t type : *types) {
      if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
        return Status::InvalidArgument("tokenizer.ggml.token_type: unknown type " +
                                       std::to_string(type));
      }
      vocab.types.push_back(static_cast<TokenType>(type));
    }
  }
  if (vocab.model == VocabModel::kBytePairEncoding) {
    Result<std::vector<std::string_view>> merges = file.GetStringArray(Key("merges"));
    if (!merges.ok()) return merges.status().WithContext("tokenizer.ggml.merges");
    vocab.merges.assign(merges->begin(), merges->end());
    Result<std::string_view> pre = file.GetStringOr(Key("pre"), "default");
    if (!pre.ok()) return pre.status().WithContext("tokenizer.ggml.pre");
    vocab.pre_tokenizer = std::string(*pre);
    if (vocab.pre_tokenizer == "llama3" || vocab.pre_tokenizer == "llama-v3" ||
        vocab.pre_tokenizer == "llama-bpe") {
      vocab.add_bos = true;
    }
  }

  SINEW_RETURN_IF_ERROR(ReadId(file, "bos_token_id", vocab.bos_id));
  SINEW_RETURN_IF_ERROR(ReadId(file, "eos_token_id", vocab.eos_id));
  SINEW_RETURN_IF_ERROR(ReadId(file, "eot_token_id", vocab.eot_id));
  SINEW_RETURN_IF_ERROR(ReadId(file, "unknown_token_id", vocab.unk_id));
  SINEW_RETURN_IF_ERROR(ReadId(file, "padding_token_id", vocab.pad_id));
  SINEW_RETURN_IF_ERROR(ReadBool(file, "add_bos_token", vocab.add_bos));
  SINEW_RETURN_IF_ERROR(ReadBool(file, "add_eos_token", vocab.add_eos));
  SINEW_RETURN_IF_ERROR(ReadBool(file, "add_space_prefix", vocab.add_space_prefix));
  SINEW_RETURN_IF_ERROR(ReadNormalizer(file, vocab));
  return vocab;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  SINEW_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromGguf(file));
  return Create(std::move(vocab));
}

}  // namespace sinew::model
