// SessionDriver: wake(session_id) for one session. Acquires the lease, reads the log,
// rebuilds the context and continues from the last event, writing each step before its
// effect (model_request before the call, tool_call before execute, results after).
//
// Run() is a coroutine (harness/src/async.h): while the session waits on its model or a
// timer it holds no thread; its store, sandbox and tool calls run on the pools it is given.
//
// Thread-safety: one Run() at a time (it resumes on any driver thread, in order);
// RequestCancel, PostMessage, RequestWake, TakeWork and RenewLease may be called from any
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "async.h"
#include "harness_deps.h"
#include "log_state.h"
#include "sandbox_idle_pause.h"
#include "task_spec.h"

namespace sinew::harness {

// The tool_result event recording `o` for call `call_id`.
v1::Event ToolResultEvent(const std::string& call_id, const ToolOutcome& o);

class SessionDriver {
 public:
  // The pools where calls that block run: `store` for session store calls (short),
  // `blocking` for model servers, tools and sandboxes (they may take minutes).
  struct Pools {
    asio::thread_pool* store = nullptr;
    asio::thread_pool* blocking = nullptr;
  };

  SessionDriver(const HarnessDeps& deps, Pools pools, std::string session_id);

  // One wake: drives the session until it ends, its lease is lost, or the harness stops.
  Task<void> Run();

  void RequestCancel(std::string reason);
  // The interrupt event at `seq` is in the log (docs/harness.md, "Interrupts"): cuts the
  // model call under way, stops the sandbox call under way (an RPC, made here), and wakes
  // Run, which answers it. Ignored for an interrupt this driver answered already.
  void RequestInterrupt(uint64_t seq);
  void PostMessage(std::string text);
  // Queues an audit event (the API's record of a cancel of this session); it is appended
  // with the next inbox drain, ahead of any message or cancel.
  void PostAudit(v1::Event audit);
  void RequestWake();
  // Abandons an in-flight model call (the harness is stopping); writes nothing.
  void Interrupt() { abort_ = true; }
  // True (and clears the wake flag) when input arrived that Run() has not seen yet.
  bool TakeWork();
  // Renews the lease if this driver holds one; on loss, stops the driver's work. A child
  // session's driver also looks at its parent then, and cancels the child once the
  // parent no longer waits for it (ParentGone).
  void RenewLease();
  // True once this driver lost its lease (it writes nothing more and stops at its next
  // step, which may be a long way off: a call under way is not always cut short).
  bool fenced() const { return fenced_; }

  const std::string& id() const { return id_; }

