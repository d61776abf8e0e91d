// The size that glibc's regcomp gives a POSIX extended regular expression, estimated
// before it is compiled: the grep tool refuses a pattern past the budget instead of
// letting it take the sandbox's memory.
//
// Why: glibc compiles `E+` as `E E*` and `E{m,n}` as m copies of E plus n-m optional
// ones, so stacked repetitions multiply (`a+++…+` doubles per `+`: 19 of them take
// 350 MB) and optional copies cost memory quadratic in their number (`.{1,10000}`
// takes 790 MB and 3 s). Measured on Debian 12's glibc 2.36.
#pragma once

#include <string_view>

#include "sinew/status.h"

namespace sinew::sandbox {

struct RegexCost {
  double nodes = 0;     // pattern nodes after repetitions are expanded
  double optional = 0;  // of those, the ones inside an optional (nullable) repetition
  size_t depth = 0;     // deepest group nesting, counted up to kMaxRegexDepth + 1
};

// Estimates from the pattern's text alone; it never fails. A pattern that regcomp will
// refuse anyway (unbalanced brackets) gets some estimate and is left to regcomp.
RegexCost EstimateExtendedRegexCost(std::string_view pattern);

inline constexpr double kMaxRegexNodes = 50000;    // linear in memory: a{32767} is 8 MB
inline constexpr double kMaxRegexOptional = 2000;  // quadratic: 2000 is about 33 MB
// glibc's regcomp parses groups recursively and overflows its stack on deep nesting
// (30,000 levels crash it); the estimate stops descending past this depth too.
inline constexpr size_t kMaxRegexDepth = 1000;

// kInvalidArgument naming the nesting or the expansion when the pattern is past a limit.
Status CheckExtendedRegexBudget(std::string_view pattern);

}  // namespace sinew::sandbox
