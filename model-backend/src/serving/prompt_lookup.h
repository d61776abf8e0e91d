// Prompt-lookup drafting for speculative decoding: agents re-emit text that is
// already in their context (file contents, code, earlier tool output), so the
// tokens that followed an earlier occurrence of the context's last few tokens
// are a good guess at what comes next. The guess costs no model: the scheduler
// verifies it in the same forward pass as the sequence's next token.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sinew::model {

struct PromptLookupOptions {
  // Longest suffix of the context looked up. Default: 4
  int32_t ngram_max = 4;
  // Shortest suffix looked up; shorter matches are too often chance. Default: 2
  int32_t ngram_min = 2;
};

// Up to `max_draft` tokens that followed the most recent earlier occurrence of
// the longest suffix of `tokens` (ngram_max down to ngram_min tokens long) found
// elsewhere in `tokens` (an older occurrence if the most recent ones are followed
// by fewer tokens, as in a repeating loop); empty when there is none or
// max_draft <= 0.
std::vector<int32_t> PromptLookupDraft(std::span<const int32_t> tokens, int32_t max_draft,
                                       const PromptLookupOptions& options = {});

}  // namespace sinew::model
