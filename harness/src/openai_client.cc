// OpenAI-compatible Chat Completions (POST {base_url}/chat/completions), streamed
// (server-sent events) or whole, per ModelEndpointConfig::stream.
#include <boost/json.hpp>
#include <spdlog/spdlog.h>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "model_clients.h"
#include "replica_router.h"
#include "sinew/json_fields.h"
#include "sinew/reasoning_splitter.h"
#include "sinew/sse_parser.h"
#include "sinew/trace.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using json_fields::ArrayField;
using json_fields::ObjectField;
using json_fields::StringField;
using json_fields::UintField;

// Error bodies are kept up to this size (the message in them is bounded further).
constexpr size_t kMaxErrorBody = 16384;

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

// Gives every call an id and an input, and the reply a stop reason.
void FinishReply(const ModelCall& call, std::map<uint64_t, ModelToolCall> calls, ModelReply* reply) {
  for (auto& [index, mc] : calls) {
    if (mc.id.empty()) mc.id = "call_" + std::to_string(call.turn) + "_" + std::to_string(index);
    if (mc.input_json.empty()) mc.input_json = "{}";
    reply->tool_calls.push_back(std::move(mc));
  }
  if (reply->stop_reason.empty()) reply->stop_reason = reply->tool_calls.empty() ? "end_turn" : "tool_use";
}

class OpenAiClient final : public HttpModelClient {
 public:
  OpenAiClient(ModelEndpointConfig config, std::string api_key)
      : config_(std::move(config)), api_key_(std::move(api_key)) {
    if (!config_.replicas.empty()) {
      ReplicaRouter::Options options;
      options.load_factor = config_.replica_load_factor;
      options.min_in_flight = config_.replica_min_in_flight;
      options.round_robin = config_.replica_policy == "round_robin";
      router_ = std::make_unique<ReplicaRouter>(config_.replicas, options);
      if (config_.replica_health_check_ms > 0) prober_ = std::thread([this] { HealthCheckLoop(); });
    }
  }

  ~OpenAiClient() override {
    stop_probing_ = true;
    probe_cv_.notify_all();
    if (prober_.joinable()) prober_.join();
  }

  std::string MetricsText(std::string_view model) const override {
    return router_ ? router_->MetricsText(model) : std::string();
  }

 protected:
  Task<Result<ModelReply>> Call(const ModelCall& call, const TokenCallback& on_token) override {
    const json::object base = RequestBody(call);
    co_return co_await RunWithRetries(
        config_, call, &memory_, [&](bool stream, ModelReply* reply) -> Task<Result<HttpResponse>> {
          json::object body = base;
          body["stream"] = stream;
          if (stream) body["stream_options"] = json::object{{"include_usage", true}};
          if (!router_) co_return co_await Attempt(call, json::serialize(body), stream, config_.base_url, on_token, reply);
          co_return co_await RoutedAttempt(call, json::serialize(body), stream, on_token, reply);
        });
  }

 private:
  // Checks every replica's health each replica_health_check_ms until the client goes, and
  // tells the router (src/replica_router.h). Logs when a replica starts failing its
  // check and when it passes again.
  void HealthCheckLoop() {
    const auto every = std::chrono::milliseconds(config_.replica_health_check_ms);
    std::vector<bool> passing(config_.replicas.size(), true);
    while (!stop_probing_) {
      for (size_t i = 0; i < config_.replicas.size() && !stop_probing_; ++i) {
        HttpRequest req;
        req.url = OriginOf(config_.replicas[i]) + config_.replica_health_path;
        req.timeout_ms = static_cast<uint32_t>(std::min<int64_t>(2000, every.count()));
        req.connect_timeout_ms = req.timeout_ms;
        req.max_response_bytes = 4096;
        req.stop = &stop_probing_;
        req.tls.ca_file = config_.ca_file;
        auto r = http::Fetch(req);
        if (stop_probing_) break;
        const bool ok = r.ok() && r->status >= 200 && r->status < 500 && r->status != 429;
        router_->HealthChecked(i, ok);
        if (ok != passing[i]) {
          passing[i] = ok;
          if (ok) {
            spdlog::info("model replica {} passes its health check again", config_.replicas[i]);
          } else {
            spdlog::warn("model replica {} fails its health check ({}): calls skip it", config_.replicas[i],
                         r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message());
          }
        }
      }
      std::unique_lock<std::mutex> lock(probe_mu_);
      probe_cv_.wait_for(lock, every, [&] { return stop_probing_.load(); });
    }
  }

  // "scheme://host:port" of a URL.
  static std::string OriginOf(const std::string& url) {
    const size_t scheme = url.find("://");
    const size_t path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
    return path == std::string::npos ? url : url.substr(0, path);
  }

  Task<Result<HttpResponse>> Attempt(const ModelCall& call, std::string body, bool stream,
                                     const std::string& base_url, const TokenCallback& on_token, ModelReply* reply) {
    HttpRequest req = Request(call, std::move(body), stream, base_url);
    if (stream) co_return co_await StreamedAttempt(call, std::move(req), on_token, reply);
    co_return co_await WholeAttempt(call, std::move(req), on_token, reply);
  }

