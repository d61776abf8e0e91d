#include "tool_calls.h"

#include <boost/json.hpp>

namespace sinew::model {
namespace {

namespace json = boost::json;

std::string_view Trim(std::string_view s) {
  const std::string_view kSpace = " \t\n\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

json::object OneCall(const ToolSpec& tool, std::string_view key) {
  json::object props;
  props["name"] = json::object{{"const", tool.name}};
  props[key] = tool.parameters;
  json::object schema;
  schema["type"] = "object";
  schema["properties"] = std::move(props);
  schema["required"] = json::array{"name", json::string(key)};
  return schema;
}

// Arguments given as an object or as JSON text of an object -> compact JSON text.
bool ArgumentsText(const json::value* args, std::string& out) {
  if (args == nullptr) return false;
  json::value parsed = *args;
  if (args->is_string()) {
    boost::system::error_code ec;
    parsed = json::parse(args->as_string(), ec);
    if (ec) return false;
  }
  if (!parsed.is_object()) return false;
  out = json::serialize(parsed);
  return true;
}

// {"name"|"tool_name": ..., "arguments"|"parameters": ...} -> a call.
bool CallFromObject(const json::value& v, ToolCallOut& out) {
  if (!v.is_object()) return false;
  const json::object& o = v.as_object();
  const json::value* name = o.if_contains("name");
  if (name == nullptr) name = o.if_contains("tool_name");
  const json::value* args = o.if_contains("arguments");
  if (args == nullptr) args = o.if_contains("parameters");
  if (name == nullptr || !name->is_string() || !ArgumentsText(args, out.arguments)) return false;
  out.name = std::string(name->as_string());
  return true;
}

bool ParseCall(std::string_view text, ToolCallOut& out) {
  boost::system::error_code ec;
  json::value v = json::parse(Trim(text), ec);
  return !ec && CallFromObject(v, out);
}

// A JSON array of call objects (Mistral, Firefunction, Command R7B); false if any fails.
bool ParseCallArray(std::string_view text, std::vector<ToolCallOut>& calls) {
  boost::system::error_code ec;
  json::value v = json::parse(Trim(text), ec);
  if (ec || !v.is_array() || v.as_array().empty()) return false;
  std::vector<ToolCallOut> out;
  for (const json::value& item : v.as_array()) {
    ToolCallOut call;
    if (!CallFromObject(item, call)) return false;
    out.push_back(std::move(call));
  }
  calls = std::move(out);
  return true;
}

// Llama 3.1 built-in tools: name.call(key="value", n=1) -> {"key": "value", "n": 1}.
bool ParsePythonCall(std::string_view text, ToolCallOut& out) {
  text = Trim(text);
  const size_t dot = text.find(".call(");
  if (dot == std::string_view::npos || text.back() != ')') return false;
  out.name = std::string(text.substr(0, dot));
  std::string_view rest = text.substr(dot + 6, text.size() - dot - 7);
  json::object args;
  while (!Trim(rest).empty()) {
    rest = Trim(rest);
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string key(Trim(rest.substr(0, eq)));
    rest = Trim(rest.substr(eq + 1));
    size_t end = 0;
    if (!rest.empty() && (rest[0] == '"' || rest[0] == '\'')) {
      end = rest.find(rest[0], 1);
      if (end == std::string_view::npos) return false;
      args[key] = std::string(rest.substr(1, end - 1));
      ++end;
    } else {
      end = std::min(rest.find(','), rest.size());
      boost::system::error_code ec;
      json::value v = json::parse(Trim(rest.substr(0, end)), ec);
      if (ec) return false;
      args[key] = v;
    }
    rest = rest.substr(end);
    rest = Trim(rest);
    if (!rest.empty() && rest[0] == ',') rest.remove_prefix(1);
  }
  out.arguments = json::serialize(args);
  return true;
}

// Finds open ... close pairs; each body goes to `parse`; the rest is content.
template <typename Parse>
ParsedToolOutput ParseDelimited(std::string_view text, std::string_view open, std::string_view close,
                                Parse parse) {
  ParsedToolOutput out;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find(open, pos);
    if (start == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, start - pos);
    const size_t body = start + open.size();
    const size_t end = close.empty() ? std::string_view::npos : text.find(close, body);
    const size_t body_end = end == std::string_view::npos ? text.size() : end;
    if (!parse(text.substr(body, body_end - body), out.calls)) {
      content += text.substr(start, body_end - start);
      if (end != std::string_view::npos) content += close;
    }
    pos = end == std::string_view::npos ? text.size() : end + close.size();
  }
  out.content = std::string(Trim(content));
  return out;
}

bool OneJsonCall(std::string_view body, std::vector<ToolCallOut>& calls) {
  ToolCallOut call;
  if (!ParseCall(body, call)) return false;
  calls.push_back(std::move(call));
  return true;
}

ParsedToolOutput ParseLlama3(std::string_view text) {
  ParsedToolOutput out;
  std::string_view body = Trim(text);
  const size_t tag = body.find("<|python_tag|>");
  std::string content;
  if (tag != std::string_view::npos) {
    content = std::string(Trim(body.substr(0, tag)));
    body = Trim(body.substr(tag + 14));
  }
  ToolCallOut call;
  if (ParseCall(body, call) || (tag != std::string_view::npos && ParsePythonCall(body, call))) {
    out.calls.push_back(std::move(call));
    out.content = content;
  } else {
    out.content = std::string(Trim(text));
  }
  return out;
}

// Functionary v3.2: the prompt ends with ">>>", so the output is "name\n{...}" segments
// joined by ">>>"; the segment "all" is content.
ParsedToolOutput ParseFunctionaryV32(std::string_view text) {
  ParsedToolOutput out;
  std::string all(text);
  if (!all.starts_with(">>>")) all = ">>>" + all;
  std::string content;
  size_t pos = 0;
  while (pos < all.size()) {
    const size_t start = pos + 3;
    size_t next = all.find(">>>", start);
    if (next == std::string::npos) next = all.size();
    const std::string_view segment = std::string_view(all).substr(start, next - start);
    const size_t newline = segment.find('\n');
    const std::string_view name = Trim(segment.substr(0, newline));
    const std::string_view body = newline == std::string_view::npos ? "" : segment.substr(newline + 1);
    if (name == "all") {
      content += body;
    } else if (!name.empty()) {
      boost::system::error_code ec;
      json::value args = json::parse(Trim(body), ec);
      if (!ec && args.is_object()) {
        out.calls.push_back({std::string(name), json::serialize(args)});
      } else {
        content += segment;
      }
    }
    pos = next;
  }
  out.content = std::string(Trim(content));
  return out;
}

ParsedToolOutput ParseCommandR(std::string_view text) {
  std::string rest(text);
  std::string reasoning;
  auto cut = [&](std::string_view open, std::string_view close, std::string* into) {
    const size_t a = rest.find(open);
    if (a == std::string::npos) return;
    const size_t b = rest.find(close, a + open.size());
    const size_t end = b == std::string::npos ? rest.size() : b;
    if (into) *into = std::string(Trim(std::string_view(rest).substr(a + open.size(), end - a - open.size())));
    rest.erase(a, (b == std::string::npos ? rest.size() : b + close.size()) - a);
  };
  cut("<|START_THINKING|>", "<|END_THINKING|>", &reasoning);
  std::string response;
  const bool has_response = rest.find("<|START_RESPONSE|>") != std::string::npos;
  cut("<|START_RESPONSE|>", "<|END_RESPONSE|>", &response);
  ParsedToolOutput out = ParseDelimited(rest, "<|START_ACTION|>", "<|END_ACTION|>", ParseCallArray);
  if (has_response) out.content = std::string(Trim(response + "\n" + out.content));
  out.reasoning = reasoning;
  return out;
}

ParsedToolOutput ParseDeepSeekR1(std::string_view text) {
  const std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
  const size_t begin = text.find(kCallsBegin);
  if (begin == std::string_view::npos) return {std::string(Trim(text)), {}, {}};
  ParsedToolOutput calls = ParseDelimited(
      text.substr(begin + kCallsBegin.size()), "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
      [](std::string_view body, std::vector<ToolCallOut>& out) {
        const std::string_view kSep = "<｜tool▁sep｜>";
        const size_t sep = body.find(kSep);
        if (sep == std::string_view::npos) return false;
        body = body.substr(sep + kSep.size());
        const size_t newline = body.find('\n');
        if (newline == std::string_view::npos) return false;
        ToolCallOut call;
        call.name = std::string(Trim(body.substr(0, newline)));
        std::string_view args = Trim(body.substr(newline + 1));
        if (args.starts_with("```json")) args.remove_prefix(7);
        if (args.starts_with("```")) args.remove_prefix(3);
        if (args.ends_with("```")) args.remove_suffix(3);
        boost::system::error_code ec;
        json::value v = json::parse(Trim(args), ec);
        if (ec || !v.is_object() || call.name.empty()) return false;
        call.arguments = json::serialize(v);
        out.push_back(std::move(call));
        return true;
      });
  ParsedToolOutput out;
  out.calls = std::move(calls.calls);
  out.content = std::string(Trim(text.substr(0, begin)));
  return out;
}

// Text at which a call of `format` starts (streaming holds from there on).
std::vector<std::string_view> StartMarkers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return {"<tool_call>"};
    case ToolCallFormat::kLlama3Json: return {"<|python_tag|>"};
    case ToolCallFormat::kMistral: return {"[TOOL_CALLS]"};
    case ToolCallFormat::kFunctionaryV31: return {"<function="};
    case ToolCallFormat::kFirefunction: return {"functools["};
    case ToolCallFormat::kDeepSeekR1: return {"<｜tool▁calls▁begin｜>"};
    case ToolCallFormat::kFunctionaryV32:
    case ToolCallFormat::kCommandR7B:
      break;
  }
  return {};
}

}  // namespace

