// The scripted model: a test double of a language model that replays a file.
//
// File format (JSON):
//   {"responses": [{"text": "...", "tool_calls": [{"name": "bash", "input": {...}}],
//                   "delay_ms": 0, "wait_for_file": "", "stop_reason": "end_turn",
//                   "streamed_before_delay": ""}, ...],
//    "loop": false}
// "wait_for_file" holds the answer until that path exists (after delay_ms): a test opens
// the gate once every session it needs waits on the model. "streamed_before_delay" is
// streamed before the delay and the wait (a model that stalls mid-answer) and is the
// start of the answer's text.
// Call number `turn` gets responses[turn] (responses[turn % n] with "loop"); past the
// end it answers "(script finished)" with stop_reason end_turn. In tool inputs,
// "{{session_id}}" and "{{call_id}}" are replaced; in text, "{{last_user}}" is the text
// of the prompt's last user message (what the model was told last). Tool call ids are "call_<turn>_<i>".
#include <sys/stat.h>

#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "async.h"
#include "model_clients.h"
#include "sinew/json_fields.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

struct ScriptedCall {
  std::string name;
  std::string input_json;
};

struct ScriptedResponse {
  std::string text;
  std::vector<ScriptedCall> calls;
  uint32_t delay_ms = 0;
  std::string stop_reason;
  std::string wait_for_file;
  std::string streamed_before_delay;
};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = text.find(from, pos)) != std::string::npos) {
    text.replace(pos, from.size(), to);
    pos += to.size();
  }
  return text;
}

class ScriptedModel final : public ModelClient {
 public:
  ScriptedModel(std::vector<ScriptedResponse> responses, bool loop)
      : responses_(std::move(responses)), loop_(loop) {}

  Result<ModelReply> Complete(const ModelCall& call, const TokenCallback& on_token) override {
    const auto start = std::chrono::steady_clock::now();
    const ScriptedResponse& r = ResponseFor(call);
    const auto until = start + std::chrono::milliseconds(r.delay_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (call.cancelled != nullptr && call.cancelled->load()) return Status::Cancelled("model call cancelled");
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint32_t>(r.delay_ms, 10)));
    }
    while (!r.wait_for_file.empty() && !Exists(r.wait_for_file)) {
      if (call.cancelled != nullptr && call.cancelled->load()) return Status::Cancelled("model call cancelled");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Answer(call, r, start, on_token);
  }

  // The same answer, its delay waited on a timer: a session waiting on the scripted model
  // holds no thread (the harness's 10,000-session test relies on it).
  Task<Result<ModelReply>> CompleteAsync(const ModelCall& call, const TokenCallback& on_token,
                                         asio::thread_pool& blocking) override {
    (void)blocking;
    const auto start = std::chrono::steady_clock::now();
    const ScriptedResponse& r = ResponseFor(call);
    if (!r.streamed_before_delay.empty() && on_token) on_token(r.streamed_before_delay);
    const auto until = start + std::chrono::milliseconds(r.delay_ms);
    for (auto now = start; now < until; now = std::chrono::steady_clock::now()) {
      if (call.cancelled != nullptr && call.cancelled->load()) co_return Status::Cancelled("model call cancelled");
      co_await SleepFor(std::min<std::chrono::steady_clock::duration>(until - now, kCheckEvery));
    }
    while (!r.wait_for_file.empty() && !Exists(r.wait_for_file)) {
      if (call.cancelled != nullptr && call.cancelled->load()) co_return Status::Cancelled("model call cancelled");
      co_await SleepFor(kCheckEvery);
    }
    co_return Answer(call, r, start, on_token);
  }

 private:
  // How often a waiting call looks at its cancel flag (and its gate file).
  static constexpr std::chrono::milliseconds kCheckEvery{250};

  const ScriptedResponse& ResponseFor(const ModelCall& call) const {
    static const ScriptedResponse kFinished{"(script finished)", {}, 0, "", "", ""};
    if (!responses_.empty() && (loop_ || call.turn < responses_.size())) return responses_[call.turn % responses_.size()];
    return kFinished;
  }

  Result<ModelReply> Answer(const ModelCall& call, const ScriptedResponse& r,
                            std::chrono::steady_clock::time_point start, const TokenCallback& on_token) const {
    ModelReply reply;
    size_t prompt_chars = call.system.size();
    for (const auto& m : call.messages) prompt_chars += m.text.size() + 16;
    reply.prompt_tokens = prompt_chars / 4 + 1;
    // Stream the text word by word, as a served model would.
    size_t pos = 0;
    while (pos < r.text.size()) {
      size_t next = r.text.find(' ', pos + 1);
      if (next == std::string::npos) next = r.text.size();
      std::string_view piece(r.text.data() + pos, next - pos);
      if (reply.time_to_first_token_ms < 0) {
        reply.time_to_first_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count();
      }
      if (on_token) on_token(piece);
      ++reply.completion_tokens;
      pos = next;
    }
    std::string last_user;
    for (const auto& m : call.messages) {
      if (m.role == ChatMessage::Role::kUser) last_user = m.text;
    }
    reply.text = r.streamed_before_delay + ReplaceAll(r.text, "{{last_user}}", last_user);
    for (size_t i = 0; i < r.calls.size(); ++i) {
      ModelToolCall tc;
      tc.id = "call_" + std::to_string(call.turn) + "_" + std::to_string(i);
      tc.name = r.calls[i].name;
      tc.input_json = ReplaceAll(ReplaceAll(r.calls[i].input_json, "{{session_id}}", call.session_id),
                                 "{{call_id}}", tc.id);
      reply.tool_calls.push_back(std::move(tc));
      reply.completion_tokens += 8;
    }
    reply.stop_reason = !r.stop_reason.empty() ? r.stop_reason
                        : reply.tool_calls.empty() ? "end_turn"
                                                   : "tool_use";
    if (reply.time_to_first_token_ms < 0 && !reply.tool_calls.empty()) {
      reply.time_to_first_token_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count();
    }
    return reply;
  }

  const std::vector<ScriptedResponse> responses_;
  const bool loop_;
};

}  // namespace

