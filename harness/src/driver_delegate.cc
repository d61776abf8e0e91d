// SessionDriver's sub-agents (docs/harness.md, "Sub-agents"). A delegate call is written
// ahead like any call, naming its child, whose id is derived from the call; the child is
// created only after that, and a create repeated after a crash is refused by the store
// (the id is taken), so each call has exactly one child. The parent's driver then waits
// for the child to end, polling its status with no thread held, and records its answer
// as the call's result. The child watches its parent (ParentGone): once the parent has
// ended or recorded a result for the call (a cancel, an interrupt), the child cancels
// itself, and its own children follow it the same way.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "delegate.h"
#include "driver.h"
#include "json_util.h"
#include "sandbox_common.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/utf8.h"
#include "tool_catalog.h"

namespace sinew::harness {
namespace {

// How often a parent looks at its child's status while it waits.
constexpr auto kChildPoll = std::chrono::milliseconds(200);

v1::Event ErrorResult(const std::string& call_id, const std::string& child_id, const std::string& text,
                      bool user_interrupted) {
  ToolOutcome o;
  o.is_error = true;
  o.output = text;
  v1::Event ev = ToolResultEvent(call_id, o);
  ev.mutable_tool_result()->set_child_session_id(child_id);
  ev.mutable_tool_result()->set_user_interrupted(user_interrupted);
  return ev;
}

}  // namespace

Task<Status> SessionDriver::Delegate(const v1::ToolCallSpec& spec, bool started_before, const std::string& call_key,
                                     v1::Event call) {
  const std::string child_id = ChildSessionId(id_, call_key);
  if (!started_before) {
    std::string refusal;
    if (state_.children.size() >= task_.delegate.max_children) {
      refusal = "this session has started its max_children of " + std::to_string(task_.delegate.max_children) +
                " sub-agents; no more can be started";
    }
    if (refusal.empty()) {
      // Checked before the call is written, so that a refused call creates nothing.
      DelegateBudget budget;
      budget.output_tokens = task_.max_output_tokens > state_.output_tokens
                                 ? task_.max_output_tokens - state_.output_tokens : 0;
      const int64_t age_s = (NowUnixMs() - log_.front().timestamp_unix_ms()) / 1000;
      budget.wall_seconds = static_cast<uint32_t>(std::max<int64_t>(0, task_.max_wall_seconds - age_s));
      auto child = ChildTask(spec.input_json(), task_, budget, *deps_.config);
      if (!child.ok()) refusal = child.status().message();
    }
    if (!refusal.empty()) {
      std::vector<v1::Event> events;
      events.push_back(std::move(call));
      ToolOutcome o;
      o.is_error = true;
      o.output = "delegate: " + refusal;
      events.push_back(ToolResultEvent(spec.call_id(), o));
      co_return co_await Append(std::move(events));
    }
    call.mutable_tool_call()->set_child_session_id(child_id);
    SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(call)));
  }
  // The seq of the call's tool_call (the newest one with this id: a model may reuse ids).
  uint64_t call_seq = 0;
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    if (it->has_tool_call() && it->tool_call().call_id() == spec.call_id()) {
      call_seq = it->seq();
      break;
    }
  }
  std::string refusal;
  SINEW_CO_ASSIGN_OR_RETURN(bool created, co_await EnsureChild(spec, child_id, call_seq, &refusal));
  if (!refusal.empty()) {
    co_return co_await AppendOne(ErrorResult(spec.call_id(), "", "delegate: " + refusal, false));
  }
  spdlog::info("session {}: call {} waits for its sub-agent {}{}", id_, spec.call_id(), child_id,
               created ? " (created)" : " (found)");
  while (true) {
    // Left without a result: the next wake resumes the wait on the same child.
    if (deps_.stopping->load() || fenced_) co_return Status::Ok();
    if (CancelRequested()) {
      co_return co_await AppendOne(ErrorResult(
          spec.call_id(), child_id,
          "cancelled with this session before the sub-agent " + child_id + " ended; it is cancelled too", false));
    }
    if (Interrupting()) {
      co_return co_await AppendOne(ErrorResult(
          spec.call_id(), child_id,
          "[interrupted by the user: the call was stopped]\nthe sub-agent " + child_id + " is cancelled", true));
    }
    auto meta = co_await OnStore([&] { return deps_.store->GetSession(child_id); });
    if (meta.ok() && IsTerminal(meta->status())) {
      std::vector<v1::Event> child_log;
      uint64_t from = 1;
      Status read = Status::Ok();
      while (read.ok()) {
        v1::GetEventsRequest req;
        req.set_session_id(child_id);
        req.set_from_seq(from);
        req.set_limit(1000);
        auto page = co_await OnStore([&] { return deps_.store->GetEvents(req); });
        if (!page.ok()) {
          read = page.status();
          break;
        }
        if (page->events_size() == 0) break;
        for (auto& ev : *page->mutable_events()) child_log.push_back(std::move(ev));
        from = child_log.back().seq() + 1;
        if (from >= page->next_seq()) break;
      }
      if (read.ok()) {
        v1::Event result = ChildResultEvent(spec.call_id(), child_id, child_log);
        deps_.metrics->Add("sinew_harness_tool_calls_total", "tool=\"delegate\",error=\"" +
                                                                 std::string(result.tool_result().is_error() ? "true" : "false") +
                                                                 "\"");
        co_return co_await AppendOne(std::move(result));
      }
      spdlog::warn("session {}: reading sub-agent {}: {}", id_, child_id, read.ToString());
    } else if (!meta.ok() && meta.status().code() != StatusCode::kUnavailable) {
      spdlog::warn("session {}: looking at sub-agent {}: {}", id_, child_id, meta.status().ToString());
    }
    co_await SleepFor(kChildPoll);
  }
}

