// SessionDriver's interrupts (docs/harness.md, "Interrupts"). The API writes an interrupt
// event to the log first and then tells the driver; the driver cuts what is under way
// and answers the interrupt with one user_message naming its seq. Everything it decides
// is read from the log, so a driver that wakes after a crash answers an interrupt that
// its predecessor never acted on, and one that was answered is never answered again.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "driver.h"
#include "tool_catalog.h"

namespace sinew::harness {

void SessionDriver::RequestInterrupt(uint64_t seq) {
  if (seq != 0 && seq <= answered_interrupt_seq_.load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  interrupt_requested_ = true;
  wake_requested_ = true;
  abort_ = true;  // cuts a model call or an http_request under way
  if (running_call_) {
    Status stopped = deps_.sandboxes->CancelCall(running_call_->sandbox, running_call_->call_id);
    if (!stopped.ok()) {
      spdlog::warn("session {}: interrupt: could not stop call {} in its sandbox: {}", id_,
                   running_call_->call_id, stopped.ToString());
    }
  }
}

bool SessionDriver::Interrupting() {
  if (!state_.pending_interrupts.empty()) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return interrupt_requested_;
}

void SessionDriver::MarkUserInterrupted(v1::Event* result) {
  auto* r = result->mutable_tool_result();
  r->set_user_interrupted(true);
  r->set_is_error(true);
  r->set_output("[interrupted by the user: the call was stopped]\n" + r->output());
}

Task<Status> SessionDriver::AnswerInterrupts(std::vector<v1::Event> first) {
  bool told = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    told = interrupt_requested_;
    interrupt_requested_ = false;
  }
  // The API appended the event before it told this driver: it is in the log.
  if (told) SINEW_CO_RETURN_IF_ERROR(co_await ReadNewEvents());
  auto clear_abort = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_ = cancel_requested_ || fenced_ || deps_.stopping->load();
  };
  if (state_.pending_interrupts.empty()) {
    clear_abort();
    co_return Status::Ok();
  }
  std::vector<v1::Event> events = std::move(first);
  if (state_.last_response >= 0 && events.empty()) {
    // Copy: appends may reallocate log_.
    const v1::ModelResponse response = log_[state_.last_response].model_response();
    for (const auto& spec : response.tool_calls()) {
      if (state_.finished.count(spec.call_id())) continue;
      const ToolInfo* info = FindTool(spec.name());
      if (state_.started.count(spec.call_id())) {
        if (info != nullptr && info->needs_sandbox && !state_.sandbox_id.empty()) {
          // Under way in a sandbox that lives (the driver that started it is gone): stopped
          // there, and its result (what it wrote until then) asked for and marked.
          SINEW_CO_RETURN_IF_ERROR(
              co_await ExecuteCall(spec, true, response.request_id() + "/" + spec.call_id()));
          continue;
        }
        ToolOutcome o;
        o.is_error = true;
        o.output = "interrupted by the user while it ran; it may or may not have taken effect";
        v1::Event ev = ToolResultEvent(spec.call_id(), o);
        ev.mutable_tool_result()->set_user_interrupted(true);
        events.push_back(std::move(ev));
        continue;
      }
      v1::Event call;
      call.mutable_tool_call()->set_call_id(spec.call_id());
      call.mutable_tool_call()->set_tool_name(spec.name());
      call.mutable_tool_call()->set_input_json(spec.input_json());
      events.push_back(std::move(call));
      ToolOutcome o;
      o.is_error = true;
      o.output = "not run: the user interrupted the session before this call started";
      v1::Event result = ToolResultEvent(spec.call_id(), o);
      result.mutable_tool_result()->set_user_interrupted(true);
      events.push_back(std::move(result));
    }
  }
  uint64_t newest = 0;
  for (const auto& [seq, index] : state_.pending_interrupts) {
    v1::Event message;
    message.mutable_user_message()->set_text(log_[index].interrupt().message());
    message.mutable_user_message()->set_interrupt_seq(seq);
    events.push_back(std::move(message));
    newest = std::max(newest, seq);
  }
  const size_t answered = state_.pending_interrupts.size();
  if (state_.status == v1::SESSION_STATUS_REQUIRES_ACTION) {
    std::erase_if(pending_, [](const v1::Event& e) { return e.has_status_change(); });
    events.push_back(
        StatusEvent(state_.status, v1::SESSION_STATUS_RUNNING, "interrupted by the user"));
  }
  SINEW_CO_RETURN_IF_ERROR(co_await Append(std::move(events)));
  answered_interrupt_seq_ = std::max(answered_interrupt_seq_.load(), newest);
  clear_abort();
  deps_.metrics->Add("sinew_harness_interrupts_total", "", static_cast<double>(answered));
  spdlog::info("session {}: answered {} interrupt(s), the newest at seq {}", id_, answered, newest);
  co_return Status::Ok();
}

}  // namespace sinew::harness
