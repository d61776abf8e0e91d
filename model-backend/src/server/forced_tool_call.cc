#include "forced_tool_call.h"

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

}  // namespace

ForcedToolCall PlanForcedToolCall(const GenerationRequest& request, ToolCallFormat format) {
  ForcedToolCall plan;
  auto json_lead = [](std::string_view before, const std::string& name, std::string_view args_key) {
    return std::string(before) + "{\"name\":" + json::serialize(json::string(name)) + ",\"" +
           std::string(args_key) + "\":";
  };
  for (const ToolSpec& tool : request.tools) {
    if (request.tool_choice == ToolChoice::kNamed && tool.name != request.tool_choice_name) continue;
    FramedJson alt{"", tool.parameters, ""};
    switch (format) {
      case ToolCallFormat::kHermes:
        plan.frame = {"<tool_call>\n", "\n</tool_call>"};
        alt.lead = json_lead("", tool.name, "arguments");
        alt.trail = "}";
        break;
      case ToolCallFormat::kLlama3Json:
        alt.lead = json_lead("", tool.name, "parameters");
        alt.trail = "}";
        break;
      case ToolCallFormat::kMistral:
        plan.frame = {"[TOOL_CALLS]", ""};
        alt.lead = json_lead("[", tool.name, "arguments");
        alt.trail = "}]";
        break;
      case ToolCallFormat::kFirefunction:
        plan.frame = {" functools", ""};
        alt.lead = json_lead("[", tool.name, "arguments");
        alt.trail = "}]";
        break;
      case ToolCallFormat::kFunctionaryV31:
        plan.frame = {"<function=", "</function>"};
        alt.lead = tool.name + ">";
        break;
      case ToolCallFormat::kFunctionaryV32:
        alt.lead = tool.name + "\n";
        break;
      case ToolCallFormat::kCommandR7B:
        plan.frame = {"<|START_ACTION|>", "<|END_ACTION|>"};
        alt.lead = "[{\"tool_call_id\":\"0\",\"tool_name\":" +
                   json::serialize(json::string(tool.name)) + ",\"parameters\":";
        alt.trail = "}]";
        break;
      case ToolCallFormat::kDeepSeekR1:
        plan.frame = {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
        alt.lead = tool.name + "\n```json\n";
        alt.trail = "\n```";
        break;
    }
    plan.alternatives.push_back(std::move(alt));
  }
  return plan;
}

}  // namespace sinew::model