Task<Result<bool>> SessionDriver::EnsureChild(const v1::ToolCallSpec& spec, const std::string& child_id,
                                              uint64_t call_seq, std::string* refusal) {
  auto existing = co_await OnStore([&] { return deps_.store->GetSession(child_id); });
  if (existing.ok()) {
    if (!IsTerminal(existing->status()) && deps_.wake) deps_.wake(child_id);
    co_return false;
  }
  if (existing.status().code() != StatusCode::kNotFound) co_return existing.status();
  // Not there yet (the driver that wrote the call may have died before creating it): the
  // same task as then, from what the parent has left now.
  DelegateBudget budget;
  // The call's own child is not in the log yet, so its tokens are not counted twice.
  budget.output_tokens =
      task_.max_output_tokens > state_.output_tokens ? task_.max_output_tokens - state_.output_tokens : 0;
  const int64_t age_s = (NowUnixMs() - log_.front().timestamp_unix_ms()) / 1000;
  budget.wall_seconds = static_cast<uint32_t>(std::max<int64_t>(0, task_.max_wall_seconds - age_s));
  bool fork = false;
  auto child = ChildTask(spec.input_json(), task_, budget, *deps_.config, &fork);
  if (!child.ok()) {
    *refusal = child.status().message();
    co_return false;
  }
  child->parent = ParentRef{id_, spec.call_id(), call_seq, "", ""};
  if (fork) {
    // A driver that dies between the snapshot and the create leaves that snapshot behind
    // (docs/harness.md, "Sub-agents"); the one that resumes the call takes another.
    SINEW_CO_RETURN_IF_ERROR(co_await SnapshotForChild(&child->parent, refusal));
    if (!refusal->empty()) co_return false;
  }
  child->prompt = deps_.vault->Redact(child->prompt);
  v1::CreateSessionRequest req;
  req.set_tenant(tenant_);
  req.set_routed_session_id(child_id);
  req.set_parent_session_id(id_);
  req.set_parent_call_id(spec.call_id());
  req.set_title(deps_.vault->Redact(child->title.empty() ? "sub-agent of " + id_.substr(0, 8) + ": " +
                                                               std::string(Utf8Prefix(child->prompt, 60))
                                                         : child->title));
  req.set_task_json(TaskToJson(*child));
  req.set_initial_status(v1::SESSION_STATUS_QUEUED);
  auto created = co_await OnStore([&] { return deps_.store->CreateSession(req); });
  if (!created.ok() && created.status().code() == StatusCode::kInvalidArgument) {
    // The store refuses this task (a title or prompt over its limits): for the model.
    *refusal = "the sub-agent could not be created: " + created.status().message();
    co_return false;
  }
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) co_return created.status();
  if (created.ok()) deps_.metrics->Add("sinew_harness_sessions_created_total", "");
  if (deps_.wake) deps_.wake(child_id);
  co_return created.ok();
}

