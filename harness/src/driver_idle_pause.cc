// SessionDriver's idle sandboxes (docs/harness.md, "Idle sandboxes"): a session whose
// sandbox has had no call for its task's idle_pause_seconds, while the session waits on
// its model or on a person, has the sandbox paused (sinew-sandboxd's Pause with if_idle:
// refused while any process besides the agent runs, so a background job keeps it awake).
// The next sandbox call resumes it (ResumeSandbox). Both are in the log: sandbox_paused
// and sandbox_resumed, with the time each took.
#include <spdlog/spdlog.h>

#include "driver.h"
#include "sandbox_common.h"

namespace sinew::harness {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

// An idle pause of `box` (if_idle: refused while a process besides the agent runs); a
// refusal is logged as it comes. Called from the driver and from an IdlePause's thread.
Status TryIdlePause(SandboxBackend& sandboxes, const SandboxRef& box, const std::string& session) {
  Status s = sandboxes.Pause(box, /*if_idle=*/true);
  if (!s.ok()) spdlog::info("session {}: sandbox {} not paused while idle: {}", session, box.id, s.message());
  return s;
}

}  // namespace

bool SessionDriver::IdlePauseApplies() const {
  return task_.idle_pause_seconds > 0 && !state_.sandbox_id.empty() && ready_sandbox_ == state_.sandbox_id &&
         !AttachesSandbox(task_.sandbox_json) && deps_.sandboxes->configured();
}

std::unique_ptr<IdlePause> SessionDriver::ArmIdlePause() {
  idle_snapshot_.reset();
  if (!IdlePauseApplies()) return nullptr;
  const auto idle = std::chrono::seconds(task_.idle_pause_seconds);
  const SandboxRef box = SandboxOf();
  SandboxBackend* sandboxes = deps_.sandboxes;
  // on_pause: the sandbox changed since its last snapshot is snapshotted before it pauses
  // (once, on the timer's thread; logged by DisarmIdlePause).
  std::shared_ptr<IdleSnapshot> snapshot;
  if (SnapshotDue()) {
    snapshot = std::make_shared<IdleSnapshot>();
    snapshot->at_seq = next_seq_ - 1;
  }
  idle_snapshot_ = snapshot;
  return std::make_unique<IdlePause>(last_sandbox_use_ + idle, idle, [sandboxes, box, snapshot, id = id_] {
    if (snapshot != nullptr) {
      std::lock_guard<std::mutex> lock(snapshot->mu);
      if (!snapshot->taken) snapshot->taken = SnapshotSessionSandbox(*sandboxes, box);
    }
    return TryIdlePause(*sandboxes, box, id);
  });
}

Task<Status> SessionDriver::DisarmIdlePause(std::unique_ptr<IdlePause> timer) {
  if (timer == nullptr) co_return Status::Ok();
  const SandboxRef box = SandboxOf();
  // Waits for a pause under way: off the io threads.
  const IdlePause::Outcome outcome = co_await Blocking([&] { return timer->Disarm(); });
  std::shared_ptr<IdleSnapshot> snapshot = std::move(idle_snapshot_);
  std::optional<Result<v1::SnapshotInfo>> taken;
  if (snapshot != nullptr) {
    std::lock_guard<std::mutex> lock(snapshot->mu);
    taken = std::move(snapshot->taken);
  }
  if (taken) SINEW_CO_RETURN_IF_ERROR(co_await RecordSnapshot("on_pause", "", box, snapshot->at_seq, *taken));
  if (!outcome.paused) co_return Status::Ok();  // a refusal was logged as it came
  co_return co_await RecordPause("idle", outcome.started, outcome.ended);
}

Task<Status> SessionDriver::PauseIfIdle() {
  if (!IdlePauseApplies()) co_return Status::Ok();
  const auto now = Clock::now();
  const auto idle = std::chrono::seconds(task_.idle_pause_seconds);
  if (now < last_sandbox_use_ + idle || now < idle_retry_at_) co_return Status::Ok();
  if (SnapshotDue()) SINEW_CO_RETURN_IF_ERROR(co_await KeepSnapshot("on_pause"));
  const SandboxRef box = SandboxOf();
  Status paused = co_await Blocking([&] { return TryIdlePause(*deps_.sandboxes, box, id_); });
  if (!paused.ok()) {
    // A process still runs (try again later); any other answer: not again in this wait.
    idle_retry_at_ = paused.code() == StatusCode::kFailedPrecondition ? Clock::now() + idle : Clock::time_point::max();
    co_return Status::Ok();
  }
  co_return co_await RecordPause("idle", now, Clock::now());
}

Task<Status> SessionDriver::RecordPause(const std::string& reason, Clock::time_point started, Clock::time_point ended,
                                        std::vector<v1::Event> with) {
  const int64_t idle_ms = MsBetween(last_sandbox_use_, started), pause_ms = MsBetween(started, ended);
  ready_sandbox_.clear();
  deps_.quotas->ReleaseSandbox(tenant_, id_);
  deps_.metrics->Add("sinew_harness_sandbox_pauses_total", "reason=\"" + reason + "\"");
  spdlog::info("session {}: sandbox {} paused ({}) after {} ms idle, in {} ms", id_, state_.sandbox_id, reason,
               idle_ms, pause_ms);
  v1::Event ev;
  auto* p = ev.mutable_sandbox_paused();
  p->set_sandbox_id(state_.sandbox_id);
  p->set_reason(reason);
  p->set_idle_ms(idle_ms);
  p->set_pause_ms(pause_ms);
  with.insert(with.begin(), std::move(ev));
  co_return co_await Append(std::move(with));
}

}  // namespace sinew::harness
