#include "attempt_steps.h"

#include <sys/stat.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "sinew/client/api_client.h"
#include "sinew/proto_json.h"
#include "sinew/sandbox/outcome.h"
#include "sinew/sandbox/sandbox_client.h"

namespace sinew::eval {
namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// What the built-in oracle runs (from the workspace) once solution/ is in /tmp/solution.
constexpr const char* kOracleCommand = "bash /solution/solve.sh";

std::string Base64(const std::string& data) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4 + data.size() / 57 + 1);
  size_t i = 0, line = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(data[k])); };
  for (; i + 2 < data.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
    if (++line == 19) {  // 76-character lines
      out += '\n';
      line = 0;
    }
  }
  if (i < data.size()) {
    uint32_t v = byte(i) << 16 | (i + 1 < data.size() ? byte(i + 1) << 8 : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < data.size() ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {

// "completed", "requires_action", ... as the REST API names a session's status: the
// proto's value name without its prefix, in lower case (so a new status needs no case here).
std::string StatusName(v1::SessionStatus s) {
  std::string name = v1::SessionStatus_Name(s);
  constexpr std::string_view kPrefix = "SESSION_STATUS_";
  if (name.rfind(kPrefix, 0) != 0) return "unknown";
  name.erase(0, kPrefix.size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string Tail(const std::string& s, size_t n = 300) {
  std::string t = s.size() > n ? "..." + s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One attempt's state. Each step returns false when the attempt has ended (r_ is filled).
class Attempt {
 public:
  Attempt(const Task& task, const SandboxShape& shape, const AttemptContext& ctx, TrialRecord* r)
      : task_(task), shape_(shape), ctx_(ctx), r_(r) {}

  void Run() {
    const auto t_setup = Clock::now();
    bool ok = Provision() && CopyDir(task_.dir + "/environment/files", "/workspace") && Setup();
    r_->setup_ms = MsSince(t_setup);
    if (ok) {
      const auto t_agent = Clock::now();
      ok = Agent();
      r_->agent_ms = MsSince(t_agent);
    }
    if (ok) {
      const auto t_verify = Clock::now();
      Verify();
      r_->verifier_ms = MsSince(t_verify);
    }
    Release();
  }

 private:
  // Ends the attempt with `outcome`; keeps the first cause.
  bool End(const char* outcome, std::string cause) {
    if (r_->outcome.empty()) {
      r_->outcome = outcome;
      r_->cause = std::move(cause);
    }
    return false;
  }

  bool Provision() {
    v1::Resources res;
    res.set_memory_guaranteed_bytes(shape_.memory_guaranteed_bytes);
    res.set_memory_limit_bytes(shape_.memory_limit_bytes);
    res.set_cpu_millicores(shape_.cpu_millicores);
    res.set_pids_limit(shape_.pids_limit);
    res.set_workspace_bytes(shape_.workspace_bytes);
    res.set_image(shape_.image);
    auto lifetime = task_.agent_timeout_sec + task_.verifier_timeout_sec + 600;
    res.set_lifetime_seconds(static_cast<uint32_t>(lifetime));
    auto info = ctx_.provisioner->Provision(res, ctx_.label);
    if (!info.ok())
      return End(kInfraError, "the sandbox could not be provisioned: " + info.status().message());
    box_ = *info;
    r_->sandbox_id = box_.id();
    r_->shape = ProtoJsonLine(box_.resources());
    if (ctx_.on_sandbox) ctx_.on_sandbox(box_.id());
    sandbox::SandboxClientOptions co;
    co.call_timeout = std::chrono::seconds(
        static_cast<int64_t>(std::max(task_.agent_timeout_sec, task_.verifier_timeout_sec)) + 120);
    auto client = sandbox::SandboxClient::ConnectTo(box_, co);  // authenticated, by id
    if (!client.ok()) return Lost("cannot reach the sandbox's agent: " + client.status().message());
    client_ = std::move(*client);
    return true;
  }

  // The sandbox stopped answering: learn how it ended (OOM, lifetime, crash).
  bool Lost(const std::string& transport_error) {
    for (int i = 0; i < 60; ++i) {
      auto info = ctx_.provisioner->Get(box_.id());
      if (info.ok() && info->state() == v1::SANDBOX_STATE_ENDED) {
        ended_ = *info;
        return End(kInfraError, std::string(sandbox::OutcomeName(info->outcome())) + ": " +
                                    info->outcome_detail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return End(kInfraError, "sandbox lost: " + transport_error);
  }

  // After a command killed by a signal: did the sandbox end (an OOM kill ends it)?
  bool StillAlive() {
    for (int i = 0; i < 20; ++i) {
      auto info = ctx_.provisioner->Get(box_.id());
      if (info.ok() && info->state() == v1::SANDBOX_STATE_ENDED) return Lost("ended");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  // Runs `command` with bash in the sandbox. False when the sandbox broke (r_ filled).
  bool Bash(const std::string& command, double timeout_s, v1::ExecuteResult* out) {
    json::object input{
        {"command", command},
        {"timeout", std::clamp<int64_t>(static_cast<int64_t>(std::ceil(timeout_s)), 1, 3600)}};
    auto res = client_->Execute("bash", json::serialize(input));
    if (!res.ok()) return Lost(res.status().message());
    *out = *res;
    if ((out->signal() != 0 || out->exit_code() >= 128) && !out->timed_out()) return StillAlive();
    return true;
  }

  // Copies the files below host `dir` to `dest` in the sandbox (modes kept: x or not).
  bool CopyDir(const std::string& dir, const std::string& dest) {
    return CopyFiles(dir, ListFiles(dir), dest);
  }
  bool CopyFiles(const std::string& dir, const std::vector<std::string>& files,
                 const std::string& dest) {
    std::string script;
    auto flush = [&]() {
      if (script.empty()) return true;
      v1::ExecuteResult res;
      if (!Bash("set -e\n" + script, 120, &res)) return false;
      script.clear();
      if (res.exit_code() != 0)
        return End(kInfraError,
                   "could not copy " + dir + " into the sandbox: " + Tail(res.output()));
      return true;
    };
    for (const auto& rel : files) {
      const std::string src = dir + "/" + rel;
      const std::string target = dest + "/" + rel;
      struct stat st {};
      bool exec = ::stat(src.c_str(), &st) == 0 && (st.st_mode & S_IXUSR);
      script += "mkdir -p " + Quote(fs::path(target).parent_path().string()) + "\nbase64 -d > " +
                Quote(target) + " <<'__SINEW_EOF__'\n" + Base64(ReadAll(src)) + "\n__SINEW_EOF__\n";
      if (exec) script += "chmod +x " + Quote(target) + "\n";
      if (script.size() > (2u << 20) && !flush()) return false;
    }
    return flush();
  }

  bool Setup() {
    v1::ExecuteResult res;
    if (!Bash("mkdir -p /tmp/logs/verifier /tmp/logs/agent", 30, &res)) return false;
    if (!task_.has_setup) return true;
    if (!CopyFiles(task_.dir + "/environment", {"setup.sh"}, "/tmp/environment")) return false;
    if (!Bash("bash /tmp/environment/setup.sh", task_.agent_timeout_sec, &res)) return false;
    if (res.timed_out()) return End(kInfraError, "setup.sh timed out");
    if (res.exit_code() != 0) {
      return End(kInfraError, "setup.sh failed (exit " + std::to_string(res.exit_code()) +
                                  "): " + Tail(res.output()));
    }
    return true;
  }

  // Every agent is a harness session attached to the trial's sandbox: harness --model M,
  // or the harness's built-in agents `oracle` (runs kOracleCommand with bash, after the
  // solution is copied in) and `nop` (ends at once).
  bool Agent() {
    if (ctx_.agent == "oracle" && !CopyDir(task_.dir + "/solution", "/tmp/solution")) return false;
    return HarnessAgent();
  }

  // The oracle's bash call ended: a timeout is the agent's, a kill that ended the sandbox
  // (OOM) is infra; a non-zero exit is noted (the verifier decides).
  bool OracleResult(const v1::ToolResult& res) {
    if (res.timed_out()) {
      return End(kAgentTimeout,
                 "solve.sh ran past the agent timeout of " +
                     std::to_string(static_cast<int64_t>(std::ceil(task_.agent_timeout_sec))) + " s");
    }
    if ((res.signal() != 0 || res.exit_status() >= 128) && !StillAlive()) return false;
    if (res.exit_status() != 0) {
      agent_note_ = "solve.sh exited " + std::to_string(res.exit_status()) + ": " +
                    Tail(res.output(), 200);
    }
    return true;
  }

  bool HarnessAgent() {
    client::ApiClient api(ctx_.server, ctx_.api_key);
    json::object attach{{"id", box_.id()}, {"endpoint", box_.endpoint()}};
    const bool harness = ctx_.agent == "harness";
    const std::string prompt =
        ctx_.agent == "oracle" ? std::string(kOracleCommand)
                               : task_.instruction + "\n\n(Your working directory is /workspace.)";
    json::object body{
        {"prompt", prompt},
        {"title", ctx_.label},
        {"sandbox", json::object{{"attach", attach}}},
        {"limits", json::object{{"max_wall_seconds",
                                 static_cast<int64_t>(std::ceil(task_.agent_timeout_sec))}}},
        {"metadata", json::object{{"eval_task", task_.name}}}};
    if (!harness) body["model"] = ctx_.agent;  // the harness's built-in agent
    if (harness && !ctx_.model.empty()) body["model"] = ctx_.model;
    auto session = api.Submit(body);
    if (!session.ok())
      return End(kInfraError,
                 "the harness did not take the session: " + session.status().message());
    r_->session_id = session->id;
    if (ctx_.on_session) ctx_.on_session(session->id);
    const auto deadline =
        Clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(task_.agent_timeout_sec * 1000) + 30000);
    // Follow the session's event stream until it ends (it ends at a final status): each
    // event arrives as it is written, so the runner learns of the end at once. Past the
    // deadline the session is cancelled and the stream left.
    std::vector<v1::Event> events;
    std::string status;
    uint64_t last_seq = 0;
    std::atomic<bool> past_deadline{false};
    int broken = 0;
    for (;;) {
      Status s = api.Stream(
          session->id, last_seq,
          [&](const v1::Event& ev) {
            last_seq = ev.seq();
            if (ev.has_status_change()) status = StatusName(ev.status_change().to());
            events.push_back(ev);
          },
          [&] {
            if (!past_deadline && Clock::now() > deadline) {
              past_deadline = true;
              (void)client::ApiClient(ctx_.server, ctx_.api_key).Cancel(session->id);
            }
          },
          &past_deadline);
      if (past_deadline) return End(kAgentTimeout, "the session ran past the agent timeout");
      if (s.ok() && (status == "completed" || status == "failed" || status == "cancelled")) break;
      // A broken link, or a stream a stopping harness ended: follow on from the last event.
      if (++broken > 50) {
        return End(kInfraError, "harness unavailable: " +
                                    (s.ok() ? std::string("the event stream keeps ending")
                                            : s.message()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::string reason, error_code, limit, lost;
    std::optional<v1::ToolResult> oracle_result;
    for (const auto& ev : events) {
      switch (ev.payload_case()) {
        case v1::Event::kModelResponse:
          r_->tokens_in += static_cast<int64_t>(ev.model_response().usage().prompt_tokens());
          r_->tokens_out += static_cast<int64_t>(ev.model_response().usage().completion_tokens());
          break;
        case v1::Event::kToolCall:
          ++r_->tool_calls;
          break;
        case v1::Event::kToolResult:
          if (!oracle_result) oracle_result = ev.tool_result();
          break;
        case v1::Event::kSandboxLost:
          lost = ev.sandbox_lost().outcome() + ": " + ev.sandbox_lost().detail();
          break;
        case v1::Event::kError:
          error_code = ev.error().code();
          limit = ev.error().limit();
          break;
        case v1::Event::kStatusChange:
          reason = ev.status_change().reason();
          break;
        default:
          break;
      }
    }
    // The session lost its sandbox: how it ended comes from sandboxd, which may record
    // the end (an OOM kill) a moment after the harness noticed.
    if (!lost.empty()) return Lost(lost);
    if (ctx_.agent == "oracle") {
      if (!oracle_result) {
        return End(kInfraError, "the oracle's command did not run in session " + session->id +
                                    " (" + status + ": " + reason + ")");
      }
      if (!OracleResult(*oracle_result)) return false;
    }
    auto info = ctx_.provisioner->Get(box_.id());
    if (info.ok() && info->state() == v1::SANDBOX_STATE_ENDED)
      return Lost("ended during the session");
    if (status == "completed") return true;
    if (status == "cancelled") return End(kAgentError, "the session was cancelled: " + reason);
    if (limit == "max_wall_seconds") return End(kAgentTimeout, reason);
    return End(kAgentError, (error_code.empty() ? "" : error_code + ": ") + reason);
  }

  void Verify() {
    v1::ExecuteResult res;
    if (!Bash("rm -rf /tmp/tests /tmp/logs/verifier && mkdir -p /tmp/logs/verifier", 30, &res))
      return;
    if (!CopyDir(task_.dir + "/tests", "/tmp/tests")) return;
    if (!Bash("bash /tests/test.sh", task_.verifier_timeout_sec, &res)) return;
    if (res.timed_out()) {
      End(kVerifierTimeout, "test.sh ran past the verifier timeout of " +
                                std::to_string(static_cast<int64_t>(task_.verifier_timeout_sec)) +
                                " s");
      return;
    }
    const std::string test_output = res.output();
    const int test_exit = res.exit_code();
    if (!Bash("cat /logs/verifier/reward.txt", 30, &res)) return;
    std::string text = res.output();
    if (res.exit_code() != 0) {
      End(kInfraError, "verifier crashed: no /logs/verifier/reward.txt (test.sh exit " +
                           std::to_string(test_exit) + "): " + Tail(test_output));
      return;
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
      text.erase(0, 1);
    char* end = nullptr;
    double reward = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(reward >= 0 && reward <= 1)) {
      End(kInfraError,
          "verifier crashed: reward.txt holds '" + Tail(text, 60) + "', not a number in [0, 1]");
      return;
    }
    r_->reward = reward;
    if (reward >= 1.0) {
      End(kPassed, "");
    } else {
      End(kFailed, "reward " + text + (agent_note_.empty() ? "" : "; " + agent_note_) +
                       (test_output.empty() ? "" : "; test.sh: " + Tail(test_output, 200)));
    }
  }

  void Release() {
    if (box_.id().empty()) return;
    if (ended_.id().empty()) {
      auto info = ctx_.provisioner->Destroy(box_.id());
      if (info.ok()) ended_ = *info;
    }
    r_->memory_peak_bytes = ended_.memory_peak_bytes();
    r_->cpu_seconds = static_cast<double>(ended_.cpu_usage_ns()) / 1e9;
    if (r_->outcome.empty()) End(kInfraError, "the attempt ended without an outcome");
  }

  const Task& task_;
  const SandboxShape& shape_;
  const AttemptContext& ctx_;
  TrialRecord* r_;
  v1::SandboxInfo box_;
  v1::SandboxInfo ended_;  // its final info, once known
  std::unique_ptr<sandbox::SandboxClient> client_;
  std::string agent_note_;
};

}  // namespace

void RunAttemptSteps(const Task& task, const SandboxShape& shape, const AttemptContext& ctx,
                     TrialRecord* r) {
  Attempt(task, shape, ctx, r).Run();
}

}  // namespace sinew::eval
