#include "driver.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "context_builder.h"
#include "json_util.h"
#include "sinew/trace.h"

namespace sinew::harness {
namespace {

// Replaces every secret in every string field of `message`, recursively.
void RedactStrings(google::protobuf::Message* message, const Vault& vault) {
  const auto* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const auto* field : fields) {
    using FD = google::protobuf::FieldDescriptor;
    if (field->cpp_type() == FD::CPPTYPE_STRING) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
          std::string v = reflection->GetRepeatedString(*message, field, i);
          if (vault.Contains(v)) reflection->SetRepeatedString(message, field, i, vault.Redact(v));
        }
      } else {
        std::string v = reflection->GetString(*message, field);
        if (vault.Contains(v)) reflection->SetString(message, field, vault.Redact(v));
      }
    } else if (field->cpp_type() == FD::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
          RedactStrings(reflection->MutableRepeatedMessage(message, field, i), vault);
        }
      } else {
        RedactStrings(reflection->MutableMessage(message, field), vault);
      }
    }
  }
}


// The owner that drove the session last, from its log: the newest resume annotation or
// status change to running ("driven by <owner>"); "" when the log names none.
std::string LastDriver(const std::vector<v1::Event>& log) {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    if (it->has_annotation()) {
      const auto& labels = it->annotation().labels();
      auto kind = labels.find("kind");
      auto owner = labels.find("owner");
      if (kind != labels.end() && kind->second == "resume" && owner != labels.end()) return owner->second;
    }
    if (it->has_status_change() && it->status_change().to() == v1::SESSION_STATUS_RUNNING) {
      constexpr std::string_view kPrefix = "driven by ";
      const std::string& reason = it->status_change().reason();
      if (reason.rfind(kPrefix, 0) == 0) return reason.substr(kPrefix.size());
    }
  }
  return "";
}

// The address part of an owner ("<advertise_url>#<pid>-<random>").
std::string OwnerAddress(const std::string& owner) { return owner.substr(0, owner.find('#')); }

}  // namespace

v1::Event ToolResultEvent(const std::string& call_id, const ToolOutcome& o) {
  v1::Event ev;
  auto* r = ev.mutable_tool_result();
  r->set_call_id(call_id);
  r->set_output(o.output);
  r->set_is_error(o.is_error);
  r->set_exit_status(o.exit_status);
  r->set_signal(o.signal);
  r->set_timed_out(o.timed_out);
  r->set_truncated(o.truncated);
  r->set_duration_ms(o.duration_ms);
  return ev;
}

v1::Event StatusEvent(v1::SessionStatus from, v1::SessionStatus to, const std::string& reason) {
  v1::Event ev;
  ev.mutable_status_change()->set_from(from);
  ev.mutable_status_change()->set_to(to);
  ev.mutable_status_change()->set_reason(reason);
  return ev;
}

SessionDriver::SessionDriver(const HarnessDeps& deps, Pools pools, std::string session_id)
    : deps_(deps), pools_(pools), id_(std::move(session_id)) {}

void SessionDriver::RequestCancel(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancel_requested_ = true;
  cancel_reason_ = std::move(reason);
  wake_requested_ = true;
  abort_ = true;
}

void SessionDriver::PostMessage(std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  inbox_.push_back(std::move(text));
  wake_requested_ = true;
}

void SessionDriver::PostAudit(v1::Event audit) {
  std::lock_guard<std::mutex> lock(mutex_);
  audits_.push_back(std::move(audit));
  wake_requested_ = true;
}

void SessionDriver::RequestWake() {
  std::lock_guard<std::mutex> lock(mutex_);
  wake_requested_ = true;
}

bool SessionDriver::TakeWork() {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool work = wake_requested_ || !inbox_.empty() || !audits_.empty() || cancel_requested_;
  wake_requested_ = false;
  return work;
}

bool SessionDriver::CancelRequested() {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancel_requested_;
}