Task<Status> SessionDriver::SnapshotForChild(ParentRef* parent, std::string* refusal) {
  if (state_.sandbox_id.empty()) co_return Status::Ok();
  // A conversation that waited for input left its sandbox paused: it comes back first (or
  // is lost, and then there is nothing to copy).
  SINEW_CO_RETURN_IF_ERROR(co_await ResumeSandbox(*FindTool("bash"), /*started_before=*/false));
  if (state_.sandbox_id.empty()) co_return Status::Ok();
  const SandboxRef box = SandboxOf();
  auto snap = co_await Blocking([&] { return SnapshotSessionSandbox(*deps_.sandboxes, box); });
  if (!snap.ok()) {
    *refusal = "this session's sandbox could not be copied for the sub-agent: " + snap.status().message();
    co_return Status::Ok();
  }
  spdlog::info("session {}: sandbox {} copied for a sub-agent as {} ({} bytes of data, frozen {} ms)", id_, box.id,
               snap->id(), snap->data_bytes(), snap->duration_ms());
  parent->sandbox_snapshot = snap->id();
  parent->snapshot_host_address = box.host_address;
  co_return Status::Ok();
}

Task<void> SessionDriver::DropParentSnapshot() {
  const std::string snapshot = task_.parent.sandbox_snapshot;
  if (snapshot.empty()) co_return;
  auto deleted = co_await Blocking(
      [&] { return DeleteSessionSnapshot(*deps_.sandboxes, task_.parent.snapshot_host_address, snapshot); });
  if (!deleted.ok() && deleted.status().code() != StatusCode::kNotFound) {
    spdlog::warn("session {}: the snapshot {} of its parent's sandbox was not deleted: {}", id_, snapshot,
                 deleted.status().ToString());
  }
}

std::string SessionDriver::ParentGone() {
  ParentRef parent;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (parent_.session_id.empty()) return "";
    parent = parent_;
  }
  std::lock_guard<std::mutex> check(parent_check_mutex_);
  auto meta = deps_.store->GetSession(parent.session_id);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kNotFound) {
      return "cancelled: its parent session " + parent.session_id + " no longer exists";
    }
    return "";  // the store does not answer now: look again next time
  }
  if (IsTerminal(meta->status())) {
    return "cancelled: its parent session " + parent.session_id + " is " + store::SessionStatusName(meta->status());
  }
  // Only what the parent wrote since the last look can hold the call's result.
  if (meta->next_seq() == parent_seen_next_seq_) return "";
  uint64_t from = std::max<uint64_t>(parent.call_seq + 1, 1);
  while (from < meta->next_seq()) {
    v1::GetEventsRequest req;
    req.set_session_id(parent.session_id);
    req.set_from_seq(from);
    req.set_limit(1000);
    auto page = deps_.store->GetEvents(req);
    if (!page.ok()) return "";
    for (const auto& ev : page->events()) {
      if (ev.has_tool_result() && ev.tool_result().call_id() == parent.call_id) {
        return "cancelled: its parent session " + parent.session_id + " stopped waiting for it (" +
               ev.tool_result().output().substr(0, ev.tool_result().output().find('\n')) + ")";
      }
    }
    if (page->events_size() == 0) break;
    from = page->events(page->events_size() - 1).seq() + 1;
  }
  parent_seen_next_seq_ = meta->next_seq();
  return "";
}

}  // namespace sinew::harness
