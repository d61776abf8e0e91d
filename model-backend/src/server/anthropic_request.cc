#include "anthropic_request.h"

#include <algorithm>
#include <set>

#include "sinew/json_fields.h"

namespace sinew::model {
namespace json = boost::json;
using json_fields::Has;
using json_fields::IndexPath;
using json_fields::ReadBool;
using json_fields::ReadInt;
using json_fields::ReadNumber;
using json_fields::ReadString;
namespace {

// A tool name: [A-Za-z0-9_-]{1,64}, as the Messages API requires.
bool ValidToolName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// The block's "type" (InvalidArgument when it has none).
Result<std::string> BlockType(const json::value& block, const std::string& path) {
  const json::object* object = block.if_object();
  if (object == nullptr) return Status::InvalidArgument(path + " must be an object");
  std::string type;
  SINEW_RETURN_IF_ERROR(json_fields::Require(*object, "type", path));
  SINEW_RETURN_IF_ERROR(ReadString(*object, "type", path, &type));
  return type;
}

Status UnsupportedBlock(const std::string& path, const std::string& type) {
  if (type == "image" || type == "document" || type == "search_result" ||
      type == "server_tool_use" || type == "web_search_tool_result" || type == "container_upload") {
    return Status::Unimplemented(path + ": blocks of type \"" + type + "\" are not supported");
  }
  return Status::InvalidArgument(path + ".type \"" + type + "\" is not a content block type");
}

// A {"type":"text","text":...} block's text.
Status ReadTextBlock(const json::object& block, const std::string& path, std::string& out) {
  std::string text;
  SINEW_RETURN_IF_ERROR(json_fields::Require(block, "text", path));
  SINEW_RETURN_IF_ERROR(ReadString(block, "text", path, &text));
  out += text;
  return Status::Ok();
}

// A system prompt or a tool result's content: a string or an array of text blocks.
Status ReadTextContent(const json::value& value, const std::string& path, std::string& out) {
  if (value.is_string()) {
    out = std::string(value.as_string());
    return Status::Ok();
  }
  if (!value.is_array())
    return Status::InvalidArgument(path + " must be a string or an array of text blocks");
  for (size_t i = 0; i < value.as_array().size(); ++i) {
    const std::string block_path = IndexPath(path, i);
    SINEW_ASSIGN_OR_RETURN(std::string type, BlockType(value.as_array()[i], block_path));
    if (type != "text") return UnsupportedBlock(block_path, type);
    SINEW_RETURN_IF_ERROR(ReadTextBlock(value.as_array()[i].as_object(), block_path, out));
  }
  return Status::Ok();
}

// One message of `messages`, appended to `out` as one or more chat messages.
// `previous_tool_uses`: the tool_use ids of the message before (what a tool_result may
// answer); replaced with this message's.
Status ReadMessage(const json::value& item, size_t index, std::set<std::string>& previous_tool_uses,
                   std::vector<ChatMessage>& out) {
  const std::string prefix = IndexPath("messages", index);
  const json::object* object = item.if_object();
  if (object == nullptr) return Status::InvalidArgument(prefix + " must be an object");
  std::string role;
  SINEW_RETURN_IF_ERROR(json_fields::Require(*object, "role", prefix));
  SINEW_RETURN_IF_ERROR(ReadString(*object, "role", prefix, &role));
  if (role != "user" && role != "assistant") {
    return Status::InvalidArgument(prefix + ".role \"" + role +
                                   "\" must be user or assistant (the system prompt is the "
                                   "top-level system field)");
  }
  SINEW_RETURN_IF_ERROR(json_fields::Require(*object, "content", prefix));
  const json::value& content = object->at("content");
  const std::string content_path = prefix + ".content";
  std::set<std::string> tool_uses;
  if (content.is_string()) {
    out.push_back({.role = role, .content = std::string(content.as_string())});
    previous_tool_uses = std::move(tool_uses);
    return Status::Ok();
  }
  if (!content.is_array()) {
    return Status::InvalidArgument(content_path +
                                   " must be a string or an array of content blocks");
  }
  ChatMessage message{.role = role, .content = {}};
  std::vector<ChatMessage> results;  // user: the tool messages, in order
  bool has_text = false;
  for (size_t i = 0; i < content.as_array().size(); ++i) {
    const std::string path = IndexPath(content_path, i);
    const json::value& block_value = content.as_array()[i];
    SINEW_ASSIGN_OR_RETURN(std::string type, BlockType(block_value, path));
    const json::object& block = block_value.as_object();
    if (type == "text") {
      SINEW_RETURN_IF_ERROR(ReadTextBlock(block, path, message.content));
      has_text = true;
    } else if (type == "tool_use") {
      if (role != "assistant") {
        return Status::InvalidArgument(path + ": tool_use blocks belong in assistant messages");
      }
      ChatToolCall call;
      for (const char* field : {"id", "name", "input"}) {
        SINEW_RETURN_IF_ERROR(json_fields::Require(block, field, path));
      }
      SINEW_RETURN_IF_ERROR(ReadString(block, "id", path, &call.id));
      SINEW_RETURN_IF_ERROR(ReadString(block, "name", path, &call.name));
      if (call.id.empty()) return Status::InvalidArgument(path + ".id must not be empty");
      if (!ValidToolName(call.name)) {
        return Status::InvalidArgument(path + ".name must match [A-Za-z0-9_-]{1,64}");
      }
      if (!block.at("input").is_object()) {
        return Status::InvalidArgument(path + ".input must be an object");
      }
      if (!tool_uses.insert(call.id).second) {
        return Status::InvalidArgument(path + ".id \"" + call.id + "\" repeats");
      }
      call.arguments = json::serialize(block.at("input"));
      message.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result") {
      if (role != "user") {
        return Status::InvalidArgument(path + ": tool_result blocks belong in user messages");
      }
      ChatMessage result{.role = "tool", .content = {}};
      SINEW_RETURN_IF_ERROR(json_fields::Require(block, "tool_use_id", path));
      SINEW_RETURN_IF_ERROR(ReadString(block, "tool_use_id", path, &result.tool_call_id));
      if (!previous_tool_uses.contains(result.tool_call_id)) {
        return Status::InvalidArgument(path + ".tool_use_id \"" + result.tool_call_id +
                                       "\" answers no tool_use block of the message before");
      }
      bool is_error = false;
      SINEW_RETURN_IF_ERROR(ReadBool(block, "is_error", path, &is_error));
      if (Has(block, "content")) {
        SINEW_RETURN_IF_ERROR(
            ReadTextContent(block.at("content"), path + ".content", result.content));
      }
      if (is_error) result.content = "Error: " + result.content;
      results.push_back(std::move(result));
    } else if (type == "thinking" || type == "redacted_thinking") {
      if (role != "assistant") {
        return Status::InvalidArgument(path + ": " + type + " blocks belong in assistant messages");
      }
    } else {
      return UnsupportedBlock(path, type);
    }
  }
  for (ChatMessage& result : results) out.push_back(std::move(result));
  if (role == "assistant") {
    message.content_null = !has_text && !message.tool_calls.empty();
    out.push_back(std::move(message));
  } else if (has_text || results.empty()) {
    out.push_back(std::move(message));
  }
  previous_tool_uses = std::move(tool_uses);
  return Status::Ok();
}

Status ReadMessages(const json::object& body, GenerationRequest& out) {
  SINEW_RETURN_IF_ERROR(json_fields::Require(body, "messages", ""));
  const json::array* messages = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadArray(body, "messages", "", &messages));
  if (messages->empty()) return Status::InvalidArgument("messages must not be empty");
  std::set<std::string> previous_tool_uses;
  for (size_t i = 0; i < messages->size(); ++i) {
    SINEW_RETURN_IF_ERROR(ReadMessage((*messages)[i], i, previous_tool_uses, out.messages));
  }
  if (out.messages.back().role == "assistant") {
    return Status::Unimplemented(
        "continuing a last assistant message (prefill) is not "
        "supported; end messages with a user message");
  }
  return Status::Ok();
}

// tools: [{"name","description","input_schema"}]; server tools (with another "type")
// are not supported.
Status ReadTools(const json::object& body, GenerationRequest& out) {
  const json::array* tools = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadArray(body, "tools", "", &tools));
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    const std::string path = IndexPath("tools", i);
    const json::object* tool = (*tools)[i].if_object();
    if (tool == nullptr) return Status::InvalidArgument(path + " must be an object");
    std::string type = "custom";
    SINEW_RETURN_IF_ERROR(ReadString(*tool, "type", path, &type));
    if (type != "custom") {
      return Status::Unimplemented(path + ".type \"" + type +
                                   "\": server tools are not supported; give name, "
                                   "description and input_schema");
    }
    ToolSpec spec;
    SINEW_RETURN_IF_ERROR(json_fields::Require(*tool, "name", path));
    SINEW_RETURN_IF_ERROR(ReadString(*tool, "name", path, &spec.name));
    if (!ValidToolName(spec.name)) {
      return Status::InvalidArgument(path + ".name must match [A-Za-z0-9_-]{1,64}");
    }
    SINEW_RETURN_IF_ERROR(ReadString(*tool, "description", path, &spec.description));
    SINEW_RETURN_IF_ERROR(json_fields::Require(*tool, "input_schema", path));
    const json::object* schema = nullptr;
    SINEW_RETURN_IF_ERROR(json_fields::ReadObject(*tool, "input_schema", path, &schema));
    const json::value* schema_type = schema->if_contains("type");
    if (schema_type == nullptr || !schema_type->is_string() ||
        schema_type->as_string() != "object") {
      return Status::InvalidArgument(path +
                                     ".input_schema.type must be \"object\" (a tool's "
                                     "input is a JSON object)");
    }
    spec.parameters = *schema;
    for (const ToolSpec& other : out.tools) {
      if (other.name == spec.name) {
        return Status::InvalidArgument(path + ".name \"" + spec.name + "\" repeats");
      }
    }
    out.tools.push_back(std::move(spec));
  }
  return Status::Ok();
}

