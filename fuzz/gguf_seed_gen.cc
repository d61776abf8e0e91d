// Writes the seeds of corpus/gguf_fuzz into the directory given as argv[1]: tiny models
// of each architecture (random weights, model-backend/tests/random_model.h) and a file
// holding every metadata value type. Kept small (a few KiB) so that they can be checked in.
#include <cstdio>
#include <string>

#include "random_model.h"
#include "sinew/model/gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_seed_gen DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using sinew::model::GgmlType;
  using sinew::model::testing::RandomModelSpec;
  int n = 0;
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    RandomModelSpec spec;
    spec.arch = arch;
    spec.n_vocab = 12;
    spec.n_embd = 8;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 16;
    spec.n_ctx = 32;
    spec.eos_id = 2;
    spec.tied_output = std::string(arch) == "qwen2";
    if (std::string(arch) == "qwen3") spec.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
    const std::string path = dir + "/tiny-" + arch + ".gguf";
    if (!sinew::model::testing::WriteRandomModel(spec, path).ok()) return 1;
    ++n;
  }
  sinew::model::GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.context_length", 64);
  w.SetInt32("llama.block_count", 1);
  w.SetUint64("general.size", 123456789);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>", "</s>", "Ġ", "Ċ"});
  w.SetInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 3, 3, 1, 1});
  w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, -1, 0, 0, 0, 0});
  w.SetStringArray("tokenizer.ggml.merges", {"a b"});
  w.SetUint32("tokenizer.ggml.bos_token_id", 3);
  w.SetUint32("tokenizer.ggml.eos_token_id", 4);
  float values[32] = {1, 2, 3};
  w.AddTensor("t", GgmlType::kF32, {4, 2}, std::string(reinterpret_cast<const char*>(values), 32));
  if (!w.WriteFile(dir + "/metadata-vocab.gguf").ok()) return 1;
  std::printf("wrote %d files to %s\n", n + 1, dir.c_str());
  return 0;
}
