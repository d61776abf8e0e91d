// JobQueue: a bounded FIFO of jobs run by a fixed set of worker threads. Generations run here so
// that the I/O threads never block on the model.
//
// Thread-safety: TrySubmit may be called from any thread. The destructor stops the
// worker after the running job; queued jobs that never ran are dropped (each job's
// owner must not wait for them after shutdown begins).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sinew::model {

class JobQueue {
 public:
  // `capacity`: jobs waiting or running at most; `workers`: jobs running at once (the
  // serving engine batches the generations of concurrent jobs). `on_depth` (may be
  // empty) is told the depth after every change.
  JobQueue(size_t capacity, std::function<void(size_t)> on_depth, size_t workers = 1);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // False (and `job` is dropped) when the queue is full or shutting down.
  [[nodiscard]] bool TrySubmit(std::function<void()> job);

 private:
  void Work();

  const size_t capacity_;
  const std::function<void(size_t)> on_depth_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;  // GUARDED_BY(mutex_)
  size_t depth_ = 0;                        // GUARDED_BY(mutex_): queued + running
  bool stopping_ = false;                   // GUARDED_BY(mutex_)
  std::vector<std::thread> workers_;
};

}  // namespace sinew::model