void SessionDriver::RenewLease() {
  const uint64_t epoch = epoch_.load();
  if (epoch == 0 || fenced_) return;
  auto lease = deps_.store->RenewLease(id_, deps_.owner, epoch,
                                       std::chrono::milliseconds(deps_.config->lease_ttl_ms));
  if (!lease.ok() && lease.status().code() == StatusCode::kAborted) {
    // Released (or released and taken again) by Run while this renewal was in flight:
    // not a lost lease. Run clears epoch_ before it releases.
    if (epoch_.load() != epoch) return;
    spdlog::warn("session {}: lease lost ({}); stopping", id_, lease.status().message());
    fenced_ = true;
    abort_ = true;
    return;
  }
  // A child whose parent no longer waits for it stops (docs/harness.md, "Sub-agents").
  if (const std::string gone = ParentGone(); !gone.empty() && !CancelRequested()) RequestCancel(gone);
}

Task<void> SessionDriver::Run() {
  // Every line this wake logs, and every call it makes, carries the session and its trace
  // (set on this thread, and carried across each wait by async.h).
  LogFields fields;
  fields.session = id_;
  fields.trace_id = TraceIdForSession(id_);
  ReplaceLogFields(std::move(fields));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_requested_ = false;
  }
  if (deps_.stopping->load()) {
    ReplaceLogFields({});
    co_return;
  }
  auto lease = co_await OnStore([&] {
    return deps_.store->AcquireLease(id_, {deps_.owner, deps_.config->advertise_url},
                                     std::chrono::milliseconds(deps_.config->lease_ttl_ms));
  });
  if (!lease.ok()) {
    if (lease.status().code() != StatusCode::kFailedPrecondition) {
      spdlog::warn("session {}: cannot acquire lease: {}", id_, lease.status().ToString());
    }
    ReplaceLogFields({});
    co_return;
  }
  epoch_ = lease->epoch();
  fenced_ = false;
  last_sandbox_use_ = std::chrono::steady_clock::now();
  idle_retry_at_ = {};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_ = cancel_requested_;
  }
  Status s = co_await Drive();
  if (!s.ok()) {
    if (s.code() == StatusCode::kAborted) {
      spdlog::warn("session {}: fenced out: {}", id_, s.message());
    } else {
      spdlog::error("session {}: {}", id_, deps_.vault->Redact(s.ToString()));
      deps_.metrics->Add("sinew_harness_errors_total", "code=\"" + std::string(StatusCodeName(s.code())) + "\"");
    }
  }
  // Cleared before the release, so that a renewal racing with it is not taken for a loss.
  const uint64_t held = epoch_.exchange(0);
  if (!fenced_) (void)co_await OnStore([&] { return deps_.store->ReleaseLease(id_, deps_.owner, held); });
  // The sandbox quota counts sessions driven here; one that is not cannot hold one here.
  if (!tenant_.empty()) deps_.quotas->ReleaseSandbox(tenant_, id_);
  pending_.clear();
  log_.clear();
  log_.shrink_to_fit();
  ReplaceLogFields({});
}

Task<Status> SessionDriver::LoadLog() {
  log_.clear();
  SINEW_CO_RETURN_IF_ERROR(co_await ReadNewEvents());
  if (log_.empty() || !log_.front().has_session_created()) {
    co_return Status::Corruption("session " + id_ + " does not start with session_created");
  }
  state_ = ReadLogState(log_);  // the status too: every change of it is an event
  SetLogSeq(next_seq_ - 1);
  co_return Status::Ok();
}

Task<Status> SessionDriver::ReadNewEvents() {
  const size_t had = log_.size();
  // The stored bytes, decoded once each straight into the log: a remote store sends them
  // without decoding and re-encoding every event (docs/session-store.md).
  while (true) {
    v1::ReadEventBytesRequest req;
    req.set_session_id(id_);
    req.set_from_seq(log_.size() + 1);
    SINEW_CO_ASSIGN_OR_RETURN(v1::ReadEventBytesResponse page,
                              co_await OnStore([&] { return deps_.store->ReadEventBytes(req); }));
    next_seq_ = page.next_seq();
    if (page.events_size() > 0 && page.first_seq() != log_.size() + 1) {
      co_return Status::Corruption("session " + id_ + ": asked for events from " +
                                std::to_string(log_.size() + 1) + ", the store sent them from " +
                                std::to_string(page.first_seq()));
    }
    log_.reserve(log_.size() + static_cast<size_t>(page.events_size()));
    for (int i = 0; i < page.events_size(); ++i) {
      const uint64_t seq = page.first_seq() + static_cast<uint64_t>(i);
      Status decoded = store::DecodeEvent(page.events(i), seq, &log_.emplace_back());
      if (!decoded.ok()) co_return decoded.WithContext("session " + id_);
    }
    if (page.events_size() == 0 || log_.size() + 1 >= next_seq_) break;
  }
  if (had > 0) {
    for (size_t i = had; i < log_.size(); ++i) ApplyEvent(log_[i], static_cast<int>(i), &state_);
    if (log_.size() > had) SetLogSeq(next_seq_ - 1);
  }
  co_return Status::Ok();
}

