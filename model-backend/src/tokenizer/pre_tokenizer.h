// Pre-tokenizers of byte-level BPE vocabularies: split text into the words that BPE
// merges never cross. Each family's split regex (which uses Unicode categories such as
// \p{L} and \p{N}) is implemented as a hand-written matcher over code points.
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

namespace sinew::model {

enum class PreTokenizerKind {
  kGpt2,           // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,         // case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  kQwen2,          // as kLlama3 with single digits \p{N}
  kDeepseekCoder,  // sequence: [\r\n] | \s?\p{L}+ | \s?\p{P}+ | CJK ranges+ | \p{N}
  kDeepseekLlm,    // sequence: [\r\n] | \s?[cased letters]+ | \s?[ASCII/fullwidth punct]+ |
                   //           \s+$ | CJK ranges+ | \p{N}+
};

// Splits `text` (UTF-8; invalid bytes are kept as their own code points) into words.
// The returned views point into `text` and cover it completely, in order.
std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace sinew::model
