#include "agent/tool_input.h"

#include <fcntl.h>

#include "sinew/json_fields.h"

namespace sinew::sandbox {
namespace {

bool IsWithin(const std::filesystem::path& p, const std::filesystem::path& root) {
  auto rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

Result<ToolInput> ToolInput::Make(const boost::json::object& input,
                                  std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (auto name : allowed) list += (list.empty() ? "" : ",") + std::string(name);
  SINEW_RETURN_IF_ERROR(json_fields::RejectUnknownKeys(input, list, ""));
  return ToolInput(input);
}

Result<std::string> ToolInput::RequiredString(std::string_view field) const {
  SINEW_RETURN_IF_ERROR(json_fields::Require(*input_, field, ""));
  std::string out;
  SINEW_RETURN_IF_ERROR(json_fields::ReadString(*input_, field, "", &out));
  return out;
}

Result<std::optional<std::string>> ToolInput::OptionalString(std::string_view field) const {
  if (!json_fields::Has(*input_, field)) return std::optional<std::string>();
  std::string out;
  SINEW_RETURN_IF_ERROR(json_fields::ReadString(*input_, field, "", &out));
  return std::optional<std::string>(std::move(out));
}

Result<std::optional<int64_t>> ToolInput::OptionalInt(std::string_view field, int64_t min,
                                                      int64_t max) const {
  if (!json_fields::Has(*input_, field)) return std::optional<int64_t>();
  int64_t out = 0;
  SINEW_RETURN_IF_ERROR(json_fields::ReadInt(*input_, field, "", min, max, &out));
  return std::optional<int64_t>(out);
}

Result<std::optional<bool>> ToolInput::OptionalBool(std::string_view field) const {
  if (!json_fields::Has(*input_, field)) return std::optional<bool>();
  bool out = false;
  SINEW_RETURN_IF_ERROR(json_fields::ReadBool(*input_, field, "", &out));
  return std::optional<bool>(out);
}

Result<std::filesystem::path> ResolvePath(const ToolConfig& config, std::string_view raw,
                                          bool inside_workspace) {
  namespace fs = std::filesystem;
  if (raw.empty()) return Status::InvalidArgument("path is empty");
  if (raw.find('\0') != std::string_view::npos)
    return Status::InvalidArgument("path contains a NUL byte");
  fs::path p(raw);
  if (p.is_relative()) p = config.workspace / p;
  p = p.lexically_normal();
  if (p.has_filename() == false && p != p.root_path()) p = p.parent_path();
  if (!inside_workspace) return p;
  fs::path ws = config.workspace.lexically_normal();
  std::error_code ec;
  fs::path real_ws = fs::weakly_canonical(ws, ec);
  if (ec) real_ws = ws;
  fs::path real = fs::weakly_canonical(p, ec);
  if (ec) real = p;
  if (!IsWithin(p, ws) || !IsWithin(real, real_ws)) {
    return Status::PermissionDenied("path '" + std::string(raw) + "' is outside the workspace " +
                                    ws.string() + "; this tool only writes below it");
  }
  return p;
}

Result<InWorkspace> OpenInWorkspace(const ToolConfig& config, const std::filesystem::path& path) {
  const std::filesystem::path ws = config.workspace.lexically_normal();
  int fd = open(ws.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("the workspace " + ws.string() + " cannot be opened");
  InWorkspace out{UniqueFd(fd), path.lexically_relative(ws).string()};
  if (out.relative.empty() || out.relative == ".") {
    return Status::InvalidArgument(path.string() + " is the workspace itself, not a file");
  }
  return out;
}

}  // namespace sinew::sandbox
