// read_file, write_file and edit_file.
#include <fcntl.h>

#include <sstream>

#include "agent/beneath.h"
#include "agent/file_util.h"
#include "agent/output_limiter.h"
#include "agent/tool_input.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

constexpr int64_t kDefaultLineLimit = 2000;
constexpr size_t kMaxLineChars = 2000;

// Writes below the workspace without ever following a link out of it (beneath.h).
Status WriteInWorkspace(const ToolConfig& config, const std::filesystem::path& path,
                        const std::string& content) {
  SINEW_ASSIGN_OR_RETURN(InWorkspace w, OpenInWorkspace(config, path));
  return WriteBeneath(w.root.get(), w.relative, content, path.string());
}

Result<std::string> ReadInWorkspace(const ToolConfig& config, const std::filesystem::path& path) {
  SINEW_ASSIGN_OR_RETURN(InWorkspace w, OpenInWorkspace(config, path));
  return ReadBeneath(w.root.get(), w.relative, path.string());
}

class ReadFileTool final : public Tool {
 public:
  explicit ReadFileTool(ToolConfig config) : Tool(kReadFileToolSpec), config_(std::move(config)) {}

  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"path", "offset", "limit"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto raw = input->RequiredString("path");
    if (!raw.ok()) return ErrorResult(raw.status().message());
    auto offset = input->OptionalInt("offset", 1, INT64_MAX / 2);
    if (!offset.ok()) return ErrorResult(offset.status().message());
    auto limit = input->OptionalInt("limit", 1, 1000000);
    if (!limit.ok()) return ErrorResult(limit.status().message());
    auto path = ResolvePath(config_, *raw, false);
    if (!path.ok()) return ErrorResult(path.status().message());
    auto content = ReadWholeFile(*path);
    if (!content.ok()) return ErrorResult(content.status().message());
    if (LooksBinary(*content)) {
      return ErrorResult(path->string() +
                         " looks binary (it holds NUL bytes); inspect it with "
                         "bash, e.g. `xxd " +
                         path->string() + " | head`");
    }
    if (content->empty()) return OkResult("(empty file)");
    int64_t first = offset->value_or(1);
    int64_t count = limit->value_or(kDefaultLineLimit);
    OutputLimiter out(config_.max_output_bytes);
    std::istringstream in(*content);
    std::string line;
    int64_t line_no = 0;
    int64_t shown = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line_no < first) continue;
      if (shown == count) {
        out.Append("[... more lines follow; read on with offset " + std::to_string(line_no) +
                   "]\n");
        break;
      }
      if (line.size() > kMaxLineChars) line = line.substr(0, kMaxLineChars) + " [line cut]";
      std::string num = std::to_string(line_no);
      out.Append(std::string(num.size() < 6 ? 6 - num.size() : 0, ' ') + num + "\t" + line + "\n");
      ++shown;
    }
    if (shown == 0) {
      return ErrorResult("offset " + std::to_string(first) + " is past the end: " + path->string() +
                         " has " + std::to_string(line_no) + " lines");
    }
    return OkResult(out.Finish(), out.truncated());
  }

 private:
  ToolConfig config_;
};

class WriteFileTool final : public Tool {
 public:
  explicit WriteFileTool(ToolConfig config) : Tool(kWriteFileToolSpec), config_(std::move(config)) {}

  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"path", "content"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto raw = input->RequiredString("path");
    if (!raw.ok()) return ErrorResult(raw.status().message());
    auto content = input->RequiredString("content");
    if (!content.ok()) return ErrorResult(content.status().message());
    auto path = ResolvePath(config_, *raw, true);
    if (!path.ok()) return ErrorResult(path.status().message());
    Status s = WriteInWorkspace(config_, *path, *content);
    if (!s.ok()) return ErrorResult(s.message());
    return OkResult("wrote " + std::to_string(content->size()) + " bytes to " + path->string());
  }

 private:
  ToolConfig config_;
};

class EditFileTool final : public Tool {
 public:
  explicit EditFileTool(ToolConfig config) : Tool(kEditFileToolSpec), config_(std::move(config)) {}

  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"path", "old_string", "new_string", "replace_all"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto raw = input->RequiredString("path");
    if (!raw.ok()) return ErrorResult(raw.status().message());
    auto old_s = input->RequiredString("old_string");
    if (!old_s.ok()) return ErrorResult(old_s.status().message());
    auto new_s = input->RequiredString("new_string");
    if (!new_s.ok()) return ErrorResult(new_s.status().message());
    auto all = input->OptionalBool("replace_all");
    if (!all.ok()) return ErrorResult(all.status().message());
    if (old_s->empty())
      return ErrorResult("field 'old_string' is empty; use write_file to create a file");
    if (*old_s == *new_s)
      return ErrorResult("old_string and new_string are the same; nothing to do");
    auto path = ResolvePath(config_, *raw, true);
    if (!path.ok()) return ErrorResult(path.status().message());
    auto content = ReadInWorkspace(config_, *path);
    if (!content.ok()) return ErrorResult(content.status().message());
    size_t count = 0;
    for (size_t pos = content->find(*old_s); pos != std::string::npos;
         pos = content->find(*old_s, pos + old_s->size())) {
      ++count;
    }
    if (count == 0) {
      return ErrorResult("old_string was not found in " + path->string() +
                         "; read the file to see its current text (whitespace and indentation "
                         "must match exactly)");
    }
    if (count > 1 && !all->value_or(false)) {
      return ErrorResult("old_string occurs " + std::to_string(count) + " times in " +
                         path->string() +
                         "; include more surrounding text to make it unique, or "
                         "set replace_all to true");
    }
    std::string updated;
    updated.reserve(content->size());
    size_t from = 0;
    for (size_t pos = content->find(*old_s); pos != std::string::npos;
         pos = content->find(*old_s, from)) {
      updated.append(*content, from, pos - from);
      updated += *new_s;
      from = pos + old_s->size();
    }
    updated.append(*content, from, std::string::npos);
    Status s = WriteInWorkspace(config_, *path, updated);
    if (!s.ok()) return ErrorResult(s.message());
    return OkResult("replaced " + std::to_string(count) + " occurrence" + (count == 1 ? "" : "s") +
                    " in " + path->string());
  }

 private:
  ToolConfig config_;
};

}  // namespace

std::unique_ptr<Tool> MakeReadFileTool(const ToolConfig& c) {
  return std::make_unique<ReadFileTool>(c);
}
std::unique_ptr<Tool> MakeWriteFileTool(const ToolConfig& c) {
  return std::make_unique<WriteFileTool>(c);
}
std::unique_ptr<Tool> MakeEditFileTool(const ToolConfig& c) {
  return std::make_unique<EditFileTool>(c);
}

}  // namespace sinew::sandbox
