// OpenAI-compatible Chat Completions (POST {base_url}/chat/completions, stream: true).
#include <boost/json.hpp>
#include <chrono>
#include <map>

#include "json_util.h"
#include "model_clients.h"
#include "sinew/sse_parser.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

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


class OpenAiClient final : public ModelClient {
 public:
  OpenAiClient(ModelEndpointConfig config, std::string api_key)
      : config_(std::move(config)), api_key_(std::move(api_key)) {}

  Result<ModelReply> Complete(const ModelCall& call, const TokenCallback& on_token) override {
    const std::string body = json::serialize(RequestBody(call));
    return RunWithRetries(config_, call, [&](ModelReply* reply) -> Result<HttpResponse> {
      return Attempt(call, body, on_token, reply);
    });
  }

 private:
  json::object RequestBody(const ModelCall& call) const {
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
    json::object body{{"model", call.model},
                      {"messages", std::move(messages)},
                      {"max_tokens", call.max_output_tokens},
                      {"stream", true},
                      {"stream_options", json::object{{"include_usage", true}}}};
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

  Result<HttpResponse> Attempt(const ModelCall& call, const std::string& body,
                               const TokenCallback& on_token, ModelReply* reply) {
    HttpRequest req;
    req.method = "POST";
    req.url = config_.base_url + "/chat/completions";
    req.headers = {"Content-Type: application/json", "Accept: text/event-stream"};
    if (!api_key_.empty()) req.headers.push_back("Authorization: Bearer " + api_key_);
    req.body = body;
    req.timeout_ms = config_.timeout_seconds * 1000;
    req.cancelled = call.cancelled;
    const auto start = std::chrono::steady_clock::now();
    std::map<uint64_t, ModelToolCall> calls;
    std::string error_body;
    Status parse_error;
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
      if (auto usage = o.find("usage"); usage != o.end() && usage->value().is_object()) {
        const auto& u = usage->value().as_object();
        reply->prompt_tokens = UintField(u, "prompt_tokens");
        reply->completion_tokens = UintField(u, "completion_tokens");
        if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->value().is_object()) {
          reply->cached_prompt_tokens = UintField(d->value().as_object(), "cached_tokens");
        }
      }
      auto choices = o.find("choices");
      if (choices == o.end() || !choices->value().is_array()) return true;
      for (const auto& choice : choices->value().as_array()) {
        if (!choice.is_object()) continue;
        const auto& c = choice.as_object();
        if (auto fr = c.find("finish_reason"); fr != c.end() && fr->value().is_string()) {
          reply->stop_reason = StopReason(fr->value().as_string());
        }
        auto delta = c.find("delta");
        if (delta == c.end() || !delta->value().is_object()) continue;
        const auto& d = delta->value().as_object();
        if (auto content = d.find("content"); content != d.end() && content->value().is_string()) {
          std::string_view text = content->value().as_string();
          if (!text.empty()) {
            if (reply->time_to_first_token_ms < 0) {
              reply->time_to_first_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::steady_clock::now() - start)
                                                  .count();
            }
            reply->text.append(text);
            if (on_token) on_token(text);
          }
        }
        if (auto tcs = d.find("tool_calls"); tcs != d.end() && tcs->value().is_array()) {
          if (reply->time_to_first_token_ms < 0) {
            reply->time_to_first_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::steady_clock::now() - start)
                                                .count();
          }
          for (const auto& tcv : tcs->value().as_array()) {
            if (!tcv.is_object()) continue;
            const auto& tc = tcv.as_object();
            const uint64_t index = UintField(tc, "index");
            ModelToolCall& mc = calls[index];
            if (auto id = tc.find("id"); id != tc.end() && id->value().is_string()) {
              mc.id = std::string(id->value().as_string());
            }
            if (auto fn = tc.find("function"); fn != tc.end() && fn->value().is_object()) {
              const auto& f = fn->value().as_object();
              if (auto n = f.find("name"); n != f.end() && n->value().is_string()) {
                mc.name += std::string(n->value().as_string());
              }
              if (auto a = f.find("arguments"); a != f.end() && a->value().is_string()) {
                mc.input_json += std::string(a->value().as_string());
              }
            }
          }
        }
      }
      return true;
    });
    auto response = PerformHttp(req, [&](std::string_view chunk) {
      // Error bodies (non-2xx) are plain JSON, not a stream: keep them for the message.
      if (error_body.size() < 4096) error_body.append(chunk.substr(0, 4096 - error_body.size()));
      return parser.Feed(chunk);
    });
    if (!parse_error.ok()) return parse_error;
    if (!response.ok()) return response;
    if (response->status < 200 || response->status >= 300) {
      response->body = error_body;
      return response;
    }
    parser.Feed("\n\n");
    if (!parse_error.ok()) return parse_error;
    for (auto& [index, mc] : calls) {
      if (mc.id.empty()) mc.id = "call_" + std::to_string(call.turn) + "_" + std::to_string(index);
      if (mc.input_json.empty()) mc.input_json = "{}";
      reply->tool_calls.push_back(std::move(mc));
    }
    if (reply->stop_reason.empty()) reply->stop_reason = reply->tool_calls.empty() ? "end_turn" : "tool_use";
    return response;
  }

  const ModelEndpointConfig config_;
  const std::string api_key_;
};

}  // namespace

std::unique_ptr<ModelClient> NewOpenAiClient(const ModelEndpointConfig& config, std::string api_key) {
  return std::make_unique<OpenAiClient>(config, std::move(api_key));
}

}  // namespace sinew::harness