// tool_choice: {"type":"auto"|"any"|"none"} or {"type":"tool","name":...}.
Status ReadToolChoice(const json::object& body, GenerationRequest& out) {
  const json::object* choice = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadObject(body, "tool_choice", "", &choice));
  if (choice == nullptr) return Status::Ok();
  std::string type;
  SINEW_RETURN_IF_ERROR(json_fields::Require(*choice, "type", "tool_choice"));
  SINEW_RETURN_IF_ERROR(ReadString(*choice, "type", "tool_choice", &type));
  bool disable_parallel = false;  // one call is all a forced call makes anyway
  SINEW_RETURN_IF_ERROR(
      ReadBool(*choice, "disable_parallel_tool_use", "tool_choice", &disable_parallel));
  if (type == "auto") {
    out.tool_choice = ToolChoice::kAuto;
  } else if (type == "none") {
    out.tool_choice = ToolChoice::kNone;
  } else if (type == "any") {
    out.tool_choice = ToolChoice::kRequired;
  } else if (type == "tool") {
    SINEW_RETURN_IF_ERROR(json_fields::Require(*choice, "name", "tool_choice"));
    SINEW_RETURN_IF_ERROR(ReadString(*choice, "name", "tool_choice", &out.tool_choice_name));
    out.tool_choice = ToolChoice::kNamed;
    const bool known = std::any_of(out.tools.begin(), out.tools.end(), [&](const ToolSpec& t) {
      return t.name == out.tool_choice_name;
    });
    if (!known) {
      return Status::InvalidArgument("tool_choice.name \"" + out.tool_choice_name +
                                     "\" is not one of tools");
    }
  } else {
    return Status::InvalidArgument("tool_choice.type must be auto, any, tool or none");
  }
  if (out.tool_choice == ToolChoice::kRequired && out.tools.empty()) {
    return Status::InvalidArgument("tool_choice \"any\" needs tools");
  }
  return Status::Ok();
}

