// sinew-vocab-convert: a Hugging Face tokenizer.json (+ tokenizer_config.json) to a
// vocabulary-only GGUF (tokenizer.ggml.* and tokenizer.chat_template), like llama.cpp's
// ggml-vocab-*.gguf files.
//   sinew-vocab-convert TOKENIZER_JSON CONFIG_JSON PRE_TOKENIZER OUT.gguf
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sinew/model/hf_vocab.h"

namespace {
bool ReadFile(const char* path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON CONFIG_JSON PRE_TOKENIZER OUT.gguf\n", argv[0]);
    return 2;
  }
  std::string tokenizer, config;
  if (!ReadFile(argv[1], tokenizer) || !ReadFile(argv[2], config)) {
    std::fprintf(stderr, "sinew-vocab-convert: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  auto hf = sinew::model::VocabFromHfTokenizer(tokenizer, config, argv[3]);
  if (!hf.ok()) {
    std::fprintf(stderr, "sinew-vocab-convert: %s\n", hf.status().ToString().c_str());
    return 1;
  }
  sinew::model::GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.SetString("general.name", std::string("vocab-") + argv[3]);
  sinew::model::AddVocabToGguf(*hf, writer);
  if (auto written = writer.WriteFile(argv[4]); !written.ok()) {
    std::fprintf(stderr, "sinew-vocab-convert: %s\n", written.ToString().c_str());
    return 1;
  }
  std::printf("%s: %zu tokens, %zu merges\n", argv[4], hf->vocab.tokens.size(), hf->vocab.merges.size());
  return 0;
}