json::value ToolCallSchema(const GenerationRequest& request, std::string_view arguments_key) {
  json::array options;
  for (const ToolSpec& tool : request.tools) {
    if (request.tool_choice == ToolChoice::kNamed && tool.name != request.tool_choice_name) {
      continue;
    }
    options.push_back(OneCall(tool, arguments_key));
  }
  if (options.size() == 1) return options[0];
  return json::object{{"anyOf", std::move(options)}};
}

ParsedToolOutput ParseToolCallsOf(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ParseDelimited(text, "<tool_call>", "</tool_call>", OneJsonCall);
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3(text);
    case ToolCallFormat::kMistral:
      return ParseDelimited(text, "[TOOL_CALLS]", "", ParseCallArray);
    case ToolCallFormat::kFirefunction:
      return ParseDelimited(text, "functools", "", ParseCallArray);
    case ToolCallFormat::kFunctionaryV31: {
      ParsedToolOutput out;
      std::string content;
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t start = text.find("<function=", pos);
        const size_t name_end = start == std::string_view::npos ? start : text.find('>', start);
        const size_t end = name_end == std::string_view::npos ? name_end : text.find("</function>", name_end);
        if (end == std::string_view::npos) {
          content += text.substr(pos);
          break;
        }
        content += text.substr(pos, start - pos);
        boost::system::error_code ec;
        json::value args = json::parse(Trim(text.substr(name_end + 1, end - name_end - 1)), ec);
        if (!ec && args.is_object()) {
          out.calls.push_back({std::string(text.substr(start + 10, name_end - start - 10)), json::serialize(args)});
        } else {
          content += text.substr(start, end + 11 - start);
        }
        pos = end + 11;
      }
      out.content = std::string(Trim(content));
      return out;
    }
    case ToolCallFormat::kFunctionaryV32:
      return ParseFunctionaryV32(text);
    case ToolCallFormat::kCommandR7B:
      return ParseCommandR(text);
    case ToolCallFormat::kDeepSeekR1:
      return ParseDeepSeekR1(text);
  }
  return {std::string(Trim(text)), {}, {}};
}