Status ReadStopSequences(const json::object& body, int32_t max, std::vector<std::string>& out) {
  const json::array* stops = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadArray(body, "stop_sequences", "", &stops));
  if (stops == nullptr) return Status::Ok();
  if (stops->size() > static_cast<size_t>(max)) {
    return Status::InvalidArgument("stop_sequences may hold at most " + std::to_string(max) +
                                   " strings");
  }
  for (const json::value& stop : *stops) {
    if (!stop.is_string() || stop.as_string().empty()) {
      return Status::InvalidArgument("stop_sequences must be non-empty strings");
    }
    out.emplace_back(stop.as_string());
  }
  return Status::Ok();
}

Status ReadSampling(const json::object& body, const AnthropicParseLimits& limits,
                    GenerationRequest& out) {
  SamplingParams& sampling = out.sampling;
  int64_t integer = 0;
  double number = 0;
  if (!limits.count_only) {
    SINEW_RETURN_IF_ERROR(json_fields::Require(body, "max_tokens", ""));
    SINEW_RETURN_IF_ERROR(ReadInt(body, "max_tokens", "", 1, 1 << 20, &integer));
    sampling.max_tokens = static_cast<int32_t>(integer);
  }
  // A cap, not a demand: cut to the room the prompt leaves (ModelRunner::Run).
  out.max_tokens_given = false;
  if (Has(body, "temperature")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(body, "temperature", "", 0.0, 1.0, &number));
    sampling.temperature = static_cast<float>(number);
  }
  if (Has(body, "top_p")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(body, "top_p", "", 0.0, 1.0, &number));
    if (number <= 0.0) return Status::InvalidArgument("top_p must be greater than 0");
    sampling.top_p = static_cast<float>(number);
  }
  if (Has(body, "top_k")) {
    SINEW_RETURN_IF_ERROR(ReadInt(body, "top_k", "", 0, 1 << 20, &integer));
    sampling.top_k = static_cast<int32_t>(integer);
  }
  return sampling.Validate();
}

