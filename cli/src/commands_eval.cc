// `sinew eval run|resume|report`: evaluation runs (docs/eval.md). The work is done by
// the eval library (eval/); this file parses the command line and shows progress.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "context.h"
#include "sinew/eval/report.h"
#include "sinew/eval/runner.h"
#include "sinew/grpc_tls_flags.h"
#include "sinew/sandbox/provisioner_client.h"

namespace sinew::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnInterrupt(int) { g_stop.store(true); }

struct EvalArgs {
  std::string suite, agent = "oracle", model, job, task_glob;
  std::string sandboxd = std::string(sandbox::kDefaultProvisionerAddress);
  uint32_t trials = 1, concurrency = 1, max_attempts = 2;
  std::vector<std::string> configs;
  GrpcTlsOptions sandboxd_tls;
};

std::string DefaultJobDir() {
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "sinew-eval-%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Runs (or resumes) the job in `dir` and prints the report. Returns the exit code.
int RunJob(Context& ctx, const std::string& dir, const eval::JobSpec& spec) {
  auto plan = eval::PlanJob(spec);
  if (!plan.ok()) {
    ctx.Fail(plan.status());
    return ctx.exit_code;
  }
  for (const auto& w : plan->warnings) std::cerr << "warning: " << w << "\n";
  const auto start = std::chrono::steady_clock::now();
  const bool tty = ctx.interactive;
  eval::RunnerOptions options;
  options.job_dir = dir;
  options.api_key = ctx.api_key;
  options.stop = &g_stop;
  eval::Runner* runner_ptr = nullptr;
  size_t finished_here = 0;
  options.on_attempt = [&](const eval::TrialRecord& r, bool started) {
    if (!started) ++finished_here;
    auto p = runner_ptr->progress();
    if (tty) {
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      size_t left = p.total > p.done ? p.total - p.done : 0;
      double eta = finished_here
                       ? elapsed / static_cast<double>(finished_here) * static_cast<double>(left) /
                             std::max<double>(1, spec.concurrency)
                       : 0;
      std::fprintf(stderr,
                   "\r\033[K%zu/%zu done, %zu running, %zu passed, %zu infra errors, ETA %.0f s",
                   p.done, p.total, p.running, p.passed, p.infra_errors, eta);
    } else if (!started) {
      std::fprintf(stderr, "%s %s #%u.%u %s%s%s (%.1f s)\n", r.key.task.c_str(),
                   r.key.config.c_str(), r.key.trial, r.attempt, r.outcome.c_str(),
                   r.cause.empty() ? "" : ": ", r.cause.substr(0, 160).c_str(),
                   static_cast<double>(r.total_ms) / 1000);
    }
    std::fflush(stderr);
  };
  eval::Runner runner(spec, std::move(*plan), options);
  runner_ptr = &runner;
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Status s = runner.Run();
  if (tty) std::fprintf(stderr, "\n");
  if (!s.ok()) {
    ctx.Fail(s);
    return ctx.exit_code;
  }
  auto table = eval::WriteReport(dir);
  if (!table.ok()) {
    ctx.Fail(table.status());
    return ctx.exit_code;
  }
  std::cout << *table << "results: " << dir << "/results.json\nreport:  " << dir
            << "/report.html\n";
  if (g_stop.load()) {
    std::cerr << "stopped; continue with `sinew eval resume " << dir << "`\n";
    ctx.exit_code = kExitCancelled;
  }
  return ctx.exit_code;
}

}  // namespace

