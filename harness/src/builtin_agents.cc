// The built-in agents (config.h, docs/harness.md): "oracle" and "nop", models with no
// model server behind them. They answer through the ordinary agent loop, so their tool
// calls are ordinary events: logged before they run, replayable, and run exactly once
// in the sandbox across a harness crash.
#include <boost/json.hpp>

#include "model_clients.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;

class OracleAgent final : public ModelClient {
 public:
  Result<ModelReply> Complete(const ModelCall& call, const TokenCallback& on_token) override {
    ModelReply r;
    const ChatMessage* task = nullptr;
    for (const auto& m : call.messages) {
      if (m.role == ChatMessage::Role::kUser) {
        task = &m;
        break;
      }
    }
    if (call.turn == 0 && task != nullptr) {
      json::object input{{"command", task->text}};
      if (call.max_wall_seconds > 0) input["timeout"] = call.max_wall_seconds;
      r.text = "Running the task's command.";
      r.tool_calls.push_back({"oracle_0", "bash", json::serialize(input)});
      r.stop_reason = "tool_use";
    } else {
      r.text = "Done.";
      r.stop_reason = "end_turn";
    }
    if (on_token) on_token(r.text);
    return r;
  }
};

class NopAgent final : public ModelClient {
 public:
  Result<ModelReply> Complete(const ModelCall&, const TokenCallback&) override {
    ModelReply r;
    r.stop_reason = "end_turn";
    return r;
  }
};

}  // namespace

std::unique_ptr<ModelClient> NewOracleAgent() { return std::make_unique<OracleAgent>(); }
std::unique_ptr<ModelClient> NewNopAgent() { return std::make_unique<NopAgent>(); }

}  // namespace sinew::harness