ParsedToolOutput ParseToolCalls(std::string_view text, const ChatTemplate& chat_template,
                                bool forced) {
  if (!forced) return ParseToolCallsOf(text, chat_template.tool_format());
  ParsedToolOutput out;
  ToolCallOut call;
  if (ParseCall(text, call)) {
    out.calls.push_back(std::move(call));
  } else {
    out.content = std::string(Trim(text));
  }
  return out;
}

std::string ToolCallStreamFilter::Push(std::string_view text) {
  all_ += text;
  if (forced_ || in_call_) return {};
  const std::vector<std::string_view> markers = StartMarkers(format_);
  if (markers.empty()) {  // formats whose content is only known at the end
    in_call_ = true;
    return {};
  }
  if (format_ == ToolCallFormat::kLlama3Json) {  // a bare JSON call starts the output
    const std::string_view t = Trim(all_);
    if (t.empty()) return {};
    if (t.front() == '{') {
      in_call_ = true;
      return {};
    }
  }
  size_t safe = all_.size();
  for (std::string_view open : markers) {
    const size_t found = all_.find(open, emitted_);
    if (found != std::string::npos) {
      in_call_ = true;
      safe = std::min(safe, found);
      continue;
    }
    // Hold a tail that could be the start of the marker.
    for (size_t keep = std::min(open.size() - 1, all_.size() - emitted_); keep > 0; --keep) {
      if (open.starts_with(std::string_view(all_).substr(all_.size() - keep))) {
        safe = std::min(safe, all_.size() - keep);
        break;
      }
    }
  }
  std::string out = all_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

ParsedToolOutput ToolCallStreamFilter::Finish(std::string* held_content) {
  ParsedToolOutput parsed = ParseToolCalls(all_, template_, forced_);
  held_content->clear();
  if (parsed.calls.empty()) {
    *held_content = all_.substr(emitted_);
  } else if (emitted_ == 0 && !parsed.content.empty()) {
    *held_content = parsed.content;  // content that was held with the calls
  }
  return parsed;
}

namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t PartialTag(std::string_view text, std::string_view tag) {
  for (size_t keep = std::min(tag.size() - 1, text.size()); keep > 0; --keep) {
    if (tag.starts_with(text.substr(text.size() - keep))) return keep;
  }
  return 0;
}
}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::Push(std::string_view text) {
  Parts parts;
  held_ += text;
  while (!held_.empty()) {
    if (state_ == State::kContent) {
      if (skip_space_) {  // "</think>\n\n" then the answer
        const size_t first = held_.find_first_not_of(" \t\r\n");
        held_.erase(0, first == std::string::npos ? held_.size() : first);
        if (held_.empty()) return parts;
        skip_space_ = false;
      }
      parts.content += held_;
      held_.clear();
    } else if (state_ == State::kStart) {
      const size_t first = held_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return parts;
      const std::string_view rest = std::string_view(held_).substr(first);
      if (rest.starts_with(kThinkOpen)) {
        held_.erase(0, first + kThinkOpen.size());
        state_ = State::kThinking;
      } else if (kThinkOpen.starts_with(rest)) {
        return parts;  // could still become <think>
      } else {
        state_ = State::kContent;
      }
    } else {
      const size_t close = held_.find(kThinkClose);
      if (close != std::string::npos) {
        parts.reasoning += held_.substr(0, close);
        held_.erase(0, close + kThinkClose.size());
        state_ = State::kContent;
        skip_space_ = true;
        continue;
      }
      const size_t keep = PartialTag(held_, kThinkClose);
      parts.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return parts;
    }
  }
  return parts;
}

ReasoningSplitter::Parts ReasoningSplitter::Finish() {
  Parts parts;
  (state_ == State::kThinking ? parts.reasoning : parts.content) = std::move(held_);
  held_.clear();
  return parts;
}

ReasoningSplitter::Parts SplitReasoning(std::string_view text, bool opened_by_prompt) {
  ReasoningSplitter splitter(opened_by_prompt);
  ReasoningSplitter::Parts all = splitter.Push(text);
  ReasoningSplitter::Parts tail = splitter.Finish();
  all.reasoning = std::string(Trim(all.reasoning + tail.reasoning));
  all.content += tail.content;
  return all;
}

}  // namespace sinew::model
