#include "sinew/eval/runner.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sinew/client/api_client.h"
#include "attempt_steps.h"
#include "sinew/sandbox/outcome.h"
#include "sinew/sandbox/provisioner_client.h"
#include "sinew/sandbox/sandbox_client.h"

namespace sinew::eval {
namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

Result<RunPlan> PlanJob(const JobSpec& spec) {
  RunPlan plan;
  plan.trials = spec.trials;
  if (spec.agent != "harness" && spec.agent != "oracle" && spec.agent != "nop") {
    return Status::InvalidArgument("--agent " + spec.agent + ": must be harness, oracle or nop");
  }
  if (spec.trials == 0) return Status::InvalidArgument("--trials must be at least 1");
  SINEW_ASSIGN_OR_RETURN(plan.tasks, LoadSuite(spec.suite, spec.task_glob, &plan.warnings));
  std::set<std::string> names;
  for (const auto& arg : spec.configs) {
    SINEW_ASSIGN_OR_RETURN(ResourceConfig c, ParseResourceConfig(arg));
    if (!names.insert(c.name).second) {
      return Status::InvalidArgument("--config: two configurations are named " + c.name);
    }
    plan.configs.push_back(std::move(c));
  }
  if (plan.configs.empty()) return Status::InvalidArgument("at least one --config is needed");
  return plan;
}

Status CreateJob(const std::string& dir, const JobSpec& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/job.json";
  if (fs::exists(path, ec)) {
    return Status::AlreadyExists(dir +
                                 " already holds a job; continue it with `sinew eval resume " +
                                 dir + "` or choose another --job");
  }
  std::ofstream out(path + ".tmp");
  out << json::serialize(spec.ToJson()) << "\n";
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  fs::rename(path + ".tmp", path, ec);
  if (ec) return Status::IOError("cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

Result<JobSpec> LoadJob(const std::string& dir) {
  std::ifstream in(dir + "/job.json");
  if (!in) return Status::NotFound(dir + "/job.json not found: is " + dir + " a job directory?");
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  json::value v = json::parse(ss.str(), ec);
  if (ec) return Status::Corruption(dir + "/job.json is not JSON: " + ec.message());
  return JobSpec::FromJson(v);
}

struct Runner::Impl {
  JobSpec spec;
  RunPlan plan;
  RunnerOptions options;
  std::unique_ptr<Journal> journal;
  std::unique_ptr<sandbox::ProvisionerClient> provisioner;

  mutable std::mutex mu;
  Progress progress;  // guarded by mu
  std::mutex callback_mu;

  const Task& TaskNamed(const std::string& name) const {
    for (const auto& t : plan.tasks) {
      if (t.name == name) return t;
    }
    return plan.tasks.front();  // unreachable: keys come from plan.tasks
  }
  const ResourceConfig& ConfigNamed(const std::string& name) const {
    for (const auto& c : plan.configs) {
      if (c.name == name) return c;
    }
    return plan.configs.front();
  }

  void Notify(const TrialRecord& r, bool started) {
    if (!options.on_attempt) return;
    std::lock_guard<std::mutex> lock(callback_mu);
    options.on_attempt(r, started);
  }

  // Closes attempts a killed runner left open.
  Status CloseUnfinished() {
    for (const auto& o : journal->Unfinished()) {
      TrialRecord r;
      r.key = o.key;
      r.attempt = o.attempt;
      r.outcome = kInfraError;
      r.cause = "the runner stopped during this attempt (closed on resume)";
      r.interrupted = true;
      r.sandbox_id = o.sandbox_id;
      r.session_id = o.session_id;
      r.started_unix_ms = o.started_unix_ms;
      if (!o.session_id.empty() && !spec.server.empty()) {
        client::ApiClient api(spec.server, options.api_key);
        (void)api.Cancel(o.session_id);
      }
      if (!o.sandbox_id.empty() && provisioner) (void)provisioner->Destroy(o.sandbox_id);
      json::object line = r.ToJson();
      line["type"] = "end";
      SINEW_RETURN_IF_ERROR(journal->Append(line));
    }
    return Status::Ok();
  }

  // Attempts so far of `key` and whether the trial is finished.
  std::pair<uint32_t, bool> State(const TrialKey& key,
                                  const std::vector<TrialRecord>& ended) const {
    uint32_t last_attempt = 0, counted = 0;
    bool finished = false;
    for (const auto& r : ended) {
      if (r.key != key) continue;
      last_attempt = std::max(last_attempt, r.attempt);
      if (!r.infra()) finished = true;
      if (r.infra() && !r.interrupted) ++counted;
    }
    if (counted >= spec.max_attempts) finished = true;
    return {last_attempt, finished};
  }

  void RunTrial(const TrialKey& key) {
    for (;;) {
      if (options.stop && options.stop->load()) return;
      auto [last, finished] = State(key, journal->Ended());
      if (finished) break;
      TrialRecord r = RunAttempt(key, last + 1);
      json::object line = r.ToJson();
      line["type"] = "end";
      if (!journal->Append(line).ok()) return;
      {
        std::lock_guard<std::mutex> lock(mu);
        --progress.running;
      }
      Notify(r, false);
    }
    std::lock_guard<std::mutex> lock(mu);
    ++progress.done;
    // The final attempt decides the trial.
    auto ended = journal->Ended();
    const TrialRecord* final_r = nullptr;
    for (const auto& r : ended) {
      if (r.key == key && (!final_r || r.attempt > final_r->attempt)) final_r = &r;
    }
    if (final_r && final_r->passed()) ++progress.passed;
    if (final_r && final_r->infra()) ++progress.infra_errors;
  }

  TrialRecord RunAttempt(const TrialKey& key, uint32_t attempt) {
    const Task& task = TaskNamed(key.task);
    const ResourceConfig& config = ConfigNamed(key.config);
    TrialRecord r;
    r.key = key;
    r.attempt = attempt;
    r.started_unix_ms = NowUnixMs();
    json::object start = KeyJson(key, attempt);
    start["type"] = "start";
    start["unix_ms"] = r.started_unix_ms;
    (void)journal->Append(start);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++progress.running;
    }
    Notify(r, true);

    const auto t0 = Clock::now();
    AttemptContext ctx;
    ctx.provisioner = provisioner.get();
    ctx.label = "eval " + task.name + " " + key.config + " #" + std::to_string(key.trial) + "." +
                std::to_string(attempt);
    ctx.on_sandbox = [&](const std::string& id) {
      json::object l = KeyJson(key, attempt);
      l["type"] = "sandbox";
      l["sandbox_id"] = id;
      (void)journal->Append(l);
    };
    ctx.on_session = [&](const std::string& id) {
      json::object l = KeyJson(key, attempt);
      l["type"] = "session";
      l["session_id"] = id;
      (void)journal->Append(l);
    };
    ctx.agent = spec.agent;
    ctx.model = spec.model;
    ctx.server = spec.server;
    ctx.api_key = options.api_key;
    RunAttemptSteps(task, ResolveShape(config, task), ctx, &r);
    r.total_ms = MsSince(t0);
    return r;
  }
};

Status CheckServices(const JobSpec& spec, const std::string& api_key) {
  SINEW_ASSIGN_OR_RETURN(auto provisioner, sandbox::ProvisionerClient::Connect(spec.sandboxd, std::chrono::minutes(2), spec.sandboxd_tls));
  auto health = provisioner->Health();
  if (!health.ok()) {
    return Status::Unavailable("sinew-sandboxd at " + spec.sandboxd +
                               " does not answer: " + health.status().message() +
                               " (start it, or pass --sandboxd HOST:PORT)");
  }
  // Every trial (oracle and nop included) is a harness session.
  if (spec.server.empty()) {
    return Status::InvalidArgument(
        "no harness address: every trial, oracle and nop included, is a harness session "
        "(pass --server URL or set SINEW_SERVER; scripts/eval.sh brings a local stack up)");
  }
  {
    client::ApiClient api(spec.server, api_key);
    std::string next;
    auto probe = api.ListSessions("", 1, "", &next);
    if (!probe.ok()) {
      return Status(probe.status().code(),
                    "the harness at " + spec.server + " does not answer: " +
                        probe.status().message() +
                        " (every trial, oracle and nop included, is a harness session: start one, "
                        "e.g. with scripts/eval.sh, or pass --server URL and --api-key)");
    }
  }
  return Status::Ok();
}

Runner::Runner(JobSpec spec, RunPlan plan, RunnerOptions options) : impl_(new Impl) {
  impl_->spec = std::move(spec);
  impl_->plan = std::move(plan);
  impl_->options = std::move(options);
}
Runner::~Runner() = default;

Runner::Progress Runner::progress() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->progress;
}

Status Runner::Run() {
  Impl& m = *impl_;
  SINEW_ASSIGN_OR_RETURN(m.journal, Journal::Open(m.options.job_dir));
  SINEW_ASSIGN_OR_RETURN(m.provisioner, sandbox::ProvisionerClient::Connect(m.spec.sandboxd, std::chrono::minutes(2),
                                                                           m.spec.sandboxd_tls));
  SINEW_RETURN_IF_ERROR(CheckServices(m.spec, m.options.api_key));
  SINEW_RETURN_IF_ERROR(m.CloseUnfinished());

  // Trial-major order, so that configurations are compared as the run goes.
  std::deque<TrialKey> queue;
  const auto ended = m.journal->Ended();
  size_t total = 0;
  for (uint32_t trial = 1; trial <= m.spec.trials; ++trial) {
    for (const auto& t : m.plan.tasks) {
      for (const auto& c : m.plan.configs) {
        TrialKey k{t.name, c.name, trial};
        ++total;
        auto [last, finished] = m.State(k, ended);
        if (finished) {
          std::lock_guard<std::mutex> lock(m.mu);
          ++m.progress.done;
          const TrialRecord* final_r = nullptr;
          for (const auto& r : ended) {
            if (r.key == k && (!final_r || r.attempt > final_r->attempt)) final_r = &r;
          }
          if (final_r && final_r->passed()) ++m.progress.passed;
          if (final_r && final_r->infra()) ++m.progress.infra_errors;
        } else {
          queue.push_back(k);
        }
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.progress.total = total;
  }
  std::mutex qmu;
  std::vector<std::thread> workers;
  const uint32_t n = std::max<uint32_t>(1, m.spec.concurrency);
  for (uint32_t w = 0; w < n; ++w) {
    workers.emplace_back([&] {
      for (;;) {
        TrialKey k;
        {
          std::lock_guard<std::mutex> lock(qmu);
          if (queue.empty() || (m.options.stop && m.options.stop->load())) return;
          k = queue.front();
          queue.pop_front();
        }
        m.RunTrial(k);
      }
    });
  }
  for (auto& w : workers) w.join();
  return Status::Ok();
}

}  // namespace sinew::eval
