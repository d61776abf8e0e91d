#include "job_queue.h"

#include <algorithm>
#include <cstdio>
#include <exception>

namespace sinew::model {

JobQueue::JobQueue(size_t capacity, std::function<void(size_t)> on_depth, size_t workers)
    : capacity_(capacity), on_depth_(std::move(on_depth)) {
  for (size_t i = 0; i < std::max<size_t>(1, workers); ++i) workers_.emplace_back([this] { Work(); });
}

JobQueue::~JobQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

bool JobQueue::TrySubmit(std::function<void()> job) {
  size_t depth;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || depth_ >= capacity_) return false;
    jobs_.push_back(std::move(job));
    depth = ++depth_;
  }
  ready_.notify_one();
  if (on_depth_) on_depth_(depth);
  return true;
}

void JobQueue::Work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& error) {  // a job's own boundary failed to catch it
      std::fprintf(stderr, "sinew-model: job failed: %s\n", error.what());
    } catch (...) {
      std::fprintf(stderr, "sinew-model: job failed with an unknown exception\n");
    }
    size_t depth;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      depth = --depth_;
    }
    if (on_depth_) on_depth_(depth);
  }
}

}  // namespace sinew::model
