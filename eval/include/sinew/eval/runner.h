// Runner: runs the trials of a job (tasks × configurations × trials), each in its own
// disposable sandbox, and journals every attempt (docs/eval.md).
//
// One attempt: provision a sandbox of the configuration's shape from sinew-sandboxd,
// copy environment/files into /workspace, run environment/setup.sh, run the agent as a
// harness session attached to the sandbox (harness: driven by the model; oracle: the
// harness's built-in agent running solution/solve.sh through its bash tool; nop: the
// built-in agent that ends at once), then copy tests/ to /tests and run tests/test.sh in the
// same sandbox, read /logs/verifier/reward.txt, read peak memory and CPU time from the
// sandbox's cgroup, and destroy it. Infrastructure errors (the sandbox could not be
// provisioned, setup failed, the sandbox was OOM-killed or lost, the verifier wrote no
// reward, the harness was unavailable) are retried up to JobSpec.max_attempts; every
// attempt is kept.
//
// Thread-safety: Run may be called once at a time; it starts its own worker threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sinew/eval/job.h"
#include "sinew/eval/resource_config.h"
#include "sinew/eval/task.h"
#include "sinew/status.h"

namespace sinew::eval {

struct RunnerOptions {
  std::string job_dir;
  std::string api_key;  // for the harness
  // Called (from worker threads, serialised) when an attempt starts or ends.
  std::function<void(const TrialRecord& record, bool started)> on_attempt;
  // Set to stop: running attempts finish, no new ones start. May be null.
  const std::atomic<bool>* stop = nullptr;
};

struct RunPlan {
  std::vector<Task> tasks;
  std::vector<ResourceConfig> configs;
  std::vector<std::string> warnings;  // from loading the suite
  size_t total_trials() const { return tasks.size() * configs.size() * trials; }
  uint32_t trials = 1;
};

// Loads the suite and parses the configurations of `spec`. Errors: a bad suite, task or
// --config (names the file or argument), two configurations with the same name.
[[nodiscard]] Result<RunPlan> PlanJob(const JobSpec& spec);

// Creates the job directory with job.json (an existing job.json is an error: use resume).
[[nodiscard]] Status CreateJob(const std::string& dir, const JobSpec& spec);
// Reads DIR/job.json.
[[nodiscard]] Result<JobSpec> LoadJob(const std::string& dir);

// Whether the services a job needs answer: sinew-sandboxd at spec.sandboxd and the harness
// at spec.server (every trial, oracle and nop included, is a harness session; `api_key`
// must be one of its keys). Errors say which one does not answer and what to do
// (kInvalidArgument for no harness address; the harness's own code otherwise).
[[nodiscard]] Status CheckServices(const JobSpec& spec, const std::string& api_key);

class Runner {
 public:
  Runner(JobSpec spec, RunPlan plan, RunnerOptions options);
  ~Runner();

  // Runs every trial that is not finished in the journal (resume = Run on an existing
  // job directory). Attempts the journal shows started but not ended (the runner was
  // killed) are closed first: their sandbox is destroyed, their session cancelled, and
  // they are recorded as infra_error with interrupted = true (not counted against
  // max_attempts). Returns an error only when the job itself cannot run (journal,
  // CheckServices at start); trial failures are outcomes.
  [[nodiscard]] Status Run();

  // Counts for progress displays.
  struct Progress {
    size_t total = 0, done = 0, running = 0, passed = 0, infra_errors = 0;
  };
  Progress progress() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sinew::eval