Task<Status> SessionDriver::AppendOne(v1::Event event) {
  std::vector<v1::Event> events;
  events.push_back(std::move(event));
  co_return co_await Append(std::move(events));
}

Task<Status> SessionDriver::Append(std::vector<v1::Event> events) {
  if (fenced_) co_return Status::Aborted("lease lost");
  if (!pending_.empty()) {
    events.insert(events.begin(), pending_.begin(), pending_.end());
    pending_.clear();
  }
  for (auto& ev : events) RedactStrings(&ev, *deps_.vault);
  Result<v1::AppendResponse> resp = Status::Unavailable("not tried");
  // The log can move under a driver in one way only: a decision on a tool approval,
  // written through the API with the log's next seq as its condition (api_sessions.cc,
  // Decide). Such an append refuses this one (expected_next_seq): read what came, drop
  // the decisions of ours that came too late (the call is decided), and try again.
  for (int round = 0;; ++round) {
    v1::SessionStatus current = state_.status;
    for (auto& ev : events) {
      if (!ev.has_status_change()) continue;
      ev.mutable_status_change()->set_from(current);
      current = ev.status_change().to();
    }
    v1::AppendRequest req;
    req.set_session_id(id_);
    req.set_expected_next_seq(next_seq_);
    req.set_lease_epoch(epoch_);
    req.set_idempotency_key(deps_.owner + ":" + std::to_string(epoch_.load()) + ":" +
                            std::to_string(next_seq_));
    for (const auto& ev : events) *req.add_events() = ev;
    for (int attempt = 0; attempt < 6; ++attempt) {
      resp = co_await OnStore([&] { return deps_.store->Append(req); });
      if (resp.ok()) break;
      const StatusCode code = resp.status().code();
      if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded) break;
      co_await SleepFor(std::chrono::milliseconds(50 << attempt));
    }
    if (resp.ok() || resp.status().code() != StatusCode::kFailedPrecondition || round >= 20) break;
    const uint64_t expected = next_seq_;
    SINEW_CO_RETURN_IF_ERROR(co_await ReadNewEvents());
    if (next_seq_ == expected) break;  // refused for another reason
    std::erase_if(events, [&](const v1::Event& ev) {
      return ev.has_approval_decided() && state_.approval_decided.count(ev.approval_decided().call_id()) > 0;
    });
    if (events.empty()) co_return Status::Ok();
  }
  if (!resp.ok()) {
    if (resp.status().code() == StatusCode::kAborted) {
      fenced_ = true;
      abort_ = true;
    }
    co_return resp.status();
  }
  const int64_t now = NowUnixMs();
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].set_seq(resp->first_seq() + i);
    events[i].set_session_id(id_);
    events[i].set_timestamp_unix_ms(now);
    events[i].set_type(store::EventTypeName(events[i]));
    log_.push_back(std::move(events[i]));
    ApplyEvent(log_.back(), static_cast<int>(log_.size() - 1), &state_);
  }
  next_seq_ = resp->last_seq() + 1;
  SetLogSeq(resp->last_seq());
  deps_.metrics->Add("sinew_harness_events_appended_total", "", static_cast<double>(events.size()));
  co_return Status::Ok();
}

Task<Status> SessionDriver::ReleaseSandbox(const std::string& reason) {
  if (state_.sandbox_id.empty()) co_return Status::Ok();
  deps_.quotas->ReleaseSandbox(tenant_, id_);
  const std::string id = state_.sandbox_id;
  if (AttachesSandbox(task_.sandbox_json)) {
    v1::Event ev;
    ev.mutable_sandbox_released()->set_sandbox_id(id);
    ev.mutable_sandbox_released()->set_reason(reason + " (attached sandbox left to its owner)");
    co_return co_await AppendOne(std::move(ev));
  }
  const SandboxRef box = SandboxOf();
  Status destroyed = co_await Blocking([&] { return deps_.sandboxes->Destroy(box); });
  v1::Event ev;
  ev.mutable_sandbox_released()->set_sandbox_id(id);
  ev.mutable_sandbox_released()->set_reason(destroyed.ok() ? reason : reason + " (destroy failed: " +
                                                                          destroyed.message() + ")");
  co_return co_await AppendOne(std::move(ev));
}

