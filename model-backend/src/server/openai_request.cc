#include "openai_request.h"

#include <algorithm>

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

Status WrongType(std::string_view field, std::string_view expected) {
  return Status::InvalidArgument(std::string(field) + " must be " + std::string(expected));
}

// A message content: a string or an array of {"type":"text","text":...} parts.
Status ReadContent(const json::value& value, size_t index, std::string& out) {
  const std::string field = IndexPath("messages", index) + ".content";
  if (value.is_string()) {
    out = std::string(value.as_string());
    return Status::Ok();
  }
  if (!value.is_array()) return WrongType(field, "a string or an array of text parts");
  for (const json::value& part : value.as_array()) {
    const json::object* object = part.if_object();
    const json::value* type = object ? object->if_contains("type") : nullptr;
    const json::value* text = object ? object->if_contains("text") : nullptr;
    if (type == nullptr || !type->is_string() || type->as_string() != "text" || text == nullptr ||
        !text->is_string()) {
      return Status::Unimplemented(
          field + ": only parts of type \"text\" with a string 'text' are supported");
    }
    out += std::string(text->as_string());
  }
  return Status::Ok();
}

// A tool or function name: [A-Za-z0-9_-]{1,64}, as OpenAI requires.
bool ValidToolName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
}

// An assistant message's tool_calls: [{"type":"function","function":{"name","arguments"}}].
Status ReadToolCalls(const json::value& value, const std::string& prefix,
                     std::vector<ChatToolCall>& out) {
  if (!value.is_array()) return WrongType(prefix + ".tool_calls", "an array");
  for (const json::value& item : value.as_array()) {
    const json::object* call = item.if_object();
    const json::value* fn = call ? call->if_contains("function") : nullptr;
    const json::object* f = fn ? fn->if_object() : nullptr;
    const json::value* name = f ? f->if_contains("name") : nullptr;
    const json::value* args = f ? f->if_contains("arguments") : nullptr;
    if (name == nullptr || !name->is_string() || !ValidToolName(name->as_string()) ||
        args == nullptr || !args->is_string()) {
      return Status::InvalidArgument(prefix +
                                     ".tool_calls: each needs function.name ([A-Za-z0-9_-]) and "
                                     "function.arguments (a JSON string)");
    }
    boost::system::error_code ec;
    json::value parsed = json::parse(args->as_string(), ec);
    if (ec || !parsed.is_object()) {
      return Status::InvalidArgument(prefix + ".tool_calls: function.arguments must be a JSON "
                                              "object in a string");
    }
    const json::value* id = call->if_contains("id");
    out.push_back({std::string(name->as_string()), json::serialize(parsed),
                   id && id->is_string() ? std::string(id->as_string()) : std::string()});
  }
  return Status::Ok();
}

// tools: [{"type":"function","function":{"name","description","parameters"}}].
Status ReadTools(const json::object& body, GenerationRequest& out) {
  const json::array* tools = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadArray(body, "tools", "", &tools));
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    const std::string field = IndexPath("tools", i);
    const json::object* tool = (*tools)[i].if_object();
    if (tool == nullptr) return WrongType(field, "an object");
    const json::value* type = tool->if_contains("type");
    if (type == nullptr || !type->is_string() || type->as_string() != "function") {
      return Status::InvalidArgument(field + ".type must be \"function\"");
    }
    const json::object* fn = nullptr;
    SINEW_RETURN_IF_ERROR(json_fields::ReadObject(*tool, "function", field, &fn));
    if (fn == nullptr) return WrongType(field + ".function", "an object");
    const json::object& f = *fn;
    ToolSpec spec;
    const json::value* name = f.if_contains("name");
    if (name == nullptr || !name->is_string() || !ValidToolName(name->as_string())) {
      return Status::InvalidArgument(field + ".function.name must match [A-Za-z0-9_-]{1,64}");
    }
    spec.name = std::string(name->as_string());
    spec.description = json_fields::StringField(f, "description");
    spec.parameters = json::object{{"type", "object"}, {"properties", json::object{}}};
    const json::object* p = nullptr;
    SINEW_RETURN_IF_ERROR(json_fields::ReadObject(f, "parameters", field + ".function", &p));
    if (p != nullptr) {
      // A call's arguments are a JSON object: its schema must describe one.
      const json::value* schema_type = p->if_contains("type");
      if (schema_type != nullptr && !(schema_type->is_string() && schema_type->as_string() == "object")) {
        return Status::InvalidArgument(field + ".function.parameters must be an object schema "
                                       "({\"type\": \"object\", \"properties\": {...}}); "
                                       "a call's arguments are a JSON object");
      }
      spec.parameters = *p;
    }
    spec.json = *tool;
    for (const ToolSpec& other : out.tools) {
      if (other.name == spec.name) {
        return Status::InvalidArgument(field + ".function.name \"" + spec.name + "\" repeats");
      }
    }
    out.tools.push_back(std::move(spec));
  }
  return Status::Ok();
}

