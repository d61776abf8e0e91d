// Helpers shared by the libFuzzer targets in this folder (docs/fuzzing.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace sinew::fuzz {

// The fuzzer's bytes as a string_view.
inline std::string_view Bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// /work/shared/models (or $SINEW_SHARED_MODELS): the real models and vocabularies the
// tokenizer targets load. SINEW_SHARED_MODELS_DIR is set by fuzz/CMakeLists.txt.
inline std::string SharedModelsDir() {
  if (const char* env = std::getenv("SINEW_SHARED_MODELS")) return env;
  return SINEW_SHARED_MODELS_DIR;
}

// Splits `in` at the first occurrence of `sep`: (before, after); after is "" without one.
inline std::pair<std::string_view, std::string_view> SplitAt(std::string_view in,
                                                             std::string_view sep) {
  const size_t at = in.find(sep);
  if (at == std::string_view::npos) return {in, {}};
  return {in.substr(0, at), in.substr(at + sep.size())};
}

// Dies with a message: an invariant of the code under test does not hold. libFuzzer
// reports it as a crash and saves the input.
[[noreturn]] inline void Violated(const char* what) {
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

}  // namespace sinew::fuzz
