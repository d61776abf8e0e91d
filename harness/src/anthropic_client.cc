// Anthropic Messages API (POST {base_url}/messages, tool_use blocks), streamed
// (server-sent events) or whole, per ModelEndpointConfig::stream.
#include <boost/json.hpp>
#include <chrono>
#include <map>

#include "model_clients.h"
#include "sinew/json_fields.h"
#include "sinew/sse_parser.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ArrayField;
using json_fields::ObjectField;
using json_fields::StringField;
using json_fields::UintField;

json::value ParsedOrEmptyObject(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return json::object();
  return v;
}

class AnthropicClient final : public HttpModelClient {
 public:
  using HttpModelClient::HttpModelClient;

 protected:
  std::string Path() const override { return "/messages"; }

  std::vector<std::string> ProtocolHeaders(const std::string& api_key) const override {
    std::vector<std::string> headers = {"anthropic-version: 2023-06-01"};
    if (!api_key.empty()) headers.push_back("x-api-key: " + api_key);
    return headers;
  }

  std::string_view ToolCallIdPrefix() const override { return "toolu"; }

  // Messages must alternate user/assistant: tool results ride in user messages, and
  // consecutive same-role messages are merged into one with several blocks.
  json::object RequestBody(const ModelCall& call) const override {
    json::array messages;
    std::string last_role;
    for (const auto& m : call.messages) {
      std::string role = m.role == ChatMessage::Role::kAssistant ? "assistant" : "user";
      json::array blocks;
      if (m.role == ChatMessage::Role::kTool) {
        blocks.push_back(json::object{{"type", "tool_result"},
                                      {"tool_use_id", m.tool_call_id},
                                      {"content", m.text},
                                      {"is_error", m.is_error}});
      } else {
        if (!m.text.empty()) blocks.push_back(json::object{{"type", "text"}, {"text", m.text}});
        for (const auto& tc : m.tool_calls) {
          blocks.push_back(json::object{{"type", "tool_use"},
                                        {"id", tc.id},
                                        {"name", tc.name},
                                        {"input", ParsedOrEmptyObject(tc.input_json)}});
        }
        if (blocks.empty()) blocks.push_back(json::object{{"type", "text"}, {"text", "(empty)"}});
      }
      if (role == last_role && !messages.empty()) {
        auto& content = messages.back().as_object()["content"].as_array();
        for (auto& b : blocks) content.push_back(std::move(b));
      } else {
        messages.push_back(json::object{{"role", role}, {"content", std::move(blocks)}});
      }
      last_role = role;
    }
    json::object body{{"model", call.model},
                      {"max_tokens", call.max_output_tokens},
                      {"messages", std::move(messages)}};
    if (!call.system.empty()) body["system"] = call.system;
    if (!call.tools.empty()) {
      json::array tools;
      for (const auto& t : call.tools) {
        tools.push_back(json::object{{"name", t.name},
                                     {"description", t.description},
                                     {"input_schema", ParsedOrEmptyObject(t.input_schema_json)}});
      }
      body["tools"] = std::move(tools);
    }
    return body;
  }

  // One whole message: {"content":[{"type":"text"|"thinking"|"tool_use",...}],
  // "stop_reason", "usage"}.
  bool ReadWholeReply(const json::object& o, ModelReply* reply,
                      std::map<uint64_t, ModelToolCall>* blocks) const override {
    if (StringField(o, "type") == "error") return false;
    if (const json::object* usage = ObjectField(o, "usage")) {
      reply->prompt_tokens = UintField(*usage, "input_tokens");
      reply->cached_prompt_tokens = UintField(*usage, "cache_read_input_tokens");
      reply->completion_tokens = UintField(*usage, "output_tokens");
    }
    reply->stop_reason = StringField(o, "stop_reason");
    if (const json::array* content = ArrayField(o, "content")) {
      uint64_t index = 0;
      for (const auto& bv : *content) {
        if (!bv.is_object()) continue;
        const auto& b = bv.as_object();
        const std::string type = StringField(b, "type");
        if (type == "text") reply->text += StringField(b, "text");
        if (type == "thinking") reply->reasoning += StringField(b, "thinking");
        if (type == "tool_use") {
          ModelToolCall& tc = (*blocks)[index];
          tc.id = StringField(b, "id");
          tc.name = StringField(b, "name");
          if (const json::object* input = ObjectField(b, "input")) {
            tc.input_json = json::serialize(*input);
          }
        }
        ++index;
      }
    }
    return true;
  }