// tool_choice: "auto" | "none" | "required" | {"type":"function","function":{"name"}}.
Status ReadToolChoice(const json::object& body, GenerationRequest& out) {
  const json::value* choice = body.if_contains("tool_choice");
  if (choice == nullptr || choice->is_null()) return Status::Ok();
  if (choice->is_string()) {
    const std::string_view c = choice->as_string();
    if (c == "auto") out.tool_choice = ToolChoice::kAuto;
    else if (c == "none") out.tool_choice = ToolChoice::kNone;
    else if (c == "required") out.tool_choice = ToolChoice::kRequired;
    else return Status::InvalidArgument("tool_choice must be auto, none, required or an object");
  } else {
    const json::object* o = choice->if_object();
    const json::value* fn = o ? o->if_contains("function") : nullptr;
    const json::value* name =
        fn && fn->is_object() ? fn->as_object().if_contains("name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return Status::InvalidArgument(
          "tool_choice must be {\"type\":\"function\",\"function\":{\"name\":...}}");
    }
    out.tool_choice = ToolChoice::kNamed;
    out.tool_choice_name = std::string(name->as_string());
    const bool known = std::any_of(out.tools.begin(), out.tools.end(), [&](const ToolSpec& t) {
      return t.name == out.tool_choice_name;
    });
    if (!known) {
      return Status::InvalidArgument("tool_choice names \"" + out.tool_choice_name +
                                     "\", which is not in tools");
    }
  }
  if ((out.tool_choice == ToolChoice::kRequired) && out.tools.empty()) {
    return Status::InvalidArgument("tool_choice \"required\" needs tools");
  }
  return Status::Ok();
}

// response_format: {"type":"text"} | {"type":"json_schema","json_schema":{"schema":{...}}}.
Status ReadResponseFormat(const json::object& body, GenerationRequest& out) {
  const json::value* format = body.if_contains("response_format");
  if (format == nullptr || format->is_null()) return Status::Ok();
  const json::object* o = format->if_object();
  const json::value* type = o ? o->if_contains("type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return Status::InvalidArgument("response_format.type must be a string");
  }
  if (type->as_string() == "text") return Status::Ok();
  if (type->as_string() == "json_object") {
    return Status::Unimplemented(
        "response_format json_object is not supported; give a json_schema instead");
  }
  if (type->as_string() != "json_schema") {
    return Status::InvalidArgument("response_format.type must be text or json_schema");
  }
  const json::value* js = o->if_contains("json_schema");
  const json::value* schema =
      js && js->is_object() ? js->as_object().if_contains("schema") : nullptr;
  if (schema == nullptr || !schema->is_object()) {
    return Status::InvalidArgument("response_format.json_schema.schema must be an object");
  }
  out.response_schema = *schema;
  return Status::Ok();
}

// The message a template gets: the client's, with the role as read ("developer" is
// "system") and text parts joined into the content string.
json::object ClientMessageJson(const json::object& sent, const ChatMessage& message) {
  json::object out = sent;
  out["role"] = message.role;
  if (const json::value* content = sent.if_contains("content"); content != nullptr && content->is_array()) {
    out["content"] = message.content;
  }
  return out;
}

Status ReadMessages(const json::object& body, GenerationRequest& out) {
  SINEW_RETURN_IF_ERROR(json_fields::Require(body, "messages", ""));
  const json::array* messages = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadArray(body, "messages", "", &messages));
  if (messages->empty()) return Status::InvalidArgument("messages must not be empty");
  size_t index = 0;
  for (const json::value& item : *messages) {
    const std::string prefix = IndexPath("messages", index);
    const json::object* object = item.if_object();
    if (object == nullptr) return WrongType(prefix, "an object");
    ChatMessage message;
    SINEW_RETURN_IF_ERROR(json_fields::Require(*object, "role", prefix));
    SINEW_RETURN_IF_ERROR(ReadString(*object, "role", prefix, &message.role));
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "developer" && message.role != "tool") {
      return Status::InvalidArgument(prefix + ".role \"" + message.role +
                                     "\" must be system, user or assistant");
    }
    if (message.role == "developer") message.role = "system";
    const json::value* content = object->if_contains("content");
    const json::value* calls = object->if_contains("tool_calls");
    const bool has_calls = message.role == "assistant" && calls != nullptr && !calls->is_null();
    if (has_calls) SINEW_RETURN_IF_ERROR(ReadToolCalls(*calls, prefix, message.tool_calls));
    if ((content == nullptr || content->is_null()) && !has_calls) {
      return Status::InvalidArgument(prefix + ".content is required");
    }
    if (content != nullptr && !content->is_null()) {
      SINEW_RETURN_IF_ERROR(ReadContent(*content, index, message.content));
    } else {
      message.content_null = true;
    }
    SINEW_RETURN_IF_ERROR(ReadString(*object, "tool_call_id", prefix, &message.tool_call_id));
    SINEW_RETURN_IF_ERROR(ReadString(*object, "name", prefix, &message.name));
    message.json = ClientMessageJson(*object, message);
    out.messages.push_back(std::move(message));
    ++index;
  }
  return Status::Ok();
}

