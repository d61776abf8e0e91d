// Converts a Hugging Face `tokenizer.json` (byte-level BPE: Llama 3, Qwen 2/3, ...) and
// its `tokenizer_config.json` into our Vocab and into GGUF tokenizer metadata
// (`tokenizer.ggml.*`, plus `tokenizer.chat_template` from the config), the form
// llama.cpp's converters write. Used by the sinew-vocab-convert tool and the tests.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "sinew/model/gguf_writer.h"
#include "sinew/model/tokenizer.h"
#include "sinew/status.h"

namespace sinew::model {

struct HfVocab {
  Vocab vocab;
  std::string chat_template;  // tokenizer_config.json's chat_template ("" if none)
};

// `pre_tokenizer`: the GGUF name of the split (`llama-bpe`, `qwen2`, ...); the
// tokenizer.json regex itself is not interpreted. Added tokens become control tokens
// when `special`, user-defined otherwise. BOS/EOS come from the config's bos_token /
// eos_token; EOT is <|eot_id|> or <|im_end|> when present. add_bos follows llama.cpp
// (true for llama-bpe).
// Errors: InvalidArgument for malformed JSON, a model type other than BPE, or ids that
// leave holes in the vocabulary.
[[nodiscard]] Result<HfVocab> VocabFromHfTokenizer(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config_json,
                                                   const std::string& pre_tokenizer);

// Writes the tokenizer.* keys of `hf` into `writer`.
void AddVocabToGguf(const HfVocab& hf, GgufWriter& writer);

}  // namespace sinew::model
