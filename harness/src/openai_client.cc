// OpenAI-compatible Chat Completions (POST {base_url}/chat/completions), streamed
// (server-sent events) or whole, per ModelEndpointConfig::stream.
#include <boost/json.hpp>
#include <chrono>
#include <map>

#include "model_clients.h"
#include "sinew/json_fields.h"
#include "sinew/reasoning_splitter.h"
#include "sinew/sse_parser.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ArrayField;
using json_fields::ObjectField;
using json_fields::StringField;
using json_fields::UintField;

json::value ParsedOrObject(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return json::object();
  return v;
}

std::string StopReason(std::string_view finish) {
  if (finish == "stop") return "end_turn";
  if (finish == "tool_calls" || finish == "function_call") return "tool_use";
  if (finish == "length") return "max_tokens";
  return std::string(finish);
}

void ReadUsage(const json::object& o, ModelReply* reply) {
  const json::object* usage = ObjectField(o, "usage");
  if (usage == nullptr) return;
  reply->prompt_tokens = UintField(*usage, "prompt_tokens");
  reply->completion_tokens = UintField(*usage, "completion_tokens");
  if (const json::object* details = ObjectField(*usage, "prompt_tokens_details")) {
    reply->cached_prompt_tokens = UintField(*details, "cached_tokens");
  }
}

// Reasoning apart from the content: "reasoning_content" (vLLM, llama.cpp, DeepSeek) or
// "reasoning" (some other servers).
std::string ReasoningField(const json::object& o) {
  std::string r = StringField(o, "reasoning_content");
  return r.empty() ? StringField(o, "reasoning") : r;
}

// Message content: a string, or an array of {"type":"text","text":...} parts.
std::string ContentText(const json::object& o) {
  if (const json::array* parts = ArrayField(o, "content")) {
    std::string text;
    for (const auto& part : *parts) {
      if (part.is_object()) text += StringField(part.as_object(), "text");
    }
    return text;
  }
  return StringField(o, "content");
}

// Function arguments: a JSON string (the standard) or an object (some servers).
std::string Arguments(const json::object& f) {
  const auto* a = f.if_contains("arguments");
  if (a == nullptr) return "";
  if (a->is_string()) return std::string(a->as_string());
  if (a->is_object()) return json::serialize(*a);
  return "";
}

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
      .count();
}

class OpenAiClient final : public HttpModelClient {
 public:
  using HttpModelClient::HttpModelClient;

 protected:
  void SetStream(json::object* body, bool stream) const override {
    (*body)["stream"] = stream;
    if (stream) (*body)["stream_options"] = json::object{{"include_usage", true}};
  }

  std::string Path() const override { return "/chat/completions"; }

  std::vector<std::string> ProtocolHeaders(const std::string& api_key) const override {
    if (api_key.empty()) return {};
    return {"Authorization: Bearer " + api_key};
  }

  std::string_view ToolCallIdPrefix() const override { return "call"; }

  json::object RequestBody(const ModelCall& call) const override {
    json::array messages;
    if (!call.system.empty()) messages.push_back(json::object{{"role", "system"}, {"content", call.system}});
    for (const auto& m : call.messages) {
      json::object o;
      switch (m.role) {
        case ChatMessage::Role::kUser:
          o["role"] = "user";
          o["content"] = m.text;
          break;
        case ChatMessage::Role::kAssistant: {
          o["role"] = "assistant";
          if (m.text.empty() && !m.tool_calls.empty()) {
            o["content"] = nullptr;
          } else {
            o["content"] = m.text;
          }
          if (config().reasoning_in_history && !m.reasoning.empty()) o["reasoning_content"] = m.reasoning;
          if (!m.tool_calls.empty()) {
            json::array calls;
            for (const auto& tc : m.tool_calls) {
              calls.push_back(json::object{
                  {"id", tc.id},
                  {"type", "function"},
                  {"function", json::object{{"name", tc.name}, {"arguments", tc.input_json}}}});
            }
            o["tool_calls"] = std::move(calls);
          }
          break;
        }
        case ChatMessage::Role::kTool:
          o["role"] = "tool";
          o["tool_call_id"] = m.tool_call_id;
          o["content"] = m.text;
          break;
      }
      messages.push_back(std::move(o));
    }
    json::object body{{"model", call.model}, {"messages", std::move(messages)}, {"max_tokens", call.max_output_tokens}};
    if (!call.tools.empty()) {
      json::array tools;
      for (const auto& t : call.tools) {
        tools.push_back(json::object{
            {"type", "function"},
            {"function", json::object{{"name", t.name},
                                      {"description", t.description},
                                      {"parameters", ParsedOrObject(t.input_schema_json)}}}});
      }
      body["tools"] = std::move(tools);
    }
    return body;
  }