Status ReadPrompt(const json::object& body, GenerationRequest& out) {
  SINEW_RETURN_IF_ERROR(json_fields::Require(body, "prompt", ""));
  const json::value* prompt = body.if_contains("prompt");
  if (prompt->is_string()) {
    out.prompt = std::string(prompt->as_string());
    return Status::Ok();
  }
  if (prompt->is_array() && prompt->as_array().size() == 1 && prompt->as_array()[0].is_string()) {
    out.prompt = std::string(prompt->as_array()[0].as_string());
    return Status::Ok();
  }
  // Token ids: [1, 2, 3] or [[1, 2, 3]] (BOS is not added to given tokens).
  const json::array* tokens = prompt->if_array();
  if (tokens != nullptr && tokens->size() == 1 && (*tokens)[0].is_array()) {
    tokens = &(*tokens)[0].as_array();
  }
  if (tokens != nullptr && !tokens->empty() &&
      std::all_of(tokens->begin(), tokens->end(),
                  [](const json::value& v) { return v.is_int64(); })) {
    for (const json::value& token : *tokens) {
      int64_t id = token.as_int64();
      if (id < 0 || id > INT32_MAX) return Status::InvalidArgument("prompt token id out of range");
      out.prompt_tokens.push_back(static_cast<int32_t>(id));
    }
    return Status::Ok();
  }
  if (prompt->is_array()) {
    return Status::Unimplemented(
        "prompt must be a string, a one-string array or an array of token ids (batches are not "
        "supported)");
  }
  return WrongType("prompt", "a string");
}

Status ReadStop(const json::object& body, int32_t max_stops, std::vector<std::string>& out) {
  const json::value* stop = body.if_contains("stop");
  if (stop == nullptr || stop->is_null()) return Status::Ok();
  if (stop->is_string()) {
    if (!stop->as_string().empty()) out.emplace_back(stop->as_string());
    return Status::Ok();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings");
  if (stop->as_array().size() > static_cast<size_t>(max_stops)) {
    return Status::InvalidArgument("stop may hold at most " + std::to_string(max_stops) +
                                   " strings");
  }
  for (const json::value& item : stop->as_array()) {
    if (!item.is_string()) return WrongType("stop", "a string or an array of strings");
    if (!item.as_string().empty()) out.emplace_back(item.as_string());
  }
  return Status::Ok();
}

}  // namespace