// metadata {"user_id"} and thinking {"type":"enabled","budget_tokens"} | {"type":"disabled"}:
// checked for shape; neither changes the generation (a model that reasons does so by its
// template, and its reasoning comes back as thinking blocks).
Status ReadIgnoredObjects(const json::object& body) {
  const json::object* metadata = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadObject(body, "metadata", "", &metadata));
  if (metadata != nullptr) {
    std::string user_id;
    SINEW_RETURN_IF_ERROR(ReadString(*metadata, "user_id", "metadata", &user_id));
  }
  const json::object* thinking = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadObject(body, "thinking", "", &thinking));
  if (thinking != nullptr) {
    std::string type;
    SINEW_RETURN_IF_ERROR(json_fields::Require(*thinking, "type", "thinking"));
    SINEW_RETURN_IF_ERROR(ReadString(*thinking, "type", "thinking", &type));
    if (type != "enabled" && type != "disabled") {
      return Status::InvalidArgument("thinking.type must be enabled or disabled");
    }
    int64_t budget = 0;
    SINEW_RETURN_IF_ERROR(ReadInt(*thinking, "budget_tokens", "thinking", 1, 1 << 20, &budget));
  }
  return Status::Ok();
}

}  // namespace

Result<AnthropicRequest> ParseAnthropicRequest(const json::value& value,
                                               const AnthropicParseLimits& limits) {
  const json::object* body = value.if_object();
  if (body == nullptr) return Status::InvalidArgument("the request body must be a JSON object");
  AnthropicRequest request;
  GenerationRequest& generation = request.generation;
  generation.chat = true;

  std::string model;
  SINEW_RETURN_IF_ERROR(json_fields::Require(*body, "model", ""));
  SINEW_RETURN_IF_ERROR(ReadString(*body, "model", "", &model));
  if (model != limits.model_id) {
    return Status::NotFound("model \"" + model + "\" does not exist; this server serves \"" +
                            limits.model_id + "\"");
  }
  if (Has(*body, "system")) {
    ChatMessage system{.role = "system", .content = {}};
    SINEW_RETURN_IF_ERROR(ReadTextContent(body->at("system"), "system", system.content));
    generation.messages.push_back(std::move(system));
  }
  SINEW_RETURN_IF_ERROR(ReadMessages(*body, generation));
  SINEW_RETURN_IF_ERROR(ReadTools(*body, generation));
  SINEW_RETURN_IF_ERROR(ReadToolChoice(*body, generation));
  SINEW_RETURN_IF_ERROR(ReadIgnoredObjects(*body));
  SINEW_RETURN_IF_ERROR(ReadSampling(*body, limits, generation));
  if (!limits.count_only) {
    SINEW_RETURN_IF_ERROR(ReadStopSequences(*body, limits.max_stop_sequences, generation.stop));
    SINEW_RETURN_IF_ERROR(ReadBool(*body, "stream", "", &request.stream));
  }
  return request;
}

}  // namespace sinew::model