Task<Status> SessionDriver::Finish(v1::SessionStatus to, const std::string& reason,
                             const std::string& error_code, int32_t http_status, bool retryable) {
  const std::string release_reason = "session " + store::SessionStatusName(to);
  SINEW_CO_RETURN_IF_ERROR(co_await ReleaseSandbox(release_reason));
  co_await DropParentSnapshot();
  std::vector<v1::Event> events;
  if (!error_code.empty()) {
    v1::Event ev;
    ev.mutable_error()->set_code(error_code);
    ev.mutable_error()->set_message(reason);
    ev.mutable_error()->set_http_status(http_status);
    ev.mutable_error()->set_retryable(retryable);
    events.push_back(std::move(ev));
  }
  events.push_back(StatusEvent(state_.status, to, reason));
  deps_.metrics->Add("sinew_harness_sessions_finished_total", "status=\"" + store::SessionStatusName(to) + "\"");
  if (!error_code.empty()) deps_.metrics->Add("sinew_harness_errors_total", "code=\"" + error_code + "\"");
  SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
  spdlog::info("session {}: {}: {}", id_, store::SessionStatusName(to), deps_.vault->Redact(reason));
  co_return Status::Ok();
}

Task<Status> SessionDriver::WaitForInput(const std::string& why) {
  // Its sandbox is paused where it can be (files kept, memory and CPU back to the host,
  // not counted in the tenant's max_sandboxes) and resumed by the next call that needs it
  // (ResumeSandbox); otherwise it is released as on completion, and a later message gets
  // a fresh one.
  std::string sandbox_note;
  std::optional<std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
      paused_during;
  if (!state_.sandbox_id.empty() && state_.sandbox_paused) {
    sandbox_note = "; its sandbox " + state_.sandbox_id + " is paused";  // paused while idle
  } else if (!state_.sandbox_id.empty() && !AttachesSandbox(task_.sandbox_json)) {
    if (SnapshotDue()) SINEW_CO_RETURN_IF_ERROR(co_await KeepSnapshot("on_pause"));
    const SandboxRef box = SandboxOf();
    const auto t0 = std::chrono::steady_clock::now();
    Status paused = co_await Blocking([&] { return deps_.sandboxes->Pause(box, /*if_idle=*/false); });
    if (paused.ok()) {
      paused_during = {t0, std::chrono::steady_clock::now()};
      sandbox_note = "; its sandbox " + box.id + " is paused";
    } else {
      SINEW_CO_RETURN_IF_ERROR(
          co_await ReleaseSandbox("session waiting for input; not paused: " + paused.message()));
    }
  } else {
    SINEW_CO_RETURN_IF_ERROR(co_await ReleaseSandbox("session waiting for input"));
  }
  const std::string reason = why + "; waits for input (closes after " + std::to_string(task_.idle_close_seconds) +
                             " s without any)" + sandbox_note;
  v1::Event waiting = StatusEvent(state_.status, v1::SESSION_STATUS_WAITING_FOR_INPUT, reason);
  if (paused_during) {
    std::vector<v1::Event> with;
    with.push_back(std::move(waiting));
    SINEW_CO_RETURN_IF_ERROR(
        co_await RecordPause("waiting_for_input", paused_during->first, paused_during->second, std::move(with)));
  } else {
    SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(waiting)));
  }
  spdlog::info("session {}: waiting for input: {}", id_, reason);
  co_return Status::Ok();
}