void AddEvalCommands(CLI::App& app, Context& ctx) {
  auto* ev =
      app.add_subcommand("eval", "evaluation runs: task suites x trials x resource configurations");
  ev->require_subcommand(1);

  auto args = std::make_shared<EvalArgs>();
  auto* run = ev->add_subcommand("run", "run a task suite and write results.json and report.html");
  run->add_option("suite", args->suite,
                  "suite folder (task folders in Harbor / Terminal-Bench format)")
      ->required();
  run->add_option("--agent", args->agent,
                  "harness | oracle | nop (default oracle); each trial is a session of the "
                  "harness at --server (oracle and nop are its built-in agents)")
      ->check(CLI::IsMember({"harness", "oracle", "nop"}));
  run->add_option("--model", args->model, "model of the harness configuration (agent harness)");
  run->add_option("--trials", args->trials, "trials per task and configuration (default 1)")
      ->check(CLI::Range(1, 1000));
  run->add_option("--config", args->configs,
                  "resource configuration: a preset (1x, g1x-c3x, uncapped) or "
                  "NAME=guarantee=1g,ceiling=2g,cpus=1,pids=256; repeat to compare (default 1x)");
  run->add_option("--concurrency", args->concurrency, "trials at once (default 1)")
      ->check(CLI::Range(1, 64));
  run->add_option("--job", args->job, "job directory (default ./sinew-eval-<UTC time>)");
  run->add_option("--task", args->task_glob, "only tasks whose folder name matches this glob");
  run->add_option("--sandboxd", args->sandboxd, "sinew-sandboxd address (default 127.0.0.1:7702)");
  AddGrpcTlsFlags(*run, &args->sandboxd_tls, /*client=*/true, "--sandboxd-tls");
  run->add_option("--max-attempts", args->max_attempts,
                  "attempts per trial; only infra errors are retried (default 2)")
      ->check(CLI::Range(1, 10));
  run->callback([&ctx, args] {
    eval::JobSpec spec;
    std::error_code ec;
    spec.suite = std::filesystem::absolute(args->suite, ec).string();
    spec.task_glob = args->task_glob;
    spec.agent = args->agent;
    spec.model = args->model;
    spec.trials = args->trials;
    spec.configs = args->configs.empty() ? std::vector<std::string>{"1x"} : args->configs;
    spec.concurrency = args->concurrency;
    spec.max_attempts = args->max_attempts;
    spec.server = ctx.server;  // every trial is a harness session
    spec.sandboxd = args->sandboxd;
    spec.sandboxd_tls = args->sandboxd_tls;
    spec.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    auto plan = eval::PlanJob(spec);  // validate before creating anything
    if (!plan.ok()) return ctx.Fail(plan.status());
    if (Status s = eval::CheckServices(spec, ctx.api_key); !s.ok()) return ctx.Fail(s);
    const std::string dir = args->job.empty() ? DefaultJobDir() : args->job;
    if (Status s = eval::CreateJob(dir, spec); !s.ok()) return ctx.Fail(s);
    RunJob(ctx, dir, spec);
  });

  auto resume_dir = std::make_shared<std::string>();
  auto resume_conc = std::make_shared<uint32_t>(0);
  auto resume_sandboxd = std::make_shared<std::string>();
  auto resume_tls = std::make_shared<GrpcTlsOptions>();
  auto* resume = ev->add_subcommand("resume", "continue a job; finished trials are not run again");
  resume->add_option("job", *resume_dir, "job directory")->required();
  resume->add_option("--concurrency", *resume_conc, "trials at once (default: the job's)")
      ->check(CLI::Range(1, 64));
  resume->add_option("--sandboxd", *resume_sandboxd,
                     "sinew-sandboxd address (default: the job's, from job.json)");
  AddGrpcTlsFlags(*resume, resume_tls.get(), /*client=*/true, "--sandboxd-tls");
  resume->callback([&ctx, resume_dir, resume_conc, resume_sandboxd, resume_tls] {
    auto spec = eval::LoadJob(*resume_dir);
    if (!spec.ok()) return ctx.Fail(spec.status());
    if (*resume_conc) spec->concurrency = *resume_conc;
    if (!resume_sandboxd->empty()) spec->sandboxd = *resume_sandboxd;
    if (resume_tls->enabled()) spec->sandboxd_tls = *resume_tls;  // else the job's, from job.json
    spec->server = ctx.server;
    RunJob(ctx, *resume_dir, *spec);
  });

  auto report_dir = std::make_shared<std::string>();
  auto* report =
      ev->add_subcommand("report", "print the summary and write results.json and report.html");
  report->add_option("job", *report_dir, "job directory")->required();
  report->callback([&ctx, report_dir] {
    auto table = eval::WriteReport(*report_dir);
    if (!table.ok()) return ctx.Fail(table.status());
    std::cout << *table << "results: " << *report_dir << "/results.json\nreport:  " << *report_dir
              << "/report.html\n";
  });
}

}  // namespace sinew::cli
