// ToolInput: typed, validated access to a tool's JSON input, read with sinew/json_fields.h
// so its errors name the field as every Sinew reader does ("path is required",
// "offset must be between 1 and 1000000"). null means "not given".
//
// Thread-safety: none; one per call. Holds a reference to the object it reads.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "agent/tool.h"
#include "sinew/status.h"
#include "util/unique_fd.h"

namespace sinew::sandbox {

class ToolInput {
 public:
  // Fails with the name of the first field of `input` that is not in `allowed`.
  [[nodiscard]] static Result<ToolInput> Make(const boost::json::object& input,
                                              std::initializer_list<std::string_view> allowed);

  [[nodiscard]] Result<std::string> RequiredString(std::string_view field) const;
  [[nodiscard]] Result<std::optional<std::string>> OptionalString(std::string_view field) const;
  // Accepts integers only (no fractions, no strings), within [min, max]; a whole number
  // written as 2.0 or 1e3 counts.
  [[nodiscard]] Result<std::optional<int64_t>> OptionalInt(std::string_view field, int64_t min,
                                                           int64_t max) const;
  [[nodiscard]] Result<std::optional<bool>> OptionalBool(std::string_view field) const;

 private:
  explicit ToolInput(const boost::json::object& input) : input_(&input) {}
  const boost::json::object* input_;
};

// Resolves a path from a tool input: relative paths are taken below the workspace.
// With `inside_workspace`, a path that leaves the workspace (lexically or through a
// symbolic link) is refused with an error that says so.
[[nodiscard]] Result<std::filesystem::path> ResolvePath(const ToolConfig& config,
                                                        std::string_view raw,
                                                        bool inside_workspace);

// A descriptor of the workspace and a path relative to it.
struct InWorkspace {
  UniqueFd root;
  std::string relative;
};

// Opens the workspace for `path`, which comes from ResolvePath(..., true) (so it is
// lexically below the workspace); the file is then opened with beneath.h, which the
// kernel keeps below the workspace whatever links or renames the sandbox makes.
// kInvalidArgument when `path` is the workspace itself.
[[nodiscard]] Result<InWorkspace> OpenInWorkspace(const ToolConfig& config,
                                                  const std::filesystem::path& path);

}  // namespace sinew::sandbox
