// SessionDriver's two effects: a model call and a tool call, each written ahead.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>

#include "context_builder.h"
#include "driver.h"
#include "json_util.h"

namespace sinew::harness {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

}  // namespace

v1::Event SessionDriver::Interrupted(const v1::ToolCallSpec& spec, const std::string& text) {
  deps_.metrics->Add("sinew_harness_tool_calls_interrupted_total", "tool=\"" + spec.name() + "\"");
  spdlog::info("session {}: call {} ({}) recorded as interrupted: {}", id_, spec.call_id(), spec.name(), text);
  v1::Event ev;
  auto* r = ev.mutable_tool_result();
  r->set_call_id(spec.call_id());
  r->set_interrupted(true);
  r->set_is_error(true);
  r->set_output(text);
  return ev;
}

Task<SessionDriver::LostSandbox> SessionDriver::LoseSandbox(Status transport_error) {
  const SandboxRef box = SandboxOf();
  auto [how, detail] = co_await Blocking([&] { return deps_.sandboxes->HowItEnded(box); });
  v1::Event lost;
  lost.mutable_sandbox_lost()->set_sandbox_id(state_.sandbox_id);
  lost.mutable_sandbox_lost()->set_outcome(how);
  lost.mutable_sandbox_lost()->set_detail(detail.empty() ? transport_error.message() : detail);
  if (!AttachesSandbox(task_.sandbox_json)) (void)co_await Blocking([&] { return deps_.sandboxes->Destroy(box); });
  deps_.metrics->Add("sinew_harness_sandbox_lost_total", "outcome=\"" + how + "\"");
  co_return LostSandbox{std::move(lost), std::move(how), std::move(detail)};
}

SandboxRef SessionDriver::SandboxOf() const {
  return SandboxRef{state_.sandbox_id, state_.sandbox_host_id, state_.sandbox_host_address};
}

Task<Status> SessionDriver::DropSandboxOfLostHost(const ToolInfo& tool, bool started_before) {
  // A call already under way is asked for below, and comes back lost from a gone host.
  if (!tool.needs_sandbox || state_.sandbox_id.empty() || started_before) co_return Status::Ok();
  if (deps_.sandboxes->HostAlive(SandboxOf())) co_return Status::Ok();
  // The call has not run: record the loss, and the call runs on a fresh sandbox elsewhere.
  auto lost = co_await LoseSandbox(Status::Unavailable("its host left the cluster"));
  co_return co_await AppendOne(std::move(lost.event));
}

Task<Status> SessionDriver::ResumeSandbox(const ToolInfo& tool, bool started_before) {
  if (!tool.needs_sandbox || state_.sandbox_id.empty() || ready_sandbox_ == state_.sandbox_id ||
      AttachesSandbox(task_.sandbox_json)) {
    co_return Status::Ok();
  }
  const SandboxRef box = SandboxOf();
  const auto t0 = Clock::now();
  Result<bool> resumed = co_await Blocking([&] { return deps_.sandboxes->Resume(box); });
  ready_sandbox_ = box.id;
  if (resumed.ok()) {
    (void)deps_.quotas->AcquireSandbox(tenant_, id_, /*force=*/true);  // it exists: counted
    // It was running (a new wake's first call); or it was paused, perhaps by a driver that
    // died before it could log the pause.
    if (!*resumed) co_return Status::Ok();
    deps_.metrics->Add("sinew_harness_sandbox_resumes_total", "");
    v1::Event ev;
    ev.mutable_sandbox_resumed()->set_sandbox_id(box.id);
    ev.mutable_sandbox_resumed()->set_resume_ms(MsSince(t0));
    co_return co_await AppendOne(std::move(ev));
  }
  spdlog::warn("session {}: sandbox {} could not be resumed: {}", id_, box.id, resumed.status().message());
  // A call already under way is asked for below, and comes back lost.
  if (started_before) co_return Status::Ok();
  auto lost = co_await LoseSandbox(resumed.status());
  co_return co_await AppendOne(std::move(lost.event));
}