  // One attempt on the replica the router picks; each attempt picks again, so a retry
  // after a failure goes to the next replica. The answer tells the router how it went.
  Task<Result<HttpResponse>> RoutedAttempt(const ModelCall& call, std::string body, bool stream,
                                           const TokenCallback& on_token, ModelReply* reply) {
    ReplicaRouter::Call routed = router_->Pick(call.session_id);
    if (routed.choice() != ReplicaRouter::Choice::kHome) {
      spdlog::debug("session {}: model call to {} ({})", call.session_id, routed.url(),
                    routed.choice() == ReplicaRouter::Choice::kOverloaded ? "its home replica is at the load bound"
                    : routed.choice() == ReplicaRouter::Choice::kDown     ? "its home replica is down"
                                                                          : "every replica is down; probing");
    }
    auto response = co_await Attempt(call, std::move(body), stream, routed.url(), on_token, reply);
    if (response.ok() ? (response->status >= 500 || response->status == 429)
                      : response.status().code() != StatusCode::kCancelled) {
      routed.Failed();
    } else if (response.ok()) {
      routed.Succeeded();
    }
    co_return response;
  }

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
          if (config_.reasoning_in_history && !m.reasoning.empty()) o["reasoning_content"] = m.reasoning;
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

  HttpRequest Request(const ModelCall& call, std::string body, bool stream,
                      const std::string& base_url) const {
    HttpRequest req;
    req.method = "POST";
    req.url = base_url + "/chat/completions";
    req.headers = {"Content-Type: application/json",
                   stream ? "Accept: text/event-stream" : "Accept: application/json"};
    if (!api_key_.empty()) req.headers.push_back("Authorization: Bearer " + api_key_);
    // The session's trace, a fresh span per attempt (docs/logging.md).
    if (std::string tp = OutgoingTraceparent(); !tp.empty()) req.headers.push_back("traceparent: " + tp);
    req.body = std::move(body);
    req.timeout_ms = config_.timeout_seconds * 1000;
    req.stop = call.cancelled;
    req.tls.ca_file = config_.ca_file;
    return req;
  }

  // One whole (non-streamed) answer: {"choices":[{"message":{...},"finish_reason"}],"usage"}.
  Task<Result<HttpResponse>> WholeAttempt(const ModelCall& call, HttpRequest req, const TokenCallback& on_token,
                                          ModelReply* reply) {
    auto response = co_await Perform(std::move(req));
    if (!response.ok()) co_return response;
    if (response->status < 200 || response->status >= 300) {
      if (response->body.size() > kMaxErrorBody) response->body.resize(kMaxErrorBody);
      co_return response;
    }
    boost::system::error_code ec;
    json::value v = json::parse(response->body, ec);
    if (ec || !v.is_object()) {
      co_return Status::Corruption("model server sent a reply that is not a JSON object: " +
                                response->body.substr(0, 200));
    }
    const auto& o = v.as_object();
    const json::array* choices = ArrayField(o, "choices");
    if (o.contains("error") && choices == nullptr) {
      response->status = 500;  // an error inside a 200: treated as the server's failure
      response->body.resize(std::min(response->body.size(), kMaxErrorBody));
      co_return response;
    }
    ReadUsage(o, reply);
    std::map<uint64_t, ModelToolCall> calls;
    if (choices != nullptr && !choices->empty() && (*choices)[0].is_object()) {
      const auto& c = (*choices)[0].as_object();
      if (const json::value* fr = c.if_contains("finish_reason"); fr != nullptr && fr->is_string()) {
        reply->stop_reason = StopReason(fr->as_string());
      }
      if (const json::object* message = ObjectField(c, "message")) {
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
            ModelToolCall& mc = calls[index++];
            mc.id = StringField(tc, "id");
            if (const json::object* fn = ObjectField(tc, "function")) {
              mc.name = StringField(*fn, "name");
              mc.input_json = Arguments(*fn);
            }
          }
        }
      }
    }
    if (!reply->text.empty() && on_token) on_token(reply->text);
    FinishReply(call, std::move(calls), reply);
    response->body.clear();
    co_return response;
  }

  // The SSE parser and what it fills live in this frame; they run on the HTTP client's
  // thread while the coroutine waits.
  Task<Result<HttpResponse>> StreamedAttempt(const ModelCall& call, HttpRequest req, const TokenCallback& on_token,
                                             ModelReply* reply) {
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

  const ModelEndpointConfig config_;
  const std::string api_key_;
  StreamMemory memory_;
  std::unique_ptr<ReplicaRouter> router_;  // set when config_.replicas is
  std::atomic<bool> stop_probing_{false};
  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::thread prober_;  // the health checks, with replicas and replica_health_check_ms
};

}  // namespace

std::unique_ptr<ModelClient> NewOpenAiClient(const ModelEndpointConfig& config, std::string api_key) {
  return std::make_unique<OpenAiClient>(config, std::move(api_key));
}

}  // namespace sinew::harness