 private:
  [[nodiscard]] Task<Status> Drive();
  [[nodiscard]] Task<Status> LoadLog();
  // Reads the events after log_'s last one into log_ and state_ (events another writer
  // appended: a decision written through the API, docs/harness.md "Tool approvals").
  [[nodiscard]] Task<Status> ReadNewEvents();
  // Tool approvals of `response`'s calls: writes an approval_requested for each call the
  // policy asks about (and the status requires_action), then waits until every one is
  // decided (by the API, or by its deadline: a denial this driver writes). True when all
  // are decided; false when the wait was cut short (cancel, stop, lost lease).
  [[nodiscard]] Task<Result<bool>> AwaitApprovals(const v1::ModelResponse& response);
  // The result a call gets without running when the policy denies it or a person (or a
  // deadline) did; nullopt when it may run.
  std::optional<std::string> DenialOf(const v1::ToolCallSpec& spec) const;
  // The end of a turn of a session with keep_open: its sandbox released, the status
  // waiting_for_input (the driver then stops; a message, a close or the scanner's wake
  // at the idle limit brings it back).
  [[nodiscard]] Task<Status> WaitForInput(const std::string& why);
  [[nodiscard]] Task<Status> Append(std::vector<v1::Event> events);
  [[nodiscard]] Task<Status> AppendOne(v1::Event event);
  // Interrupts (driver_interrupts.cc): true when one waits for its answer (told by the
  // API here, or found in the log).
  bool Interrupting();
  // Answers every interrupt waiting in the log, after `first` (a partial model response):
  // the last response's calls without a result stopped or marked as not run, one
  // user_message per interrupt, the status back to running. Writes nothing (not `first`
  // either) when none waits. Also clears the flag that RequestInterrupt set and the abort
  // it caused.
  [[nodiscard]] Task<Status> AnswerInterrupts(std::vector<v1::Event> first = {});
  // `result` (a tool_result event of a call under way when an interrupt came) marked as
  // interrupted by the user.
  static void MarkUserInterrupted(v1::Event* result);
  // Runs a session store call on the store pool.
  template <typename Fn>
  Task<std::invoke_result_t<Fn&>> OnStore(Fn fn) {
    return OnPool(*pools_.store, std::move(fn));
  }
  // Runs a call that may block long (sandboxes, tools) on the blocking pool.
  template <typename Fn>
  Task<std::invoke_result_t<Fn&>> Blocking(Fn fn) {
    return OnPool(*pools_.blocking, std::move(fn));
  }
  // Appends an error event (when code is set; with a model server's HTTP status and
  // whether retrying later may help), releases the sandbox, writes the status.
  [[nodiscard]] Task<Status> Finish(v1::SessionStatus to, const std::string& reason,
                              const std::string& error_code = "", int32_t http_status = 0,
                              bool retryable = false);
  // Fails the session with error limit_exceeded naming `limit` (Error.limit) and its value.
  [[nodiscard]] Task<Status> LimitReached(const std::string& limit, uint64_t value);
  // Appends queued user messages; returns true when a cancel was requested.
  [[nodiscard]] Task<Result<bool>> DrainInbox();
  [[nodiscard]] Task<Status> RunPendingTools();
  // Logs (info) a model call that a previous driver started and never recorded an answer to.
  void LogInterruptedModelCall() const;
  // A tool_result event saying the call was interrupted (and counts it).
  v1::Event Interrupted(const v1::ToolCallSpec& spec, const std::string& text);
  // The session's sandbox broke (`transport_error` from the call): asks how it ended,
  // releases it unless it is attached, counts it, and returns its sandbox_lost event.
  struct LostSandbox {
    v1::Event event;
    std::string how;
    std::string detail;
  };
  Task<LostSandbox> LoseSandbox(Status transport_error);
  // The live sandbox as the log names it (id and host).
  SandboxRef SandboxOf() const;
  // Before a sandbox tool call that has not started: when the sandbox's host is gone
  // (docs/scale-out.md), appends sandbox_lost ("host_lost"), so the call gets a fresh
  // sandbox on another host.
  [[nodiscard]] Task<Status> DropSandboxOfLostHost(const ToolInfo& tool, bool started_before);
  // Before a sandbox tool call: the first use of a sandbox that this driver did not
  // provision resumes it (a conversation that waited for input left it paused; resuming a
  // running one changes nothing). One that cannot be resumed is lost (sandbox_lost), and a
  // call that has not started gets a fresh sandbox.
  [[nodiscard]] Task<Status> ResumeSandbox(const ToolInfo& tool, bool started_before);
  // Idle sandboxes (docs/harness.md, "Idle sandboxes"; driver_idle_pause.cc), for a task
  // with idle_pause_seconds. ArmIdlePause: a timer for the model call about to be made,
  // or null when the sandbox cannot idle-pause now (none, not ready, attached).
  // DisarmIdlePause stops it and records a pause it made. PauseIfIdle: for the waits the
  // driver polls (tool approvals), the pause made inline once it is due.
  // A snapshot the idle timer takes before its pause (on_pause), logged by DisarmIdlePause.
  struct IdleSnapshot {
    uint64_t at_seq = 0;
    std::mutex mu;
    std::optional<Result<v1::SnapshotInfo>> taken;  // guarded by mu
  };
  std::unique_ptr<IdlePause> ArmIdlePause();
  [[nodiscard]] Task<Status> DisarmIdlePause(std::unique_ptr<IdlePause> timer);
  [[nodiscard]] Task<Status> PauseIfIdle();
  bool IdlePauseApplies() const;
  // After a successful pause of the live sandbox (from `started` to `ended`): its
  // sandbox_paused event (appended with `with`, ahead of them), the tenant's sandbox count
  // and the ready mark let go.
  [[nodiscard]] Task<Status> RecordPause(const std::string& reason, std::chrono::steady_clock::time_point started,
                                         std::chrono::steady_clock::time_point ended,
                                         std::vector<v1::Event> with = {});
  // `sandbox_call_id` names the call to the sandbox, which runs each id exactly once.
  [[nodiscard]] Task<Status> ExecuteCall(const v1::ToolCallSpec& spec, bool started_before,
                                         const std::string& sandbox_call_id);
  // A delegate call (driver_delegate.cc; docs/harness.md, "Sub-agents"): writes the call
  // ahead naming its child, creates the child (once: its id comes from the call), and
  // waits for it to end; its answer is the call's result. A cancel or an interrupt of this
  // session ends the wait with a result that says so (the child then cancels itself).
  [[nodiscard]] Task<Status> Delegate(const v1::ToolCallSpec& spec, bool started_before,
                                      const std::string& call_key, v1::Event call);
  // Creates the child session `child_id` for the call at `call_seq` unless it exists; an
  // error for the model when its task cannot be made (nothing is created then).
  [[nodiscard]] Task<Result<bool>> EnsureChild(const v1::ToolCallSpec& spec, const std::string& child_id,
                                               uint64_t call_seq, std::string* refusal);
  // For a child asked with sandbox "fork": a snapshot of this session's sandbox (resumed
  // first when paused), named in `parent`. This session without a sandbox yet leaves
  // `parent` as it is (the child gets a fresh one); a snapshot refused by the provisioner
  // (over the byte cap, a busy sandbox) is an error for the model in `refusal`.
  [[nodiscard]] Task<Status> SnapshotForChild(ParentRef* parent, std::string* refusal);
  // A new sandbox for this session (driver_snapshots.cc): a fresh one as its task's spec
  // says; for a child forked from its parent's sandbox, one restored from the parent's
  // snapshot; for a fork of a session (sandbox_released.next_from_snapshot), one restored
  // from the source's snapshot, or a fresh one when that snapshot is gone
  // (`from_snapshot` says which).
  [[nodiscard]] Task<Result<SandboxBackend::Provisioned>> ProvisionSandbox(std::string* from_snapshot);
  // Forks with their sandbox (driver_snapshots.cc; docs/harness.md, "Forks with their
  // sandbox"), for a task with "snapshots". SnapshotDue: the live sandbox, not paused, has
  // changed since its last snapshot. KeepSnapshot: snapshots it and logs sandbox_snapshot
  // (a refusal is logged as a warning: the next one that is due tries again).
  // RecordSnapshot logs one taken elsewhere (the idle timer's) and deletes the snapshots
  // beyond the newest kSessionSnapshotsKept.
  bool SnapshotDue() const;
  [[nodiscard]] Task<Status> KeepSnapshot(const std::string& reason, const std::string& call_id = "");
  [[nodiscard]] Task<Status> RecordSnapshot(const std::string& reason, const std::string& call_id,
                                            const SandboxRef& box, uint64_t at_seq,
                                            const Result<v1::SnapshotInfo>& snap);
  // At a child's end: deletes the snapshot of its parent's sandbox it was restored from
  // (already gone is fine; a failure is logged and leaves the snapshot).
  [[nodiscard]] Task<void> DropParentSnapshot();
  // For a child session: why it should stop (its parent ended, or no longer waits for its
  // call: the call has a result), or "" while the parent waits. Blocking (store calls).
  std::string ParentGone();
  [[nodiscard]] Task<Status> CallModel();
  // Waits while the tenant is over tokens_per_minute (saying so once with an annotation
  // kind=quota_wait). True: call the model now; false: the wait was cut short (cancel,
  // stop, lost lease) and the loop decides.
  [[nodiscard]] Task<Result<bool>> WaitForTokenBudget();
  [[nodiscard]] Task<Status> ReleaseSandbox(const std::string& reason);
  bool CancelRequested();
  // The tools this session offers (the task's list, minus sandbox tools without sandboxd).
  std::vector<ToolDefinition> ToolDefinitionsFor() const;

