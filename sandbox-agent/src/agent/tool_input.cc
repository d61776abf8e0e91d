#include "agent/tool_input.h"

#include <cmath>

namespace sinew::sandbox {
namespace {

std::string_view KindName(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return "boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
      return "integer";
    case boost::json::kind::double_:
      return "number";
    case boost::json::kind::string:
      return "string";
    case boost::json::kind::array:
      return "array";
    case boost::json::kind::object:
      return "object";
  }
  return "unknown";
}

Status WrongType(std::string_view field, std::string_view want, const boost::json::value& got) {
  return Status::InvalidArgument("field '" + std::string(field) + "' must be " + std::string(want) +
                                 ", got " + std::string(KindName(got)));
}

bool IsWithin(const std::filesystem::path& p, const std::filesystem::path& root) {
  auto rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

Result<ToolInput> ToolInput::Make(const boost::json::object& input,
                                  std::initializer_list<std::string_view> allowed) {
  for (const auto& kv : input) {
    bool known = false;
    for (auto name : allowed) known = known || kv.key() == name;
    if (!known) {
      std::string list;
      for (auto name : allowed) list += (list.empty() ? "" : ", ") + std::string(name);
      return Status::InvalidArgument("unknown field '" + std::string(kv.key()) +
                                     "'; allowed fields: " + list);
    }
  }
  return ToolInput(input);
}

Result<std::string> ToolInput::RequiredString(std::string_view field) const {
  SINEW_ASSIGN_OR_RETURN(auto v, OptionalString(field));
  if (!v)
    return Status::InvalidArgument("missing required field '" + std::string(field) + "' (string)");
  return *std::move(v);
}

Result<std::optional<std::string>> ToolInput::OptionalString(std::string_view field) const {
  const auto* v = input_->if_contains(field);
  if (v == nullptr || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return WrongType(field, "a string", *v);
  return std::optional<std::string>(std::string(v->get_string()));
}

Result<std::optional<int64_t>> ToolInput::OptionalInt(std::string_view field, int64_t min,
                                                      int64_t max) const {
  const auto* v = input_->if_contains(field);
  if (v == nullptr || v->is_null()) return std::optional<int64_t>();
  auto out_of_range = [&] {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be between " +
                                   std::to_string(min) + " and " + std::to_string(max) + ", got " +
                                   boost::json::serialize(*v));
  };
  int64_t n = 0;
  if (v->is_int64()) {
    n = v->get_int64();
  } else if (v->is_uint64()) {
    if (v->get_uint64() > static_cast<uint64_t>(max)) return out_of_range();
    n = static_cast<int64_t>(v->get_uint64());
  } else if (v->is_double() && std::trunc(v->get_double()) == v->get_double()) {
    // Whole numbers written with a fraction or exponent (2.0, 1e3). Past the int64 range
    // the conversion would be undefined (sandbox_tools_fuzz found 2.2e20).
    const double d = v->get_double();
    if (!(d >= -0x1p63 && d < 0x1p63)) return out_of_range();
    n = static_cast<int64_t>(d);
  } else {
    return WrongType(field, "an integer", *v);
  }
  if (n < min || n > max) return out_of_range();
  return std::optional<int64_t>(n);
}

Result<std::optional<bool>> ToolInput::OptionalBool(std::string_view field) const {
  const auto* v = input_->if_contains(field);
  if (v == nullptr || v->is_null()) return std::optional<bool>();
  if (!v->is_bool()) return WrongType(field, "a boolean", *v);
  return std::optional<bool>(v->get_bool());
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

}  // namespace sinew::sandbox