Task<Status> SessionDriver::LimitReached(const std::string& limit, uint64_t value) {
  const std::string reason = "limit reached: " + limit + " " + std::to_string(value);
  SINEW_CO_RETURN_IF_ERROR(co_await ReleaseSandbox("session failed"));
  v1::Event ev;
  ev.mutable_error()->set_code("limit_exceeded");
  ev.mutable_error()->set_message(reason);
  ev.mutable_error()->set_limit(limit);
  deps_.metrics->Add("sinew_harness_sessions_finished_total", "status=\"failed\"");
  deps_.metrics->Add("sinew_harness_errors_total", "code=\"limit_exceeded\"");
  std::vector<v1::Event> events;
  events.push_back(std::move(ev));
  events.push_back(StatusEvent(state_.status, v1::SESSION_STATUS_FAILED, reason));
  SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
  spdlog::info("session {}: failed: {}", id_, reason);
  co_return Status::Ok();
}

Task<Result<bool>> SessionDriver::DrainInbox() {
  std::vector<std::string> messages;
  std::vector<v1::Event> events;
  bool cancel = false;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    messages.swap(inbox_);
    events.swap(audits_);
    cancel = cancel_requested_;
    reason = cancel_reason_;
  }
  if (!messages.empty() || !events.empty()) {
    for (auto& text : messages) {
      v1::Event ev;
      ev.mutable_user_message()->set_text(std::move(text));
      events.push_back(std::move(ev));
    }
    SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
  }
  if (cancel && IsTerminal(state_.status) && state_.last_user <= state_.last_status_change) {
    std::lock_guard<std::mutex> lock(mutex_);  // nothing left to cancel
    cancel_requested_ = false;
    abort_ = false;
    co_return false;
  }
  if (cancel) {
    spdlog::info("session {}: cancel requested ({})", id_, reason.empty() ? "no reason given" : reason);
    // Named, not a temporary of a conditional inside the co_await: GCC 12 destroys such a
    // temporary twice (docs/harness.md, "How sessions are driven").
    const std::string why = reason.empty() ? "cancelled" : reason;
    SINEW_CO_RETURN_IF_ERROR(co_await Finish(v1::SESSION_STATUS_CANCELLED, why));
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_requested_ = false;
    abort_ = false;
  }
  co_return cancel;
}

