#include "sinew/model/hf_vocab.h"

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

// bos_token / eos_token: a string, {"content": ...}, or null.
std::string TokenText(const json::object& config, std::string_view key) {
  const json::value* v = config.if_contains(key);
  if (v == nullptr) return {};
  if (v->is_string()) return std::string(v->as_string());
  if (v->is_object()) {
    const json::value* content = v->as_object().if_contains("content");
    if (content && content->is_string()) return std::string(content->as_string());
  }
  return {};
}

// tokenizer.json's "normalizer": null, {"type": "NFC"}, or a Sequence of those.
Result<Normalizer> NormalizerOf(const json::object& tokenizer) {
  const json::value* n = tokenizer.if_contains("normalizer");
  if (n == nullptr || n->is_null()) return Normalizer::kNone;
  const json::object* o = n->if_object();
  const json::value* type = o ? o->if_contains("type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return Status::InvalidArgument("tokenizer.json: normalizer has no type");
  }
  if (*type == "NFC") return Normalizer::kNfc;
  if (*type == "Sequence") {
    const json::value* list = o->if_contains("normalizers");
    Normalizer result = Normalizer::kNone;
    if (list == nullptr || !list->is_array()) {
      return Status::InvalidArgument("tokenizer.json: a Sequence normalizer needs \"normalizers\"");
    }
    for (const json::value& item : list->as_array()) {
      if (!item.is_object()) return Status::InvalidArgument("tokenizer.json: a normalizer is not an object");
      SINEW_ASSIGN_OR_RETURN(Normalizer one, NormalizerOf(json::object{{"normalizer", item}}));
      if (one != Normalizer::kNone) result = one;
    }
    return result;
  }
  return Status::InvalidArgument("tokenizer.json: normalizer \"" + std::string(type->as_string()) +
                                 "\" is not supported (supported: NFC, or none)");
}

}  // namespace

Result<HfVocab> VocabFromHfTokenizer(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                     const std::string& pre_tokenizer) {
  boost::system::error_code ec;
  json::value tokenizer = json::parse(tokenizer_json, ec);
  if (ec || !tokenizer.is_object()) return Status::InvalidArgument("tokenizer.json: not a JSON object");
  json::value config = tokenizer_config_json.empty() ? json::value(json::object{})
                                                     : json::parse(tokenizer_config_json, ec);
  if (ec || !config.is_object()) return Status::InvalidArgument("tokenizer_config.json: not a JSON object");
  const json::object* model = tokenizer.as_object().contains("model") ? tokenizer.at("model").if_object() : nullptr;
  if (model == nullptr || !model->contains("type") || model->at("type") != "BPE") {
    return Status::InvalidArgument("tokenizer.json: model.type must be BPE");
  }
  const json::object* vocab_map = model->contains("vocab") ? model->at("vocab").if_object() : nullptr;
  const json::array* merges = model->contains("merges") ? model->at("merges").if_array() : nullptr;
  if (vocab_map == nullptr || merges == nullptr) {
    return Status::InvalidArgument("tokenizer.json: model.vocab and model.merges are required");
  }
  HfVocab out;
  Vocab& vocab = out.vocab;
  vocab.model = VocabModel::kBytePairEncoding;
  vocab.pre_tokenizer = pre_tokenizer;
  vocab.add_space_prefix = false;
  std::vector<std::pair<std::string, TokenType>> slots;
  auto place = [&](int64_t id, std::string text, TokenType type) -> Status {
    if (id < 0 || id > (1 << 24)) return Status::InvalidArgument("tokenizer.json: token id " + std::to_string(id) + " out of range");
    if (static_cast<size_t>(id) >= slots.size()) slots.resize(static_cast<size_t>(id) + 1, {"", TokenType::kUndefined});
    slots[static_cast<size_t>(id)] = {std::move(text), type};
    return Status::Ok();
  };
  for (const auto& [text, id] : *vocab_map) {
    if (!id.is_int64()) return Status::InvalidArgument("tokenizer.json: vocab ids must be integers");
    SINEW_RETURN_IF_ERROR(place(id.as_int64(), std::string(text), TokenType::kNormal));
  }
  if (const json::value* added = tokenizer.as_object().if_contains("added_tokens"); added && added->is_array()) {
    for (const json::value& item : added->as_array()) {
      const json::object& t = item.as_object();
      const bool special = t.contains("special") && t.at("special").is_bool() && t.at("special").as_bool();
      SINEW_RETURN_IF_ERROR(place(t.at("id").to_number<int64_t>(), std::string(t.at("content").as_string()),
                                  special ? TokenType::kControl : TokenType::kUserDefined));
    }
  }
  for (size_t id = 0; id < slots.size(); ++id) {
    if (slots[id].second == TokenType::kUndefined) {
      return Status::InvalidArgument("tokenizer.json: no token has id " + std::to_string(id));
    }
    vocab.tokens.push_back(std::move(slots[id].first));
    vocab.types.push_back(slots[id].second);
  }
  for (const json::value& merge : *merges) {
    if (merge.is_string()) {
      vocab.merges.emplace_back(merge.as_string());
    } else if (merge.is_array() && merge.as_array().size() == 2) {
      vocab.merges.push_back(std::string(merge.as_array()[0].as_string()) + " " +
                             std::string(merge.as_array()[1].as_string()));
    } else {
      return Status::InvalidArgument("tokenizer.json: a merge is neither \"a b\" nor [a, b]");
    }
  }
  SINEW_ASSIGN_OR_RETURN(vocab.normalizer, NormalizerOf(tokenizer.as_object()));
  auto find = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
      if (vocab.tokens[id] == text) return static_cast<int32_t>(id);
    }
    return -1;
  };
  const json::object& cfg = config.as_object();
  vocab.bos_id = find(TokenText(cfg, "bos_token"));
  vocab.eos_id = find(TokenText(cfg, "eos_token"));
  vocab.eot_id = find("<|eot_id|>");
  if (vocab.eot_id < 0) vocab.eot_id = find("<|im_end|>");
  vocab.pad_id = find(TokenText(cfg, "pad_token"));
  vocab.add_bos = pre_tokenizer == "llama-bpe" || pre_tokenizer == "llama3" || pre_tokenizer == "llama-v3";
  if (const json::value* tmpl = cfg.if_contains("chat_template"); tmpl && tmpl->is_string()) {
    out.chat_template = std::string(tmpl->as_string());
  }
  return out;
}

void AddVocabToGguf(const HfVocab& hf, GgufWriter& writer) {
  const Vocab& vocab = hf.vocab;
  writer.SetString("tokenizer.ggml.model", "gpt2");
  writer.SetString("tokenizer.ggml.pre", vocab.pre_tokenizer);
  writer.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  std::vector<int32_t> types;
  for (TokenType type : vocab.types) types.push_back(static_cast<int32_t>(type));
  writer.SetInt32Array("tokenizer.ggml.token_type", types);
  writer.SetStringArray("tokenizer.ggml.merges", vocab.merges);
  if (vocab.bos_id >= 0) writer.SetUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos_id));
  if (vocab.eos_id >= 0) writer.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos_id));
  if (vocab.eot_id >= 0) writer.SetUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(vocab.eot_id));
  if (vocab.pad_id >= 0) writer.SetUint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.pad_id));
  writer.SetBool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  writer.SetString("tokenizer.sinew.normalizer", vocab.normalizer == Normalizer::kNfc ? "nfc" : "none");
  if (!hf.chat_template.empty()) writer.SetString("tokenizer.chat_template", hf.chat_template);
}

}  // namespace sinew::model
