// Factories of the built-in tools, and ToolRegistry, which dispatches Execute calls.
//
// Thread-safety: a ToolRegistry is immutable after construction; Execute may be called
// concurrently.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "agent/tool.h"

namespace sinew::sandbox {

std::unique_ptr<Tool> MakeBashTool(const ToolConfig& config);
std::unique_ptr<Tool> MakeReadFileTool(const ToolConfig& config);
std::unique_ptr<Tool> MakeWriteFileTool(const ToolConfig& config);
std::unique_ptr<Tool> MakeEditFileTool(const ToolConfig& config);
std::unique_ptr<Tool> MakeListFilesTool(const ToolConfig& config);
std::unique_ptr<Tool> MakeGrepTool(const ToolConfig& config);

class ToolRegistry {
 public:
  // All built-in tools.
  explicit ToolRegistry(const ToolConfig& config);

  // Parses `input_json`, validates it and runs tool `name`. Never throws: bad input,
  // unknown tools and internal failures come back as is_error results.
  v1::ExecuteResult Execute(std::string_view name, std::string_view input_json,
                            const ChunkSink& sink = {}) const;
  std::vector<v1::ToolSpec> Specs() const;

 private:
  std::vector<std::unique_ptr<Tool>> tools_;
};

}  // namespace sinew::sandbox