Task<Status> SessionDriver::Drive() {
  SINEW_CO_RETURN_IF_ERROR(co_await LoadLog());
  SINEW_CO_ASSIGN_OR_RETURN(task_, TaskFromJson(log_.front().session_created().task_json(), *deps_.config));
  const uint64_t last_seq = next_seq_ - 1;
  tenant_ = log_.front().session_created().tenant();
  if (!task_.parent.session_id.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      parent_ = task_.parent;
    }
    // Its parent may have ended while nobody drove this child (a crash, a cancel).
    const std::string gone = co_await OnStore([&] { return ParentGone(); });
    if (!gone.empty() && !IsTerminal(state_.status)) RequestCancel(gone);
  }
  // A sandbox it holds from before (a resumed session) counts against the tenant's quota.
  if (!state_.sandbox_id.empty()) deps_.quotas->AcquireSandbox(tenant_, id_, true);
  if (state_.status == v1::SESSION_STATUS_RUNNING) {
    const std::string previous = LastDriver(log_);
    spdlog::info("session {}: resumed by {} at lease epoch {} after seq {}: lease taken over from {} (at {}), "
                 "whose driver stopped or crashed",
                 id_, deps_.owner, epoch_.load(), last_seq, previous.empty() ? "an unnamed driver" : previous,
                 previous.empty() ? "unknown" : OwnerAddress(previous));
    LogInterruptedModelCall();
    // Another harness (or an earlier life of this one) was driving it: say who resumes.
    v1::Event resumed;
    auto* a = resumed.mutable_annotation();
    a->set_author("harness");
    a->set_text("resumed by " + deps_.owner + " at lease epoch " + std::to_string(epoch_.load()));
    (*a->mutable_labels())["kind"] = "resume";
    (*a->mutable_labels())["owner"] = deps_.owner;
    SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(resumed)));
  } else {
    spdlog::info("session {}: woken ({}) at lease epoch {}; continuing after seq {}", id_,
                 store::SessionStatusName(state_.status), epoch_.load(), last_seq);
  }
  if (state_.last_user < 0 && !task_.prompt.empty()) {
    // The harness that created the session died before writing the task's message.
    v1::Event task;
    task.mutable_user_message()->set_text(task_.prompt);
    pending_.push_back(std::move(task));
    state_.last_user = static_cast<int>(log_.size());  // where it will land
  }
  while (true) {
    if (deps_.stopping->load()) co_return Status::Ok();
    if (fenced_) co_return Status::Aborted("lease lost");
    SINEW_CO_ASSIGN_OR_RETURN(bool cancelled, co_await DrainInbox());
    if (cancelled) co_return Status::Ok();
    // An interrupt is answered with a message: a session that waits for input or ended
    // goes on with it like with any message.
    if (Interrupting()) SINEW_CO_RETURN_IF_ERROR(co_await AnswerInterrupts());
    // A conversation that stays open, with no input since it began to wait: closed, idle
    // past its limit, or left as it is (docs/harness.md, "Conversations that stay open").
    if (state_.status == v1::SESSION_STATUS_WAITING_FOR_INPUT && state_.last_user <= state_.last_status_change) {
      if (state_.close_requested > state_.last_status_change) {
        co_return co_await Finish(v1::SESSION_STATUS_COMPLETED, "closed by the user");
      }
      // From the recorded time of the last event, so the limit holds across crashes.
      const int64_t idle_ms = NowUnixMs() - log_.back().timestamp_unix_ms();
      if (idle_ms >= static_cast<int64_t>(task_.idle_close_seconds) * 1000) {
        const std::string why =
            "closed after " + std::to_string(task_.idle_close_seconds) + " s without input (idle_close_seconds)";
        co_return co_await Finish(v1::SESSION_STATUS_COMPLETED, why);
      }
      co_return Status::Ok();
    }
    // A finished session continues only for input that came after it finished.
    if (IsTerminal(state_.status) && state_.last_user <= state_.last_status_change) {
      co_return Status::Ok();
    }
    const bool running_pending = std::any_of(pending_.begin(), pending_.end(),
                                             [](const v1::Event& e) { return e.has_status_change(); });
    // A session waiting for tool call decisions goes back to running once they are made
    // (RunPendingTools).
    if (state_.status != v1::SESSION_STATUS_RUNNING && state_.status != v1::SESSION_STATUS_REQUIRES_ACTION &&
        !running_pending) {
      pending_.push_back(StatusEvent(state_.status, v1::SESSION_STATUS_RUNNING, "driven by " + deps_.owner));
    }
    SINEW_CO_RETURN_IF_ERROR(co_await RunPendingTools());
    if (CancelRequested() || Interrupting()) continue;
    if (deps_.stopping->load()) co_return Status::Ok();
    if (fenced_) co_return Status::Aborted("lease lost");
    bool need_model = state_.last_response < 0 || state_.last_user > state_.last_response;
    std::string stop_reason;
    if (!need_model) {
      const auto& r = log_[state_.last_response].model_response();
      need_model = r.tool_calls_size() > 0;
      stop_reason = r.stop_reason();
    }
    if (!need_model) {
      const std::string why = "the model ended its turn (" + stop_reason + ")";
      if (task_.keep_open && state_.close_requested < 0) co_return co_await WaitForInput(why);
      const std::string closed = state_.close_requested >= 0 ? why + "; closed by the user" : why;
      co_return co_await Finish(v1::SESSION_STATUS_COMPLETED, closed);
    }
    // Limits, checked before each model call.
    if (state_.turns >= task_.max_turns) co_return co_await LimitReached("max_turns", task_.max_turns);
    if (state_.output_tokens >= task_.max_output_tokens) {
      co_return co_await LimitReached("max_output_tokens", task_.max_output_tokens);
    }
    const int64_t age_ms = NowUnixMs() - log_.front().timestamp_unix_ms();
    if (age_ms > static_cast<int64_t>(task_.max_wall_seconds) * 1000) {
      co_return co_await LimitReached("max_wall_seconds", task_.max_wall_seconds);
    }
    SINEW_CO_ASSIGN_OR_RETURN(bool may_call, co_await WaitForTokenBudget());
    if (!may_call) continue;
    SINEW_CO_RETURN_IF_ERROR(co_await CallModel());
  }
}

void SessionDriver::LogInterruptedModelCall() const {
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    if (it->has_model_response()) return;
    if (it->has_model_request()) {
      spdlog::info("session {}: model call {} (turn {}, seq {}) was under way when the session was last left; "
                   "its answer is lost and the model is asked again",
                   id_, it->model_request().request_id(), it->model_request().turn(), it->seq());
      return;
    }
  }
}