  // One whole (non-streamed) answer: {"choices":[{"message":{...},"finish_reason"}],"usage"}.
  bool ReadWholeReply(const json::object& o, ModelReply* reply,
                      std::map<uint64_t, ModelToolCall>* calls) const override {
    const json::array* choices = ArrayField(o, "choices");
    if (o.contains("error") && choices == nullptr) return false;
    ReadUsage(o, reply);
    if (choices == nullptr || choices->empty() || !(*choices)[0].is_object()) return true;
    const auto& c = (*choices)[0].as_object();
    if (const json::value* fr = c.if_contains("finish_reason"); fr != nullptr && fr->is_string()) {
      reply->stop_reason = StopReason(fr->as_string());
    }
    const json::object* message = ObjectField(c, "message");
    if (message == nullptr) return true;
    const auto& m = *message;
    reply->reasoning = ReasoningField(m);
    ReasoningSplitter splitter;
    ReasoningSplitter::Parts parts = splitter.Push(ContentText(m));
    ReasoningSplitter::Parts tail = splitter.Finish();
    reply->reasoning += parts.reasoning + tail.reasoning;
    reply->text = parts.content + tail.content;
    if (const json::array* tcs = ArrayField(m, "tool_calls")) {
      uint64_t index = 0;
      for (const auto& tcv : *tcs) {
        if (!tcv.is_object()) continue;
        const auto& tc = tcv.as_object();
        ModelToolCall& mc = (*calls)[index++];
        mc.id = StringField(tc, "id");
        if (const json::object* fn = ObjectField(tc, "function")) {
          mc.name = StringField(*fn, "name");
          mc.input_json = Arguments(*fn);
        }
      }
    }
    return true;
  }

  // The SSE parser and what it fills live in this frame; they run on the HTTP client's
  // thread while the coroutine waits.
  Task<Result<HttpResponse>> StreamedAttempt(const ModelCall& call, HttpRequest req, const TokenCallback& on_token,
                                             ModelReply* reply) override {
    const auto start = std::chrono::steady_clock::now();
    std::map<uint64_t, ModelToolCall> calls;
    std::string error_body;
    std::string stream_error_body;  // an {"error":...} chunk inside a 200 stream
    Status parse_error;
    ReasoningSplitter splitter;
    auto mark_first = [&] {
      if (reply->time_to_first_token_ms < 0) reply->time_to_first_token_ms = MsSince(start);
    };
    auto answer = [&](std::string_view text) {
      if (text.empty()) return;
      reply->text.append(text);
      if (on_token) on_token(text);
    };
    SseParser parser([&](const SseEvent& sse) {
      const std::string& data = sse.data;
      if (data == "[DONE]") return true;
      boost::system::error_code ec;
      json::value v = json::parse(data, ec);
      if (ec || !v.is_object()) {
        parse_error = Status::Corruption("model stream sent a chunk that is not JSON: " + data.substr(0, 200));
        return false;
      }
      const auto& o = v.as_object();
      if (o.contains("error") && !o.contains("choices")) {
        stream_error_body = data.substr(0, kMaxErrorBody);
        return false;
      }
      ReadUsage(o, reply);
      const json::array* choices = ArrayField(o, "choices");
      if (choices == nullptr) return true;
      for (const auto& choice : *choices) {
        if (!choice.is_object()) continue;
        const auto& c = choice.as_object();
        if (const json::value* fr = c.if_contains("finish_reason"); fr != nullptr && fr->is_string()) {
          reply->stop_reason = StopReason(fr->as_string());
        }
        const json::object* delta = ObjectField(c, "delta");
        if (delta == nullptr) continue;
        const auto& d = *delta;
        if (const std::string reasoning = ReasoningField(d); !reasoning.empty()) {
          mark_first();
          reply->reasoning += reasoning;
        }
        if (const std::string text = StringField(d, "content"); !text.empty()) {
          mark_first();
          ReasoningSplitter::Parts parts = splitter.Push(text);
          reply->reasoning += parts.reasoning;
          answer(parts.content);
        }
        if (const json::array* tcs = ArrayField(d, "tool_calls")) {
          mark_first();
          for (const auto& tcv : *tcs) {
            if (!tcv.is_object()) continue;
            const auto& tc = tcv.as_object();
            ModelToolCall& mc = calls[UintField(tc, "index")];
            if (const std::string id = StringField(tc, "id"); !id.empty()) mc.id = id;
            if (const json::object* fn = ObjectField(tc, "function")) {
              mc.name += StringField(*fn, "name");
              mc.input_json += Arguments(*fn);
            }
          }
        }
      }
      return true;
    });
    auto response = co_await Perform(std::move(req), [&](std::string_view chunk) {
      // Error bodies (non-2xx) are plain JSON, not a stream: keep them for the message.
      if (error_body.size() < kMaxErrorBody) error_body.append(chunk.substr(0, kMaxErrorBody - error_body.size()));
      return parser.Feed(chunk);
    });
    if (!parse_error.ok()) co_return parse_error;
    if (!stream_error_body.empty()) {
      HttpResponse failed;  // the server failed mid-stream: its failure, with its message
      failed.status = 500;
      failed.body = stream_error_body;
      co_return failed;
    }
    if (!response.ok()) co_return response;
    if (response->status < 200 || response->status >= 300) {
      response->body = error_body;
      co_return response;
    }
    parser.Feed("\n\n");
    if (!parse_error.ok()) co_return parse_error;
    ReasoningSplitter::Parts tail = splitter.Finish();
    reply->reasoning += tail.reasoning;
    answer(tail.content);
    FinishReply(call, std::move(calls), reply);
    co_return response;
  }
};

}  // namespace

std::unique_ptr<ModelClient> NewOpenAiClient(const ModelEndpointConfig& config, std::string api_key) {
  return std::make_unique<OpenAiClient>(config, std::move(api_key));
}

}  // namespace sinew::harness
