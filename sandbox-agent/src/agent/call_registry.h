// CallRegistry: exactly-once tool calls. A call that carries a call id runs once for the
// life of the agent, to completion even when its caller disconnects (a harness that
// crashed), and its result is kept; a repeated call with the same id attaches to it:
// it waits while the call runs and then gets the same result. Calls without an id run as
// before (a caller that leaves cancels them).
//
// Bounds: the results of the most recent `max_kept` finished calls are kept (each is
// capped at the agent's output limit); older ones are forgotten, and their ids then
// answer kNotFound instead of running again (the last 65536 such ids are remembered).
//
// Thread-safety: thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agent/tools.h"
#include "sinew/status.h"

namespace sinew::sandbox {

class CallRegistry {
 public:
  // Borrows `tools`, which must outlive the registry and every call it started.
  explicit CallRegistry(const ToolRegistry& tools, size_t max_kept = 4096)
      : tools_(tools), max_kept_(max_kept) {}

  // Runs call `call_id` (non-empty) of tool `name` or attaches to the one already known.
  // While this caller waits, the call's live output goes to `sink` (may be empty).
  // Returns the result; result.replayed is set when another caller started the call.
  // Errors: kInvalidArgument when the id was used for another tool or input;
  // kNotFound when the id's result was forgotten (see Bounds); kCancelled when
  // `caller_gone()` became true first (the call carries on).
  Result<v1::ExecuteResult> Run(const std::string& call_id, std::string_view name,
                                std::string_view input_json, const ChunkSink& sink,
                                const std::function<bool()>& caller_gone);

  // Stops call `call_id`: its tool's RunContext.cancelled turns true (bash kills its
  // process group and answers as cancelled). An id not known yet is remembered (the last
  // kPreCancelledKept of them), and the call that comes with it is stopped as it starts.
  // Returns true when the call was running.
  bool Cancel(const std::string& call_id);

  // Calls known (running or finished and kept).
  size_t size() const;

 private:
  struct Call;
  void Start(const std::shared_ptr<Call>& call);
  // REQUIRES: mu_ held.
  void Evict();

  const ToolRegistry& tools_;
  const size_t max_kept_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Call>> calls_;  // guarded by mu_
  std::deque<std::string> order_;                       // ids, oldest first; guarded by mu_
  std::set<std::string> forgotten_;        // evicted ids (at most kForgottenKept); guarded by mu_
  std::deque<std::string> forgotten_order_;  // guarded by mu_
  std::set<std::string> pre_cancelled_;      // ids cancelled before they came; guarded by mu_
  std::deque<std::string> pre_cancelled_order_;  // guarded by mu_
};

}  // namespace sinew::sandbox
