#include "sandbox_idle_pause.h"

#include <utility>

namespace sinew::harness {

IdlePause::IdlePause(Clock::time_point due, Clock::duration retry, std::function<Status()> pause)
    : pause_(std::move(pause)) {
  thread_ = std::thread([this, due, retry] { Run(due, retry); });
}

IdlePause::~IdlePause() {
  if (thread_.joinable()) (void)Disarm();
}

void IdlePause::Run(Clock::time_point due, Clock::duration retry) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (cv_.wait_until(lock, due, [this] { return disarmed_; })) return;
    // The pause itself runs unlocked; Disarm waits for it by joining this thread.
    lock.unlock();
    const auto started = Clock::now();
    const Status s = pause_();
    lock.lock();
    if (s.ok()) {
      outcome_ = {true, started, Clock::now()};
      return;
    }
    if (s.code() != StatusCode::kFailedPrecondition) return;
    due = Clock::now() + retry;
  }
}

IdlePause::Outcome IdlePause::Disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return outcome_;
}

}  // namespace sinew::harness
