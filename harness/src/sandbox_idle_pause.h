// IdlePause: the idle timer of a session's sandbox while the session's driver waits on its
// model (docs/harness.md, "Idle sandboxes"). The driver's coroutine cannot act while it
// waits for the model's answer, so the timer runs on a thread of its own and makes the
// (blocking) pause from there; the driver disarms it when the answer comes and records
// what happened in the session's log.
//
// Thread-safety: Disarm is called once, from one thread; the pause runs on the timer's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "sinew/status.h"

namespace sinew::harness {

class IdlePause {
 public:
  using Clock = std::chrono::steady_clock;
  // At `due`, calls `pause` (Pause with if_idle, which may block). A FailedPrecondition
  // answer (a process still runs in the sandbox) is tried again `retry` later; any other
  // answer ends the timer.
  IdlePause(Clock::time_point due, Clock::duration retry, std::function<Status()> pause);
  // Disarms (waiting for a pause under way) if Disarm was not called.
  ~IdlePause();
  IdlePause(const IdlePause&) = delete;
  IdlePause& operator=(const IdlePause&) = delete;

  struct Outcome {
    bool paused = false;          // a pause succeeded
    Clock::time_point started{};  // when it began
    Clock::time_point ended{};    // and ended
  };
  // Stops the timer; a pause under way is waited for. May block: call it off the
  // driver's io threads.
  Outcome Disarm();

 private:
  void Run(Clock::time_point due, Clock::duration retry);

  std::function<Status()> pause_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;  // guarded by mu_
  Outcome outcome_;        // written by the timer's thread until it ends
  std::thread thread_;
};

}  // namespace sinew::harness
