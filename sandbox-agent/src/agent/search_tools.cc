// list_files (glob with `**`) and grep (POSIX extended regular expressions).
#include <fnmatch.h>
#include <regex.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "agent/file_util.h"
#include "agent/output_limiter.h"
#include "agent/regex_budget.h"
#include "agent/tool_input.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;

// Entries visited at most per call, so that a walk of a huge tree ends.
constexpr size_t kMaxWalkEntries = 200000;
constexpr size_t kMaxShownLineChars = 300;

std::vector<std::string> SplitPath(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) slash = s.size();
    if (slash > start) parts.emplace_back(s.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// Matches path segments against pattern segments; "**" matches zero or more segments.
bool MatchSegments(const std::vector<std::string>& pat, size_t pi,
                   const std::vector<std::string>& path, size_t si) {
  if (pi == pat.size()) return si == path.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= path.size(); ++k) {
      if (MatchSegments(pat, pi + 1, path, k)) return true;
    }
    return false;
  }
  if (si == path.size()) return false;
  if (fnmatch(pat[pi].c_str(), path[si].c_str(), 0) != 0) return false;
  return MatchSegments(pat, pi + 1, path, si + 1);
}

// A pattern without '/' matches the file name at any depth (like `**/pattern`).
bool GlobMatches(const std::vector<std::string>& pat, bool anywhere, const std::string& rel) {
  auto parts = SplitPath(rel);
  if (anywhere) return !parts.empty() && fnmatch(pat[0].c_str(), parts.back().c_str(), 0) == 0;
  return MatchSegments(pat, 0, parts, 0);
}

Result<fs::path> BaseDir(const ToolConfig& config, const ToolInput& input) {
  SINEW_ASSIGN_OR_RETURN(auto raw, input.OptionalString("path"));
  fs::path base = config.workspace;
  if (raw) {
    SINEW_ASSIGN_OR_RETURN(base, ResolvePath(config, *raw, false));
  }
  std::error_code ec;
  if (!fs::exists(base, ec)) return Status::NotFound("path not found: " + base.string());
  return base;
}

// Walks `base` (a directory or one file), skipping .git, calling fn(path, rel) for each
// entry until it returns false. Returns false when the walk was cut at kMaxWalkEntries.
template <typename Fn>
bool Walk(const fs::path& base, Fn fn) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    fn(base, base.filename().string());
    return true;
  }
  size_t visited = 0;
  fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++visited > kMaxWalkEntries) return false;
    const auto& entry = *it;
    // .git, and the kernel's pseudo file systems when walking from the root.
    if ((entry.path().filename() == ".git" || entry.path() == "/proc" || entry.path() == "/sys" ||
         entry.path() == "/dev") &&
        entry.is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!fn(entry.path(), entry.path().lexically_relative(base).string())) return true;
  }
  return true;
}

class ListFilesTool final : public Tool {
 public:
  explicit ListFilesTool(ToolConfig config) : config_(std::move(config)) {}
  std::string_view name() const override { return "list_files"; }
  bool idempotent() const override { return true; }
  std::string description() const override {
    return "Lists files and directories below `path` (default: the workspace) whose path "
           "relative to it matches the glob `pattern` (`*`, `?`, `[...]`, and `**` for any "
           "number of directories; a pattern without `/` matches names at any depth). "
           "Directories end in `/`; .git is skipped; at most `limit` entries (default 1000). "
           "Idempotent: it changes nothing.";
  }
  std::string input_schema_json() const override {
    return R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},)"
           R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})";
  }
  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"pattern", "path", "limit"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto pattern = input->RequiredString("pattern");
    if (!pattern.ok()) return ErrorResult(pattern.status().message());
    auto limit = input->OptionalInt("limit", 1, 100000);
    if (!limit.ok()) return ErrorResult(limit.status().message());
    auto base = BaseDir(config_, *input);
    if (!base.ok()) return ErrorResult(base.status().message());
    auto pat = SplitPath(*pattern);
    if (pat.empty())
      return ErrorResult("field 'pattern' is empty; use \"*\" or \"**\" to list everything");
    bool anywhere = pattern->find('/') == std::string::npos && *pattern != "**";
    std::vector<std::string> found;
    bool complete = Walk(*base, [&](const fs::path& p, const std::string& rel) {
      if (GlobMatches(pat, anywhere, rel)) {
        std::error_code ec;
        found.push_back(rel + (fs::is_directory(p, ec) ? "/" : ""));
      }
      return true;
    });
    std::sort(found.begin(), found.end());
    size_t cap = static_cast<size_t>(limit->value_or(1000));
    OutputLimiter out(config_.max_output_bytes);
    for (size_t k = 0; k < found.size() && k < cap; ++k) out.Append(found[k] + "\n");
    if (found.size() > cap) {
      out.Append("[... " + std::to_string(found.size() - cap) +
                 " more; narrow the pattern or raise limit]\n");
    }
    if (!complete)
      out.Append("[walk stopped after " + std::to_string(kMaxWalkEntries) + " entries]\n");
    if (found.empty()) return OkResult("no files match '" + *pattern + "' below " + base->string());
    return OkResult(out.Finish(), out.truncated() || found.size() > cap);
  }

 private:
  ToolConfig config_;
};