Task<Status> SessionDriver::ExecuteCall(const v1::ToolCallSpec& spec, bool started_before,
                                        const std::string& sandbox_call_id) {
  v1::Event call;
  auto* tc = call.mutable_tool_call();
  tc->set_call_id(spec.call_id());
  tc->set_tool_name(spec.name());
  tc->set_input_json(spec.input_json());
  const ToolInfo* info = FindTool(spec.name());
  bool allowed = info != nullptr && (task_.tools.empty() || std::find(task_.tools.begin(), task_.tools.end(),
                                                                      spec.name()) != task_.tools.end());
  if (allowed && info->needs_sandbox && !deps_.sandboxes->configured()) allowed = false;
  const bool delegate = spec.name() == kDelegateTool;
  if (allowed && delegate && !task_.delegate.enabled) allowed = false;
  if (!allowed) {
    ToolOutcome o;
    o.is_error = true;
    std::string names;
    for (const auto& d : ToolDefinitionsFor()) names += (names.empty() ? "" : ", ") + d.name;
    o.output = "tool '" + spec.name() + "' is not available in this session; available tools: " + names;
    if (delegate && !task_.parent.session_id.empty()) {
      o.output += " (this session is a sub-agent at its parent's max_depth: it cannot start sub-agents)";
    }
    std::vector<v1::Event> events;
    if (!started_before) events.push_back(std::move(call));
    events.push_back(ToolResultEvent(spec.call_id(), o));
    co_return co_await Append(std::move(events));
  }
  const bool idempotent = CallIsIdempotent(*info, spec.input_json());
  tc->set_idempotent(idempotent);
  if (delegate) co_return co_await Delegate(spec, started_before, sandbox_call_id, std::move(call));
  if (started_before && !idempotent &&
      !(info->needs_sandbox && !state_.sandbox_id.empty())) {
    // It may or may not have taken effect, and nothing can tell: never run it again behind
    // the model's back. (A call in a sandbox that still lives is asked for below: the
    // sandbox ran it exactly once and kept its result.)
    co_return co_await AppendOne(Interrupted(spec, "interrupted: the harness stopped while this call ran; it may or "
                                                   "may not have taken effect"));
  }
  SINEW_CO_RETURN_IF_ERROR(co_await DropSandboxOfLostHost(*info, started_before));
  SINEW_CO_RETURN_IF_ERROR(co_await ResumeSandbox(*info, started_before));
  if (info->needs_sandbox && state_.sandbox_id.empty() && !deps_.quotas->AcquireSandbox(tenant_, id_)) {
    // The tenant's sandbox quota (docs/security.md): the call runs nowhere; the model hears why.
    ToolOutcome o;
    o.is_error = true;
    o.output = "quota: tenant '" + tenant_ + "' already has " + std::to_string(deps_.quotas->SandboxesHeld(tenant_)) +
               " sessions with a sandbox (max_sandboxes " +
               std::to_string(deps_.quotas->QuotaOf(tenant_).max_sandboxes) +
               "); this call did not run. Try again after another of the tenant's sessions ends.";
    std::vector<v1::Event> events;
    if (!started_before) events.push_back(std::move(call));
    events.push_back(ToolResultEvent(spec.call_id(), o));
    co_return co_await Append(std::move(events));
  }
  if (info->needs_sandbox && state_.sandbox_id.empty()) {
    const auto t0 = Clock::now();
    std::string from_snapshot;
    auto box = co_await ProvisionSandbox(&from_snapshot);
    deps_.metrics->Add("sinew_harness_sandbox_provisions_total", box.ok() ? "outcome=\"ok\"" : "outcome=\"error\"");
    deps_.metrics->Observe("sinew_harness_sandbox_provision_seconds", "", MsSince(t0) / 1000.0);
    if (!box.ok()) {
      deps_.quotas->ReleaseSandbox(tenant_, id_);
      ToolOutcome o;
      o.is_error = true;
      o.output = "could not provision a sandbox for this tool: " + box.status().message();
      std::vector<v1::Event> events;
      if (!started_before) events.push_back(std::move(call));
      events.push_back(ToolResultEvent(spec.call_id(), o));
      co_return co_await Append(std::move(events));
    }
    ready_sandbox_ = box->id;
    v1::Event ev;
    auto* p = ev.mutable_sandbox_provisioned();
    p->set_sandbox_id(box->id);
    p->set_endpoint(box->endpoint);
    p->set_resources_json(box->resources_json);
    p->set_provision_ms(box->provision_ms);
    p->set_from_warm_pool(box->from_warm_pool);
    p->set_host_id(box->host_id);
    p->set_host_address(box->host_address);
    p->set_placement_us(box->placement_us);
    p->set_from_snapshot(from_snapshot);
    if (Status recorded = co_await AppendOne(std::move(ev)); !recorded.ok()) {
      // Not in the log, so no wake will ever find it (this driver was fenced out, or the
      // store failed): destroy it now rather than leave it running until its lifetime ends.
      const SandboxRef orphan{box->id, box->host_id, box->host_address};
      (void)co_await Blocking([&] { return deps_.sandboxes->Destroy(orphan); });
      deps_.quotas->ReleaseSandbox(tenant_, id_);
      co_return recorded;
    }
  }
  if (info->needs_sandbox) tc->set_sandbox_id(state_.sandbox_id);
  if (!started_before) SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(call));
  const auto t0 = Clock::now();
  ToolOutcome outcome;
  std::vector<v1::Event> after;
  if (started_before) {
    spdlog::info("session {}: call {} ({}) was under way when the session was last left; {}", id_,
                 spec.call_id(), spec.name(),
                 info->needs_sandbox ? "asking its sandbox for the result (a sandbox runs a call once)"
                                     : "running it again (idempotent)");
  }
  if (!info->needs_sandbox) {
    outcome = co_await AwaitCallback<ToolOutcome>([&](ProxyTools::Done done) {
      deps_.proxy->ExecuteAsync(spec.name(), spec.input_json(), &abort_, std::move(done));
    });
    // Cut short by a stop: leave the call pending; the next wake decides (idempotent or
    // interrupted), exactly as after a crash.
    if (deps_.stopping->load() || fenced_) co_return Status::Ok();
  } else {
    // The same call id as before a crash: the sandbox answers with the result of the run
    // that is already under way or done, and never runs it twice.
    const SandboxRef box = SandboxOf();
    // Connecting may block (once per sandbox); the call itself holds no thread while the
    // tool runs.
    Status connected = co_await Blocking([&] { return deps_.sandboxes->Connect(box); });
    Result<ToolOutcome> r = connected;
    if (connected.ok()) {
      {
        // From here an interrupt stops the call in the sandbox (RequestInterrupt).
        std::lock_guard<std::mutex> lock(mutex_);
        running_call_ = RunningCall{box, sandbox_call_id};
      }
      // One that came before (or one from the log, when this call resumes): stopped as it
      // starts (the sandbox remembers the id).
      if (Interrupting()) (void)co_await Blocking([&] { return deps_.sandboxes->CancelCall(box, sandbox_call_id); });
      r = co_await AwaitCallback<Result<ToolOutcome>>([&](SandboxBackend::ExecuteDone done) {
        deps_.sandboxes->ExecuteAsync(box, sandbox_call_id, spec.name(), spec.input_json(), std::move(done));
      });
      std::lock_guard<std::mutex> lock(mutex_);
      running_call_.reset();
    }
    if (r.ok()) {
      outcome = std::move(r).value();
    } else {
      auto [lost, how, detail] = co_await LoseSandbox(r.status());
      after.push_back(std::move(lost));
      if (started_before && !idempotent) {
        // The sandbox is gone with the call's result: it may or may not have taken effect.
        after.push_back(Interrupted(spec, "interrupted: the harness stopped while this call ran and its "
                                          "sandbox is gone; it may or may not have taken effect"));
        co_return co_await Append(std::move(after));
      }
      outcome.is_error = true;
      outcome.output = "the sandbox was lost (" + how + (detail.empty() ? "" : ": " + detail) +
                       "); its files are gone. The next tool call gets a fresh sandbox.";
    }
  }
  if (outcome.duration_ms == 0) outcome.duration_ms = MsSince(t0);
  if (info->needs_sandbox) {
    last_sandbox_use_ = Clock::now();  // the idle timer counts from here
    idle_retry_at_ = {};
  }
  deps_.metrics->Add("sinew_harness_tool_calls_total",
                     "tool=\"" + spec.name() + "\",error=\"" + (outcome.is_error ? "true" : "false") + "\"");
  deps_.metrics->Observe("sinew_harness_tool_seconds", "tool=\"" + spec.name() + "\"", MsSince(t0) / 1000.0);
  after.push_back(ToolResultEvent(spec.call_id(), outcome));
  if (Interrupting()) MarkUserInterrupted(&after.back());
  SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(after)));
  // per_call: the sandbox as this call left it (a driver that died before this takes it
  // before its next model call instead: CallModel).
  if (task_.snapshots == SnapshotPolicy::kPerCall && SnapshotDue()) {
    co_return co_await KeepSnapshot("per_call", spec.call_id());
  }
  co_return Status::Ok();
}

