// Helpers shared by the engine tests: paths of shared test data.
#pragma once

#include <cstdlib>
#include <string>

namespace sinew::model::testutil {

// ../shared/models/stories260K.gguf relative to the source tree.
inline std::string Stories260KPath() {
  const char* src = std::getenv("SINEW_SOURCE_DIR");
  const std::string root = src != nullptr ? src : ".";
  return root + "/../shared/models/stories260K.gguf";
}

}  // namespace sinew::model::testutil
