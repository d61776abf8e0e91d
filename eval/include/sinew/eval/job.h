// An evaluation job: its specification (job.json) and its journal (trials.jsonl) in the
// job directory. The journal is append-only and synced line by line, so a runner killed
// at any moment loses at most the attempt it was running; `sinew eval resume` reads it
// back and runs only what is not finished (docs/eval.md).
//
// Thread-safety: Journal is safe from several threads; the other types are plain values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <boost/json.hpp>

#include "sinew/grpc_tls_options.h"
#include "sinew/status.h"

namespace sinew::eval {

// Outcome names of a trial attempt (the `outcome` field of results.json).
inline constexpr const char* kPassed = "passed";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kAgentTimeout = "agent_timeout";
inline constexpr const char* kVerifierTimeout = "verifier_timeout";
inline constexpr const char* kAgentError = "agent_error";
inline constexpr const char* kInfraError = "infra_error";

struct JobSpec {
  std::string suite;                 // absolute path of the suite folder
  std::string task_glob;             // --task; "" = all
  std::string agent;                 // "harness", "oracle" or "nop"
  std::string model;                 // for agent harness; "" = the harness's default model
  uint32_t trials = 1;               // trials per task and configuration. Default: 1
  std::vector<std::string> configs;  // --config arguments as given. Default: {"1x"}
  uint32_t concurrency = 1;          // trials at once. Default: 1
  uint32_t max_attempts = 2;  // attempts per trial; only infra errors are retried. Default: 2
  std::string server;         // harness URL (every agent: each trial is a session)
  std::string sandboxd;       // sinew-sandboxd address
  GrpcTlsOptions sandboxd_tls{};  // mTLS to sinew-sandboxd (file paths). Default: plain gRPC
  int64_t created_unix_ms = 0;

  boost::json::object ToJson() const;
  [[nodiscard]] static Result<JobSpec> FromJson(const boost::json::value& v);
};

struct TrialKey {
  std::string task;
  std::string config;
  uint32_t trial = 0;  // 1-based
  auto operator<=>(const TrialKey&) const = default;
};

// One attempt of one trial: everything results.json says about it.
struct TrialRecord {
  TrialKey key;
  uint32_t attempt = 1;    // 1-based
  std::string outcome;     // one of the names above
  std::string cause;       // why (for everything but passed); "" when passed
  std::string session_id;  // the trial's harness session; "" when none was created
  std::string sandbox_id;
  std::optional<double> reward;
  bool interrupted = false;  // the runner stopped during this attempt (found on resume)
  int64_t started_unix_ms = 0;
  int64_t setup_ms = 0;  // provision + files + setup.sh
  int64_t agent_ms = 0;
  int64_t verifier_ms = 0;
  int64_t total_ms = 0;  // the whole attempt as the runner saw it
  int64_t tokens_in = 0, tokens_out = 0;
  int64_t tool_calls = 0;
  uint64_t memory_peak_bytes = 0;  // from the sandbox's cgroup
  double cpu_seconds = 0;          // from the sandbox's cgroup
  std::string shape;               // the sandbox's resources, as JSON text

  bool passed() const { return outcome == kPassed; }
  bool infra() const { return outcome == kInfraError; }
  // total_ms minus setup, agent and verifier time: what the runner itself cost.
  int64_t overhead_ms() const {
    return std::max<int64_t>(0, total_ms - setup_ms - agent_ms - verifier_ms);
  }

  boost::json::object ToJson() const;
  [[nodiscard]] static Result<TrialRecord> FromJson(const boost::json::object& o);
};

// The journal: trials.jsonl in the job directory.
//   {"type":"start","task","config","trial","attempt","unix_ms"}
//   {"type":"sandbox",...key...,"attempt","sandbox_id"}   once provisioned
//   {"type":"session",...key...,"attempt","session_id"}   once created
//   {"type":"end", ...TrialRecord...}
class Journal {
 public:
  // Opens (creating) DIR/trials.jsonl for appending and reads what it holds. A torn
  // last line (the runner died mid-write) is ignored.
  [[nodiscard]] static Result<std::unique_ptr<Journal>> Open(const std::string& dir);
  ~Journal();

  // Appends one line and syncs it to disk before returning.
  [[nodiscard]] Status Append(const boost::json::object& line);

  // Ended attempts, in journal order.
  std::vector<TrialRecord> Ended() const;
  // Attempts that started but have no end, with what they had provisioned.
  struct Open_ {
    TrialKey key;
    uint32_t attempt = 0;
    int64_t started_unix_ms = 0;
    std::string sandbox_id, session_id;
  };
  std::vector<Open_> Unfinished() const;

 private:
  Journal() = default;
  void Apply(const boost::json::object& line);  // REQUIRES: mu_ held or construction

  mutable std::mutex mu_;
  int fd_ = -1;                                          // guarded by mu_
  std::vector<TrialRecord> ended_;                       // guarded by mu_
  std::map<std::pair<TrialKey, uint32_t>, Open_> open_;  // guarded by mu_
};

boost::json::object KeyJson(const TrialKey& k, uint32_t attempt);

}  // namespace sinew::eval