std::vector<ToolDefinition> SessionDriver::ToolDefinitionsFor() const {
  std::vector<ToolDefinition> out;
  if (!deps_.config->models.at(task_.model).tools) return out;
  for (auto& d : ToolDefinitions(task_.tools)) {
    const ToolInfo* info = FindTool(d.name);
    if (info != nullptr && info->needs_sandbox && !deps_.sandboxes->configured()) continue;
    if (d.name == kDelegateTool && !task_.delegate.enabled) continue;
    out.push_back(std::move(d));
  }
  return out;
}

Task<Status> SessionDriver::CallModel() {
  // per_call: a driver that died between a call's result and its snapshot left one due.
  if (task_.snapshots == SnapshotPolicy::kPerCall && SnapshotDue()) {
    SINEW_CO_RETURN_IF_ERROR(co_await KeepSnapshot("per_call"));
  }
  const ModelEndpointConfig& mc = deps_.config->models.at(task_.model);
  const auto& client = deps_.models->at(task_.model);
  ModelCall call;
  call.model = mc.model;
  call.system = task_.system;
  call.tools = ToolDefinitionsFor();
  call.turn = state_.turns;
  call.max_wall_seconds = task_.max_wall_seconds;
  call.session_id = id_;
  // Forks of one session share their conversation's prefix: they go where their source goes.
  if (!log_.empty() && log_.front().has_session_created()) call.affinity = log_.front().session_created().forked_from_session();
  call.cancelled = &abort_;
  ModelFailure failure;
  call.failure = &failure;
  const uint64_t left = task_.max_output_tokens - state_.output_tokens;
  call.max_output_tokens = static_cast<uint32_t>(std::min<uint64_t>(mc.max_output_tokens, left));
  uint64_t tools_tokens = call.system.size() / 4;
  for (const auto& t : call.tools) tools_tokens += (t.description.size() + t.input_schema_json.size()) / 4 + 8;
  const uint64_t reserve = std::min<uint64_t>(call.max_output_tokens, mc.context_tokens / 2) + tools_tokens;
  const uint64_t budget = mc.context_tokens > reserve + 64 ? mc.context_tokens - reserve : 64;
  // Events still pending (the task's message on a first wake) are part of the view.
  std::vector<v1::Event> with_pending;
  if (!pending_.empty()) {
    with_pending = log_;
    for (const auto& ev : pending_) {
      with_pending.push_back(ev);
      with_pending.back().set_seq(next_seq_ + with_pending.size() - log_.size() - 1);
    }
  }
  ContextView view = BuildContext(pending_.empty() ? log_ : with_pending, budget);
  if (view.new_summary) SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(*view.new_summary)));
  call.messages = std::move(view.messages);

  v1::Event req;
  auto* mr = req.mutable_model_request();
  const std::string request_id = id_.substr(0, 8) + "-" + std::to_string(next_seq_);
  mr->set_request_id(request_id);
  mr->set_model(task_.model);
  mr->set_turn(state_.turns);
  mr->set_prompt_messages(static_cast<uint32_t>(call.messages.size()));
  mr->set_params_json(boost::json::serialize(boost::json::object{
      {"max_tokens", call.max_output_tokens}, {"estimated_prompt_tokens", view.estimated_tokens},
      {"tools", call.tools.size()}}));
  SINEW_CO_RETURN_IF_ERROR(co_await AppendOne(std::move(req)));

  const auto t0 = Clock::now();
  // What has streamed so far: an interrupt keeps it as a partial answer. Written on the
  // client's thread while this coroutine waits for the call.
  std::string streamed;
  const TokenCallback on_token = [&streamed](std::string_view delta) { streamed.append(delta); };
  // The sandbox idles while the model thinks: paused once idle_pause_seconds have passed.
  std::unique_ptr<IdlePause> idle_timer = ArmIdlePause();
  auto reply = co_await client->CompleteAsync(call, on_token, *pools_.blocking);
  SINEW_CO_RETURN_IF_ERROR(co_await DisarmIdlePause(std::move(idle_timer)));
  const double seconds = MsSince(t0) / 1000.0;
  const std::string labels = "model=\"" + task_.model + "\"";
  deps_.metrics->Observe("sinew_harness_model_seconds", labels, seconds);
  if (!reply.ok()) {
    deps_.metrics->Add("sinew_harness_model_calls_total", labels + ",outcome=\"error\"");
    if (reply.status().code() == StatusCode::kCancelled && !fenced_ && !deps_.stopping->load() &&
        !CancelRequested() && Interrupting()) {
      // Cut by an interrupt: what streamed is kept, marked partial, with the interrupt's
      // answer. One answered meanwhile (a stale abort) leaves nothing: the loop calls again.
      v1::Event partial;
      auto* p = partial.mutable_model_response();
      p->set_request_id(request_id);
      p->set_model(task_.model);
      p->set_text(streamed);
      p->set_partial(true);
      p->set_stop_reason("interrupted");
      p->set_latency_ms(MsSince(t0));
      p->set_time_to_first_token_ms(-1);
      SINEW_CO_RETURN_IF_ERROR(co_await ReadNewEvents());
      if (state_.pending_interrupts.empty()) co_return co_await AnswerInterrupts();
      std::vector<v1::Event> first;
      first.push_back(std::move(partial));
      co_return co_await AnswerInterrupts(std::move(first));
    }
    if (reply.status().code() == StatusCode::kCancelled || fenced_ || deps_.stopping->load()) {
      co_return Status::Ok();  // the loop sees the cancel, the stop or the lost lease
    }
    const std::string why = "model call failed: " + reply.status().ToString();
    co_return co_await Finish(v1::SESSION_STATUS_FAILED, why, "model_error", static_cast<int32_t>(failure.http_status),
                              failure.retryable);
  }
  deps_.metrics->Add("sinew_harness_model_calls_total", labels + ",outcome=\"ok\"");
  deps_.quotas->AddTokens(tenant_, reply->prompt_tokens + reply->completion_tokens);
  deps_.metrics->Add("sinew_harness_tokens_total", labels + ",kind=\"prompt\"", static_cast<double>(reply->prompt_tokens));
  deps_.metrics->Add("sinew_harness_tokens_total", labels + ",kind=\"completion\"",
                     static_cast<double>(reply->completion_tokens));
  if (reply->time_to_first_token_ms >= 0) {
    deps_.metrics->Observe("sinew_harness_model_ttft_seconds", labels, reply->time_to_first_token_ms / 1000.0);
  }
  v1::Event ev;
  auto* r = ev.mutable_model_response();
  r->set_request_id(request_id);
  r->set_model(task_.model);
  r->set_text(reply->text);
  r->set_reasoning(reply->reasoning);
  for (const auto& tcall : reply->tool_calls) {
    auto* spec = r->add_tool_calls();
    spec->set_call_id(tcall.id);
    spec->set_name(tcall.name);
    spec->set_input_json(tcall.input_json);
  }
  r->mutable_usage()->set_prompt_tokens(reply->prompt_tokens);
  r->mutable_usage()->set_completion_tokens(reply->completion_tokens);
  r->mutable_usage()->set_cached_prompt_tokens(reply->cached_prompt_tokens);
  r->set_stop_reason(reply->stop_reason);
  r->set_latency_ms(MsSince(t0));
  r->set_time_to_first_token_ms(reply->time_to_first_token_ms);
  co_return co_await AppendOne(std::move(ev));
}

}  // namespace sinew::harness