class GrepTool final : public Tool {
 public:
  explicit GrepTool(ToolConfig config) : config_(std::move(config)) {}
  std::string_view name() const override { return "grep"; }
  bool idempotent() const override { return true; }
  std::string description() const override {
    return "Searches text files below `path` (a directory or a file; default: the workspace) "
           "for lines matching the POSIX extended regular expression `pattern`, returning "
           "`file:line: text`. Optional `glob` filters files (as in list_files), "
           "`ignore_case`, and `limit` on matches (default 200). Binary files and .git are "
           "skipped. Idempotent: it changes nothing.";
  }
  std::string input_schema_json() const override {
    return R"({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},)"
           R"("glob":{"type":"string"},"ignore_case":{"type":"boolean"},)"
           R"("limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false})";
  }
  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"pattern", "path", "glob", "ignore_case", "limit"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto pattern = input->RequiredString("pattern");
    if (!pattern.ok()) return ErrorResult(pattern.status().message());
    auto glob = input->OptionalString("glob");
    if (!glob.ok()) return ErrorResult(glob.status().message());
    auto icase = input->OptionalBool("ignore_case");
    if (!icase.ok()) return ErrorResult(icase.status().message());
    auto limit = input->OptionalInt("limit", 1, 100000);
    if (!limit.ok()) return ErrorResult(limit.status().message());
    auto base = BaseDir(config_, *input);
    if (!base.ok()) return ErrorResult(base.status().message());
    if (pattern->find('\0') != std::string::npos)
      return ErrorResult("field 'pattern' contains a NUL byte");
    if (Status budget = CheckExtendedRegexBudget(*pattern); !budget.ok())
      return ErrorResult(budget.message());
    regex_t re;
    int rc = regcomp(&re, pattern->c_str(),
                     REG_EXTENDED | REG_NOSUB | (icase->value_or(false) ? REG_ICASE : 0));
    if (rc != 0) {
      char msg[256];
      regerror(rc, &re, msg, sizeof(msg));
      return ErrorResult(
          "invalid regular expression '" + *pattern + "': " + msg +
          " (POSIX extended syntax: escape ( ) { } + ? | with \\ to match them literally)");
    }
    std::vector<std::string> glob_pat;
    bool anywhere = false;
    if (glob->has_value()) {
      glob_pat = SplitPath(**glob);
      anywhere = (*glob)->find('/') == std::string::npos;
    }
    size_t cap = static_cast<size_t>(limit->value_or(200));
    size_t matches = 0;
    OutputLimiter out(config_.max_output_bytes);
    bool single_file = !fs::is_directory(*base);
    Walk(*base, [&](const fs::path& p, const std::string& rel) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) return true;
      if (!glob_pat.empty() && !GlobMatches(glob_pat, anywhere, rel)) return true;
      auto content = ReadWholeFile(p);
      if (!content.ok() || LooksBinary(*content)) return true;
      std::istringstream in(*content);
      std::string line;
      size_t line_no = 0;
      while (std::getline(in, line)) {
        ++line_no;
        if (regexec(&re, line.c_str(), 0, nullptr, 0) != 0) continue;
        if (++matches > cap) return false;
        if (line.size() > kMaxShownLineChars)
          line = line.substr(0, kMaxShownLineChars) + " [line cut]";
        out.Append((single_file ? p.string() : rel) + ":" + std::to_string(line_no) + ": " + line +
                   "\n");
      }
      return true;
    });
    regfree(&re);
    if (matches == 0) return OkResult("no matches for '" + *pattern + "' below " + base->string());
    if (matches > cap)
      out.Append("[... more matches; stopped at limit " + std::to_string(cap) + "]\n");
    return OkResult(out.Finish(), out.truncated() || matches > cap);
  }

 private:
  ToolConfig config_;
};

}  // namespace

std::unique_ptr<Tool> MakeListFilesTool(const ToolConfig& c) {
  return std::make_unique<ListFilesTool>(c);
}
std::unique_ptr<Tool> MakeGrepTool(const ToolConfig& c) { return std::make_unique<GrepTool>(c); }

}  // namespace sinew::sandbox
