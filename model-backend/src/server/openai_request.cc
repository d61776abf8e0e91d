#include "openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sinew::model {
namespace json = boost::json;
namespace {

Status WrongType(std::string_view field, std::string_view expected) {
  return Status::InvalidArgument("'" + std::string(field) + "' must be " + std::string(expected));
}

// Reads an optional number field into `out`; checks [low, high].
// A number as people write it: 2, 0.5, -2 (not JSON's 2E0).
std::string Plain(double number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", number);
  return buf;
}

Status ReadNumber(const json::object& body, std::string_view field, double low, double high,
                  double& out, bool& present) {
  present = false;
  const json::value* value = body.if_contains(field);
  if (value == nullptr || value->is_null()) return Status::Ok();
  if (!value->is_number()) return WrongType(field, "a number");
  double number = value->to_number<double>();
  if (!std::isfinite(number) || number < low || number > high) {
    return Status::InvalidArgument("'" + std::string(field) + "' must be between " + Plain(low) +
                                   " and " + Plain(high));
  }
  out = number;
  present = true;
  return Status::Ok();
}

Status ReadInteger(const json::object& body, std::string_view field, int64_t low, int64_t high,
                   int64_t& out, bool& present) {
  present = false;
  const json::value* value = body.if_contains(field);
  if (value == nullptr || value->is_null()) return Status::Ok();
  int64_t number = 0;
  if (value->is_int64()) {
    number = value->as_int64();
  } else if (value->is_uint64()) {
    number = value->as_uint64() > static_cast<uint64_t>(INT64_MAX)
                 ? INT64_MAX
                 : static_cast<int64_t>(value->as_uint64());
  } else if (value->is_double() && std::floor(value->as_double()) == value->as_double() &&
             std::fabs(value->as_double()) < 9e15) {
    number = static_cast<int64_t>(value->as_double());
  } else {
    return WrongType(field, "an integer");
  }
  if (number < low || number > high) {
    return Status::InvalidArgument("'" + std::string(field) + "' must be between " +
                                   std::to_string(low) + " and " + std::to_string(high));
  }
  out = number;
  present = true;
  return Status::Ok();
}

Status ReadBool(const json::object& body, std::string_view field, bool& out) {
  const json::value* value = body.if_contains(field);
  if (value == nullptr || value->is_null()) return Status::Ok();
  if (!value->is_bool()) return WrongType(field, "a boolean");
  out = value->as_bool();
  return Status::Ok();
}

// A message content: a string or an array of {"type":"text","text":...} parts.
Status ReadContent(const json::value& value, size_t index, std::string& out) {
  std::string field = "messages[" + std::to_string(index) + "].content";
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
  const json::value* tools = body.if_contains("tools");
  if (tools == nullptr || tools->is_null()) return Status::Ok();
  if (!tools->is_array()) return WrongType("tools", "an array");
  for (size_t i = 0; i < tools->as_array().size(); ++i) {
    const std::string field = "tools[" + std::to_string(i) + "]";
    const json::object* tool = tools->as_array()[i].if_object();
    if (tool == nullptr) return WrongType(field, "an object");
    const json::value* type = tool->if_contains("type");
    if (type == nullptr || !type->is_string() || type->as_string() != "function") {
      return Status::InvalidArgument(field + ".type must be \"function\"");
    }
    const json::value* fn = tool->if_contains("function");
    if (fn == nullptr || !fn->is_object()) return WrongType(field + ".function", "an object");
    const json::object& f = fn->as_object();
    ToolSpec spec;
    const json::value* name = f.if_contains("name");
    if (name == nullptr || !name->is_string() || !ValidToolName(name->as_string())) {
      return Status::InvalidArgument(field + ".function.name must match [A-Za-z0-9_-]{1,64}");
    }
    spec.name = std::string(name->as_string());
    if (const json::value* d = f.if_contains("description"); d && d->is_string()) {
      spec.description = std::string(d->as_string());
    }
    spec.parameters = json::object{{"type", "object"}, {"properties", json::object{}}};
    if (const json::value* p = f.if_contains("parameters"); p && !p->is_null()) {
      if (!p->is_object()) return WrongType(field + ".function.parameters", "an object");
      // A call's arguments are a JSON object: its schema must describe one.
      const json::value* schema_type = p->as_object().if_contains("type");
      if (schema_type != nullptr && !(schema_type->is_string() && schema_type->as_string() == "object")) {
        return Status::InvalidArgument(field + ".function.parameters must be an object schema "
                                       "({\"type\": \"object\", \"properties\": {...}}); "
                                       "a call's arguments are a JSON object");
      }
      spec.parameters = *p;
    }
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

Status ReadMessages(const json::object& body, GenerationRequest& out) {
  const json::value* messages = body.if_contains("messages");
  if (messages == nullptr) return Status::InvalidArgument("'messages' is required");
  if (!messages->is_array()) return WrongType("messages", "an array");
  if (messages->as_array().empty()) return Status::InvalidArgument("'messages' must not be empty");
  size_t index = 0;
  for (const json::value& item : messages->as_array()) {
    std::string prefix = "messages[" + std::to_string(index) + "]";
    const json::object* object = item.if_object();
    if (object == nullptr) return WrongType(prefix, "an object");
    const json::value* role = object->if_contains("role");
    if (role == nullptr || !role->is_string()) return WrongType(prefix + ".role", "a string");
    ChatMessage message;
    message.role = std::string(role->as_string());
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
    for (auto [field, target] : {std::pair{"tool_call_id", &message.tool_call_id}, std::pair{"name", &message.name}}) {
      const json::value* v = object->if_contains(field);
      if (v == nullptr || v->is_null()) continue;
      if (!v->is_string()) return WrongType(prefix + "." + field, "a string");
      *target = std::string(v->as_string());
    }
    out.messages.push_back(std::move(message));
    ++index;
  }
  return Status::Ok();
}

Status ReadPrompt(const json::object& body, GenerationRequest& out) {
  const json::value* prompt = body.if_contains("prompt");
  if (prompt == nullptr) return Status::InvalidArgument("'prompt' is required");
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
      if (id < 0 || id > INT32_MAX)
        return Status::InvalidArgument("'prompt' token id out of range");
      out.prompt_tokens.push_back(static_cast<int32_t>(id));
    }
    return Status::Ok();
  }
  if (prompt->is_array()) {
    return Status::Unimplemented(
        "'prompt' must be a string, a one-string array or an array of token ids (batches are not "
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
    return Status::InvalidArgument("'stop' may hold at most " + std::to_string(max_stops) +
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

  if (const json::value* model = body->if_contains("model"); model && !model->is_null()) {
    if (!model->is_string()) return WrongType("model", "a string");
    if (model->as_string() != limits.model_id) {
      return Status::NotFound("model \"" + std::string(model->as_string()) +
                              "\" does not exist; this server serves \"" + limits.model_id + "\"");
    }
  }
  SINEW_RETURN_IF_ERROR(chat ? ReadMessages(*body, generation) : ReadPrompt(*body, generation));

  bool present = false;
  int64_t integer = 0;
  double number = 0;
  SamplingParams& sampling = generation.sampling;
  sampling.max_tokens = limits.default_max_tokens;
  for (std::string_view field : {"max_tokens", "max_completion_tokens"}) {
    SINEW_RETURN_IF_ERROR(ReadInteger(*body, field, 1, 1 << 20, integer, present));
    if (present) {
      sampling.max_tokens = static_cast<int32_t>(integer);
      generation.max_tokens_given = true;
    }
  }
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "temperature", 0.0, 2.0, number, present));
  if (present) sampling.temperature = static_cast<float>(number);
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "top_p", 0.0, 1.0, number, present));
  if (present) {
    if (number <= 0.0) return Status::InvalidArgument("'top_p' must be greater than 0");
    sampling.top_p = static_cast<float>(number);
  }
  SINEW_RETURN_IF_ERROR(ReadInteger(*body, "top_k", 0, 1 << 20, integer, present));
  if (present) sampling.top_k = static_cast<int32_t>(integer);
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "min_p", 0.0, 1.0, number, present));
  if (present) sampling.min_p = static_cast<float>(number);
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "repetition_penalty", 0.01, 10.0, number, present));
  if (present) sampling.repetition_penalty = static_cast<float>(number);
  SINEW_RETURN_IF_ERROR(ReadInteger(*body, "seed", INT64_MIN, INT64_MAX, integer, present));
  if (present) sampling.seed = static_cast<uint64_t>(integer);
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "frequency_penalty", -2.0, 2.0, number, present));
  if (present) sampling.frequency_penalty = static_cast<float>(number);
  SINEW_RETURN_IF_ERROR(ReadNumber(*body, "presence_penalty", -2.0, 2.0, number, present));
  if (present) sampling.presence_penalty = static_cast<float>(number);
  // llama.cpp's extension: keep generating past end-of-generation tokens.
  bool ignore_eos = false;
  SINEW_RETURN_IF_ERROR(ReadBool(*body, "ignore_eos", ignore_eos));
  sampling.stop_at_eos = !ignore_eos;
  SINEW_RETURN_IF_ERROR(ReadInteger(*body, "n", 1, 1, integer, present));
  if (chat) {
    SINEW_RETURN_IF_ERROR(ReadBool(*body, "add_generation_prompt", generation.add_generation_prompt));
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
    const json::value* unsupported = body->if_contains(field);
    if (unsupported != nullptr && !unsupported->is_null()) {
      return Status::Unimplemented("'" + std::string(field) + "' is not supported yet");
    }
  }
  SINEW_RETURN_IF_ERROR(ReadStop(*body, limits.max_stop_strings, generation.stop));
  SINEW_RETURN_IF_ERROR(ReadBool(*body, "stream", request.stream));
  if (const json::value* options = body->if_contains("stream_options");
      options && !options->is_null()) {
    if (!options->is_object()) return WrongType("stream_options", "an object");
    SINEW_RETURN_IF_ERROR(ReadBool(options->as_object(), "include_usage", request.include_usage));
  }

  // logprobs: chat -> boolean plus top_logprobs; completions -> integer (alternatives).
  if (chat) {
    SINEW_RETURN_IF_ERROR(ReadBool(*body, "logprobs", generation.want_logprobs));
    SINEW_RETURN_IF_ERROR(
        ReadInteger(*body, "top_logprobs", 0, limits.max_top_logprobs, integer, present));
    if (present) {
      if (!generation.want_logprobs) {
        return Status::InvalidArgument("'top_logprobs' requires 'logprobs': true");
      }
      request.top_logprobs = static_cast<int32_t>(integer);
    }
  } else {
    SINEW_RETURN_IF_ERROR(ReadInteger(*body, "logprobs", 0, 5, integer, present));
    if (present) {
      generation.want_logprobs = true;
      request.top_logprobs = static_cast<int32_t>(integer);
    }
  }
  sampling.logprobs = request.top_logprobs;
  if (Status valid = sampling.Validate(); !valid.ok()) return valid;
  return request;
}

}  // namespace sinew::model
