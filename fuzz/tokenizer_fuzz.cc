// The tokenizers (model-backend/src/tokenizer) on arbitrary text with real vocabularies
// from shared/models/vocab: SentencePiece (llama-spm, phi-3) when built with
// SINEW_FUZZ_SPM, byte-level BPE (gpt-2, deepseek-coder, deepseek-llm: three
// pre-tokenizers) otherwise. The first byte picks the vocabulary and the encode options;
// every id must be in the vocabulary, and decoding and piece lookup must work on them.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"

namespace {

using sinew::model::Tokenizer;

std::vector<std::unique_ptr<Tokenizer>> LoadAll() {
#ifdef SINEW_FUZZ_SPM
  const char* names[] = {"llama-spm", "phi-3"};
#else
  const char* names[] = {"gpt-2", "deepseek-coder", "deepseek-llm"};
#endif
  std::vector<std::unique_ptr<Tokenizer>> out;
  for (const char* name : names) {
    const std::string path = sinew::fuzz::SharedModelsDir() + "/vocab/ggml-vocab-" + name + ".gguf";
    auto file = sinew::model::GgufFile::Open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "cannot open %s: %s\n", path.c_str(), file.status().message().c_str());
      std::abort();
    }
    auto tokenizer = Tokenizer::FromGguf(**file);
    if (!tokenizer.ok()) sinew::fuzz::Violated("a shipped vocabulary does not load");
    out.push_back(std::move(tokenizer).value());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<Tokenizer>> tokenizers = LoadAll();
  if (size == 0) return 0;
  const Tokenizer& tok = *tokenizers[(data[0] >> 2) % tokenizers.size()];
  Tokenizer::EncodeOptions options;
  options.add_special = data[0] & 1;
  options.parse_special = data[0] & 2;
  const std::string_view text = sinew::fuzz::Bytes(data + 1, size - 1);
  const std::vector<int32_t> ids = tok.Encode(text, options);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.size()) sinew::fuzz::Violated("Encode returned an id outside the vocabulary");
    (void)tok.TokenPiece(id, options.parse_special);
  }
  (void)tok.Decode(ids, options.parse_special);
  (void)tok.Find(text);
  return 0;
}