  const HarnessDeps deps_;
  const Pools pools_;
  const std::string id_;

  std::mutex mutex_;
  std::vector<std::string> inbox_;  // guarded by mutex_
  std::vector<v1::Event> audits_;   // guarded by mutex_
  bool cancel_requested_ = false;   // guarded by mutex_
  std::string cancel_reason_;       // guarded by mutex_
  bool wake_requested_ = false;     // guarded by mutex_
  bool interrupt_requested_ = false;  // guarded by mutex_
  // The sandbox call under way (an interrupt stops it); guarded by mutex_, which is held
  // while RequestInterrupt stops it so that the sandbox is not released meanwhile.
  struct RunningCall {
    SandboxRef sandbox;
    std::string call_id;
  };
  std::optional<RunningCall> running_call_;
  std::atomic<uint64_t> answered_interrupt_seq_{0};  // the newest interrupt answered
  // A child session's parent (set once the task is read; guarded by mutex_), and the
  // parent's next_seq at the last look (used by ParentGone only, one caller at a time).
  ParentRef parent_;
  uint64_t parent_seen_next_seq_ = 0;
  std::mutex parent_check_mutex_;

  std::atomic<bool> abort_{false};    // aborts in-flight model calls (cancel, stop, fenced)
  std::atomic<bool> fenced_{false};   // the lease was lost: stop, write nothing more
  std::atomic<uint64_t> epoch_{0};    // the held lease's epoch, 0 when none

  // Used by Run() only.
  std::vector<v1::Event> log_;
  // Events that need no write of their own (the task's message, the status change to
  // running): they go out with the next append, ahead of its events, so that the path
  // from wake to the first model call costs one write.
  std::vector<v1::Event> pending_;
  LogState state_;
  TaskSpec task_;
  std::string tenant_;  // the session's, from session_created
  std::string ready_sandbox_;  // the sandbox this driver provisioned or resumed
  // When the last sandbox call ended (or this wake began): the idle timer counts from it.
  std::chrono::steady_clock::time_point last_sandbox_use_{};
  // PauseIfIdle tries again no sooner than this after a refusal (a process still ran).
  std::chrono::steady_clock::time_point idle_retry_at_{};
  std::shared_ptr<IdleSnapshot> idle_snapshot_;  // of the armed idle timer; null when none
  uint64_t next_seq_ = 0;
};

// A status_change event from `from` to `to`.
v1::Event StatusEvent(v1::SessionStatus from, v1::SessionStatus to, const std::string& reason);

}  // namespace sinew::harness