Task<Result<bool>> SessionDriver::WaitForTokenBudget() {
  auto retry = deps_.quotas->TokensRetryAfter(tenant_);
  if (!retry) co_return true;
  const uint64_t limit = deps_.quotas->QuotaOf(tenant_).tokens_per_minute;
  spdlog::info("session {}: tenant {} is over tokens_per_minute {}; the model call waits", id_, tenant_, limit);
  v1::Event note;
  auto* a = note.mutable_annotation();
  a->set_author("harness");
  a->set_text("model call deferred: tenant '" + tenant_ + "' used " +
              std::to_string(deps_.quotas->TokensInLastMinute(tenant_)) + " model tokens in the last minute (" +
              "tokens_per_minute " + std::to_string(limit) + "); next try in about " + std::to_string(*retry) + " s");
  (*a->mutable_labels())["kind"] = "quota_wait";
  (*a->mutable_labels())["quota"] = "tokens_per_minute";
  SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(note)));
  while (deps_.quotas->TokensRetryAfter(tenant_)) {
    if (deps_.stopping->load() || fenced_ || CancelRequested() || Interrupting()) co_return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!inbox_.empty() || !audits_.empty()) co_return false;  // drain them, then wait again
    }
    co_await SleepFor(std::chrono::milliseconds(200));
  }
  co_return true;
}

Task<Status> SessionDriver::RunPendingTools() {
  if (state_.last_response < 0) co_return Status::Ok();
  // Copy: appends may reallocate log_.
  const v1::ModelResponse response = log_[state_.last_response].model_response();
  SINEW_CO_ASSIGN_OR_RETURN(bool decided, co_await AwaitApprovals(response));
  // A cancel still gives each call its result below.
  if (!decided && !CancelRequested()) co_return Status::Ok();
  if (decided && state_.status == v1::SESSION_STATUS_REQUIRES_ACTION &&
      std::none_of(pending_.begin(), pending_.end(), [](const v1::Event& e) { return e.has_status_change(); })) {
    pending_.push_back(StatusEvent(state_.status, v1::SESSION_STATUS_RUNNING, "tool call decisions made"));
  }
  for (const auto& spec : response.tool_calls()) {
    if (state_.finished.count(spec.call_id())) continue;
    if (fenced_) co_return Status::Aborted("lease lost");
    if (deps_.stopping->load()) co_return Status::Ok();
    // The calls left get their results when the interrupt is answered (AnswerInterrupts).
    if (Interrupting() && !CancelRequested()) co_return Status::Ok();
    if (CancelRequested()) {
      ToolOutcome o;
      o.is_error = true;
      o.output = "cancelled before it ran";
      v1::Event call;
      call.mutable_tool_call()->set_call_id(spec.call_id());
      call.mutable_tool_call()->set_tool_name(spec.name());
      call.mutable_tool_call()->set_input_json(spec.input_json());
      std::vector<v1::Event> events;
      if (!state_.started.count(spec.call_id())) events.push_back(std::move(call));
      events.push_back(ToolResultEvent(spec.call_id(), o));
      SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
      continue;
    }
    if (!state_.started.count(spec.call_id())) {
      if (auto denial = DenialOf(spec)) {
        ToolOutcome o;
        o.is_error = true;
        o.output = *denial;
        v1::Event call;
        call.mutable_tool_call()->set_call_id(spec.call_id());
        call.mutable_tool_call()->set_tool_name(spec.name());
        call.mutable_tool_call()->set_input_json(spec.input_json());
        std::vector<v1::Event> events;
        events.push_back(std::move(call));
        events.push_back(ToolResultEvent(spec.call_id(), o));
        deps_.metrics->Add("sinew_harness_tool_calls_denied_total", "tool=\"" + spec.name() + "\"");
        SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
        continue;
      }
    }
    // The sandbox's call id: unique in the session even when a model reuses its ids.
    SINEW_CO_RETURN_IF_ERROR(co_await ExecuteCall(spec, state_.started.count(spec.call_id()) > 0,
                                                  response.request_id() + "/" + spec.call_id()));
  }
  co_return Status::Ok();
}

}  // namespace sinew::harness