  // The SSE parser and what it fills live in this frame; they run on the HTTP client's
  // thread while the coroutine waits.
  Task<Result<HttpResponse>> StreamedAttempt(const ModelCall& call, HttpRequest req, const TokenCallback& on_token,
                                             ModelReply* reply) override {
    const auto start = std::chrono::steady_clock::now();
    std::map<uint64_t, ModelToolCall> tool_blocks;
    std::string error_body;
    Status stream_error;
    auto mark_first = [&] {
      if (reply->time_to_first_token_ms < 0) {
        reply->time_to_first_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - start)
                                            .count();
      }
    };
    SseParser parser([&](const SseEvent& sse) {
      const std::string& event = sse.event;
      const std::string& data = sse.data;
      boost::system::error_code ec;
      json::value v = json::parse(data, ec);
      if (ec || !v.is_object()) {
        stream_error = Status::Corruption("model stream sent data that is not JSON: " + data.substr(0, 200));
        return false;
      }
      const auto& o = v.as_object();
      const std::string type = StringField(o, "type").empty() ? event : StringField(o, "type");
      if (type == "message_start") {
        const json::object* message = ObjectField(o, "message");
        if (const json::object* usage = message ? ObjectField(*message, "usage") : nullptr) {
          reply->prompt_tokens = UintField(*usage, "input_tokens");
          reply->cached_prompt_tokens = UintField(*usage, "cache_read_input_tokens");
        }
      } else if (type == "content_block_start") {
        const json::object* block = ObjectField(o, "content_block");
        if (block != nullptr && StringField(*block, "type") == "tool_use") {
          mark_first();
          ModelToolCall& tc = tool_blocks[UintField(o, "index")];
          tc.id = StringField(*block, "id");
          tc.name = StringField(*block, "name");
        }
      } else if (type == "content_block_delta") {
        const json::object* delta_object = ObjectField(o, "delta");
        if (delta_object == nullptr) return true;
        const auto& delta = *delta_object;
        const std::string dtype = StringField(delta, "type");
        if (dtype == "text_delta") {
          const std::string text = StringField(delta, "text");
          if (!text.empty()) {
            mark_first();
            reply->text += text;
            if (on_token) on_token(text);
          }
        } else if (dtype == "thinking_delta") {
          mark_first();
          reply->reasoning += StringField(delta, "thinking");
        } else if (dtype == "input_json_delta") {
          tool_blocks[UintField(o, "index")].input_json += StringField(delta, "partial_json");
        }
      } else if (type == "message_delta") {
        if (const json::object* delta = ObjectField(o, "delta")) {
          const std::string stop = StringField(*delta, "stop_reason");
          if (!stop.empty()) reply->stop_reason = stop;
        }
        if (const json::object* usage = ObjectField(o, "usage")) {
          reply->completion_tokens = UintField(*usage, "output_tokens");
        }
      } else if (type == "error") {
        std::string message = data;
        if (const json::object* error = ObjectField(o, "error")) {
          message = StringField(*error, "type") + ": " + StringField(*error, "message");
        }
        stream_error = Status::Unavailable("model stream reported an error: " + message);
        return false;
      }
      return true;
    });
    auto response = co_await Perform(std::move(req), [&](std::string_view chunk) {
      if (error_body.size() < kMaxErrorBody) error_body.append(chunk.substr(0, kMaxErrorBody - error_body.size()));
      return parser.Feed(chunk);
    });
    if (!response.ok()) {
      if (!stream_error.ok()) {
        if (stream_error.code() == StatusCode::kUnavailable) {
          HttpResponse overloaded;  // an in-stream error (e.g. overloaded_error) is retried
          overloaded.status = 529;
          overloaded.body = stream_error.message();
          co_return overloaded;
        }
        co_return stream_error;
      }
      co_return response;
    }
    if (response->status < 200 || response->status >= 300) {
      response->body = error_body;
      co_return response;
    }
    parser.Feed("\n\n");
    if (!stream_error.ok()) co_return stream_error;
    FinishReply(call, std::move(tool_blocks), reply);
    co_return response;
  }
};

}  // namespace

std::unique_ptr<ModelClient> NewAnthropicClient(const ModelEndpointConfig& config,
                                                std::string api_key) {
  return std::make_unique<AnthropicClient>(config, std::move(api_key));
}

}  // namespace sinew::harness