Result<std::unique_ptr<ModelClient>> NewScriptedModel(const ModelEndpointConfig& config) {
  std::ifstream in(config.script);
  if (!in) return Status::NotFound("scripted model: cannot read script file " + config.script);
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  json::value root = json::parse(ss.str(), ec);
  const std::string where = "scripted model file " + config.script;
  if (ec || !root.is_object()) return Status::InvalidArgument(where + " is not a JSON object");
  const auto& o = root.as_object();
  const json::array* list = json_fields::ArrayField(o, "responses");
  if (list == nullptr) return Status::InvalidArgument(where + " needs a \"responses\" array");
  std::vector<ScriptedResponse> responses;
  for (size_t index = 0; index < list->size(); ++index) {
    const json::value& rv = (*list)[index];
    if (!rv.is_object()) return Status::InvalidArgument(where + ": each response must be an object");
    const auto& ro = rv.as_object();
    ScriptedResponse r;
    r.text = json_fields::StringField(ro, "text");
    r.stop_reason = json_fields::StringField(ro, "stop_reason");
    r.wait_for_file = json_fields::StringField(ro, "wait_for_file");
    r.streamed_before_delay = json_fields::StringField(ro, "streamed_before_delay");
    if (auto d = ro.find("delay_ms"); d != ro.end() && d->value().is_int64() && d->value().as_int64() >= 0) {
      r.delay_ms = static_cast<uint32_t>(d->value().as_int64());
    }
    const json::array* calls = nullptr;
    SINEW_RETURN_IF_ERROR(json_fields::ReadArray(
        ro, "tool_calls", json_fields::IndexPath(where + ": responses", index), &calls));
    if (calls != nullptr) {
      for (const auto& cv : *calls) {
        if (!cv.is_object() || !cv.as_object().contains("name") || !cv.as_object().at("name").is_string()) {
          return Status::InvalidArgument(where + ": each tool call needs a \"name\"");
        }
        ScriptedCall call;
        call.name = std::string(cv.as_object().at("name").as_string());
        auto input = cv.as_object().find("input");
        call.input_json = input == cv.as_object().end() ? "{}" : json::serialize(input->value());
        r.calls.push_back(std::move(call));
      }
    }
    responses.push_back(std::move(r));
  }
  const bool loop = json_fields::BoolField(o, "loop");
  return std::unique_ptr<ModelClient>(std::make_unique<ScriptedModel>(std::move(responses), loop));
}

}  // namespace sinew::harness
