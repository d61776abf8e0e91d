#include "prompt_lookup.h"

#include <algorithm>

namespace sinew::model {

std::vector<int32_t> PromptLookupDraft(std::span<const int32_t> tokens, int32_t max_draft,
                                       const PromptLookupOptions& options) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0) return {};
  for (int64_t len = std::min<int64_t>(options.ngram_max, n - 1); len >= options.ngram_min;
       --len) {
    const auto suffix = tokens.subspan(static_cast<size_t>(n - len));
    // Most recent occurrence first; `start + len < n` keeps the suffix itself out
    // and leaves at least one token after the match. An occurrence close to the
    // end (a repeating loop) is followed by fewer tokens than asked for: keep
    // looking for one that is followed by a full draft.
    int64_t best_from = -1, best_take = 0;
    for (int64_t start = n - len - 1; start >= 0 && best_take < max_draft; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t take = std::min<int64_t>(max_draft, n - (start + len));
      if (take > best_take) {
        best_from = start + len;
        best_take = take;
      }
    }
    if (best_take > 0) {
      return std::vector<int32_t>(tokens.begin() + best_from,
                                  tokens.begin() + best_from + best_take);
    }
  }
  return {};
}

}  // namespace sinew::model