Result<OpenAiRequest> ParseOpenAiRequest(const json::value& value, bool chat,
                                         const ParseLimits& limits) {
  const json::object* body = value.if_object();
  if (body == nullptr) return Status::InvalidArgument("the request body must be a JSON object");
  OpenAiRequest request;
  GenerationRequest& generation = request.generation;
  generation.chat = chat;

  std::string model;
  SINEW_RETURN_IF_ERROR(ReadString(*body, "model", "", &model));
  if (Has(*body, "model") && model != limits.model_id) {
    return Status::NotFound("model \"" + model + "\" does not exist; this server serves \"" +
                            limits.model_id + "\"");
  }
  SINEW_RETURN_IF_ERROR(chat ? ReadMessages(*body, generation) : ReadPrompt(*body, generation));

  int64_t integer = 0;
  double number = 0;
  SamplingParams& sampling = generation.sampling;
  sampling.max_tokens = limits.default_max_tokens;
  for (std::string_view field : {"max_tokens", "max_completion_tokens"}) {
    if (!Has(*body, field)) continue;
    SINEW_RETURN_IF_ERROR(ReadInt(*body, field, "", 1, 1 << 20, &integer));
    sampling.max_tokens = static_cast<int32_t>(integer);
    generation.max_tokens_given = true;
  }
  // A sampling number in [low, high] into the float `out`, when given.
  auto read_float = [&](const char* field, double low, double high, float* out) {
    if (!Has(*body, field)) return Status::Ok();
    SINEW_RETURN_IF_ERROR(ReadNumber(*body, field, "", low, high, &number));
    *out = static_cast<float>(number);
    return Status::Ok();
  };
  SINEW_RETURN_IF_ERROR(read_float("temperature", 0.0, 2.0, &sampling.temperature));
  if (Has(*body, "top_p")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(*body, "top_p", "", 0.0, 1.0, &number));
    if (number <= 0.0) return Status::InvalidArgument("top_p must be greater than 0");
    sampling.top_p = static_cast<float>(number);
  }
  if (Has(*body, "top_k")) {
    SINEW_RETURN_IF_ERROR(ReadInt(*body, "top_k", "", 0, 1 << 20, &integer));
    sampling.top_k = static_cast<int32_t>(integer);
  }
  SINEW_RETURN_IF_ERROR(read_float("min_p", 0.0, 1.0, &sampling.min_p));
  SINEW_RETURN_IF_ERROR(read_float("repetition_penalty", 0.01, 10.0, &sampling.repetition_penalty));
  // seed: any integer; one past INT64_MAX reads as INT64_MAX, as it always has.
  if (const json::value* seed = body->if_contains("seed"); seed != nullptr && seed->is_uint64()) {
    sampling.seed = std::min<uint64_t>(seed->as_uint64(), INT64_MAX);
  } else if (Has(*body, "seed")) {
    SINEW_RETURN_IF_ERROR(ReadInt(*body, "seed", "", INT64_MIN, INT64_MAX, &integer));
    sampling.seed = static_cast<uint64_t>(integer);
  }
  SINEW_RETURN_IF_ERROR(read_float("frequency_penalty", -2.0, 2.0, &sampling.frequency_penalty));
  SINEW_RETURN_IF_ERROR(read_float("presence_penalty", -2.0, 2.0, &sampling.presence_penalty));
  // llama.cpp's extension: keep generating past end-of-generation tokens.
  bool ignore_eos = false;
  SINEW_RETURN_IF_ERROR(ReadBool(*body, "ignore_eos", "", &ignore_eos));
  sampling.stop_at_eos = !ignore_eos;
  SINEW_RETURN_IF_ERROR(ReadInt(*body, "n", "", 1, 1, &integer));
  if (chat) {
    SINEW_RETURN_IF_ERROR(
        ReadBool(*body, "add_generation_prompt", "", &generation.add_generation_prompt));
    SINEW_RETURN_IF_ERROR(ReadTools(*body, generation));
    SINEW_RETURN_IF_ERROR(ReadToolChoice(*body, generation));
    SINEW_RETURN_IF_ERROR(ReadResponseFormat(*body, generation));
    if (generation.response_schema && generation.tool_choice != ToolChoice::kNone &&
        !generation.tools.empty()) {
      return Status::Unimplemented("response_format json_schema together with tools is not "
                                   "supported; use tool_choice \"none\" or drop one");
    }
  }
  for (std::string_view field : {"tools", "functions", "response_format", "suffix"}) {
    if (chat && field != "functions" && field != "suffix") continue;
    if (Has(*body, field)) {
      return Status::Unimplemented(std::string(field) + " is not supported yet");
    }
  }
  SINEW_RETURN_IF_ERROR(ReadStop(*body, limits.max_stop_strings, generation.stop));
  SINEW_RETURN_IF_ERROR(ReadBool(*body, "stream", "", &request.stream));
  const json::object* options = nullptr;
  SINEW_RETURN_IF_ERROR(json_fields::ReadObject(*body, "stream_options", "", &options));
  if (options != nullptr) {
    SINEW_RETURN_IF_ERROR(
        ReadBool(*options, "include_usage", "stream_options", &request.include_usage));
  }

  // logprobs: chat -> boolean plus top_logprobs; completions -> integer (alternatives).
  if (chat) {
    SINEW_RETURN_IF_ERROR(ReadBool(*body, "logprobs", "", &generation.want_logprobs));
    if (Has(*body, "top_logprobs")) {
      SINEW_RETURN_IF_ERROR(
          ReadInt(*body, "top_logprobs", "", 0, limits.max_top_logprobs, &integer));
      if (!generation.want_logprobs) {
        return Status::InvalidArgument("top_logprobs requires logprobs: true");
      }
      request.top_logprobs = static_cast<int32_t>(integer);
    }
  } else if (Has(*body, "logprobs")) {
    SINEW_RETURN_IF_ERROR(ReadInt(*body, "logprobs", "", 0, 5, &integer));
    generation.want_logprobs = true;
    request.top_logprobs = static_cast<int32_t>(integer);
  }
  sampling.logprobs = request.top_logprobs;
  if (Status valid = sampling.Validate(); !valid.ok()) return valid;
  return request;
}

}  // namespace sinew::model
