// Small file helpers shared by the file and search tools.
// Thread-safety: free functions without shared state.
#pragma once

#include <filesystem>
#include <string>

#include "sinew/status.h"

namespace sinew::sandbox {

// Largest file read_file, edit_file and grep will load. Default: 32 MiB
inline constexpr uintmax_t kMaxFileBytes = 32u << 20;

// Reads a whole regular file, with errors worded for the model.
[[nodiscard]] Result<std::string> ReadWholeFile(const std::filesystem::path& path);
// True if the first 8 KiB hold a NUL byte.
bool LooksBinary(const std::string& content);

}  // namespace sinew::sandbox
