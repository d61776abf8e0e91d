// End to end with real parts: the `sinew eval` command, sinew-sandboxd with runc
// sandboxes, sinew-store and sinew-harness (every trial is a harness session: oracle and
// nop are the harness's built-in agents; the scripted model, a test double of a language
// model, stands in for a tool-using model). Needs root, runc and the default image (ctest
// fixture sandbox_image).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "cli_test_util.h"
#include "sinew/sandbox/provisioner_client.h"
#include "test_util.h"

namespace sinew::eval {
namespace {
namespace fs = std::filesystem;
namespace json = boost::json;
using cli::test::ReadFile;
using cli::test::RunSinew;
using harness::test::HarnessProcess;
using harness::test::SandboxdProcess;
using harness::test::StoreProcess;
using harness::test::WriteFile;

std::string Examples() {
  const char* src = std::getenv("SINEW_SOURCE_DIR");
  // Absolute: the suites of the tests link to these folders.
  return fs::absolute(std::string(src ? src : ".") + "/evals/examples").lexically_normal().string();
}

json::object Results(const std::string& job) {
  return json::parse(ReadFile(job + "/results.json")).as_object();
}

// (task, config) -> outcomes of final attempts; and every attempt.
std::map<std::pair<std::string, std::string>, std::vector<std::string>> Finals(
    const json::object& r) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> m;
  for (const auto& t : r.at("trials").as_array()) {
    const auto& o = t.as_object();
    if (!o.at("final").as_bool()) continue;
    m[{std::string(o.at("task").as_string()), std::string(o.at("config").as_string())}]
        .emplace_back(o.at("outcome").as_string());
  }
  return m;
}

void MakeTask(const std::string& dir, const std::string& solve, const std::string& test,
              const std::string& setup = "",
              const std::string& toml = "[agent]\ntimeout_sec = 60\n") {
  fs::create_directories(dir + "/solution");
  fs::create_directories(dir + "/tests");
  WriteFile(dir + "/instruction.md", "Write ok to /workspace/out.txt.\n");
  WriteFile(dir + "/task.toml", toml);
  WriteFile(dir + "/solution/solve.sh", solve);
  WriteFile(dir + "/tests/test.sh", test);
  if (!setup.empty()) {
    fs::create_directories(dir + "/environment");
    WriteFile(dir + "/environment/setup.sh", setup);
  }
}

const char* kOkTest =
    "grep -qx ok /workspace/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > "
    "/logs/verifier/reward.txt\n";

constexpr const char* kKey = "k1";

class EvalE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    sandboxd_ = std::make_unique<SandboxdProcess>();
    ASSERT_FALSE(sandboxd_->address.empty())
        << "sinew-sandboxd did not start (root, runc and the image needed)";
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    const std::string solves = WriteFile(dir_.Sub("solves.json"), R"({"responses": [
      {"text": "Summing.", "tool_calls": [{"name": "bash", "input": {"command": "awk -F, 'NR > 1 { s += $2 } END { print s }' sales.csv > total.txt"}}]},
      {"text": "Done."}]})");
    const std::string idles =
        WriteFile(dir_.Sub("idles.json"), R"({"responses": [{"text": "I will not do it."}]})");
    harness_ = std::make_unique<HarnessProcess>(
        dir_.Sub("h.json"), R"({"listen": "127.0.0.1:0", "store": {"address": ")" +
                                store_->address + R"("}, "sandboxd": {"address": ")" +
                                sandboxd_->address + R"("}, "api_keys": {")" + kKey + R"(": "t"},
      "models": {"solver": {"kind": "scripted", "script": ")" +
                                solves + R"("},
                 "idler": {"kind": "scripted", "script": ")" +
                                idles + R"("}}})");
    ASSERT_FALSE(harness_->address.empty()) << "sinew-harness did not start";
  }
  // A suite folder holding links to the named shipped tasks.
  std::string SuiteOf(const std::vector<std::string>& names) {
    std::string suite = dir_.Sub("suite-" + std::to_string(++suites_));
    fs::create_directories(suite);
    for (const auto& n : names) fs::create_directory_symlink(Examples() + "/" + n, suite + "/" + n);
    return suite;
  }
  // `sinew --server HARNESS --api-key K eval ARGS...`
  std::vector<std::string> Eval(std::vector<std::string> args) {
    std::vector<std::string> all = {"--server", harness_->url(), "--api-key", kKey, "eval"};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }
  // The events of a session, read back through the harness API.
  std::vector<json::object> SessionEvents(const std::string& id) {
    auto r = harness::test::Api("GET", harness_->url() + "/v1/sessions/" + id + "/events?limit=1000",
                                kKey);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<json::object> out;
    if (r.status != 200) return out;
    for (const auto& e : r.json.at("events").as_array()) out.push_back(e.as_object());
    return out;
  }
  // Every trial of `results` that reached its agent step is a session of the harness, in
  // the trial's own sandbox; an oracle session shows its one bash call of solve.sh with
  // its result, a nop session no tool call at all. Returns how many trials were checked.
  size_t ExpectTrialsAreSessions(const json::object& results, const std::string& agent) {
    size_t checked = 0;
    for (const auto& t : results.at("trials").as_array()) {
      const auto& o = t.as_object();
      const std::string what = std::string(o.at("task").as_string()) + " " +
                               std::string(o.at("config").as_string());
      if (!o.at("session_id").is_string()) {
        ADD_FAILURE() << what << ": no session: " << o;
        continue;
      }
      ++checked;
      auto events = SessionEvents(std::string(o.at("session_id").as_string()));
      size_t calls = 0, results_seen = 0;
      bool completed = false;
      for (const auto& e : events) {
        if (const auto* c = e.if_contains("tool_call")) {
          ++calls;
          EXPECT_EQ(c->at("tool_name").as_string(), "bash") << what;
          EXPECT_NE(std::string(c->at("input_json").as_string()).find("/solution/solve.sh"),
                    std::string::npos)
              << what << ": " << *c;
          EXPECT_EQ(c->at("sandbox_id"), o.at("sandbox_id")) << what;  // the trial's sandbox
        }
        if (e.contains("tool_result")) ++results_seen;
        if (const auto* s = e.if_contains("status_change"))
          completed |= s->at("to").as_string() == "SESSION_STATUS_COMPLETED";
      }
      EXPECT_EQ(calls, agent == "oracle" ? 1u : 0u) << what;
      EXPECT_EQ(o.at("tool_calls").as_int64(), agent == "oracle" ? 1 : 0) << what;
      if (o.at("outcome").as_string() != "infra_error") {
        EXPECT_EQ(results_seen, calls) << what;
        EXPECT_TRUE(completed) << what;
      }
    }
    return checked;
  }
  size_t RunningSandboxes() {
    auto prov = sandbox::ProvisionerClient::Connect(sandboxd_->address);
    auto list = (*prov)->List(false);
    return list.ok() ? list->size() : 999;
  }
  testing::TempDir dir_{"eval-e2e"};
  std::unique_ptr<SandboxdProcess> sandboxd_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  int suites_ = 0;
};

TEST_F(EvalE2E, OracleShowsOomAsInfraErrorUnderOneXAndPassesWithAHigherCeiling) {
  const std::string suite = SuiteOf({"csv-total", "git-feature-branch", "memory-checksum-buffer"});
  const std::string job = dir_.Sub("job-oracle");
  auto run = RunSinew(Eval({"run", suite, "--agent", "oracle", "--config", "1x", "--config",
                            "g1x-c3x", "--concurrency", "2", "--max-attempts", "1", "--job", job,
                            "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("g1x-c3x vs 1x"), std::string::npos) << run.out;
  json::object r = Results(job);
  auto finals = Finals(r);
  using Outs = std::vector<std::string>;
  EXPECT_EQ((finals[{"csv-total", "1x"}]), Outs{"passed"});
  EXPECT_EQ((finals[{"csv-total", "g1x-c3x"}]), Outs{"passed"});
  EXPECT_EQ((finals[{"git-feature-branch", "1x"}]), Outs{"passed"});
  EXPECT_EQ((finals[{"git-feature-branch", "g1x-c3x"}]), Outs{"passed"});
  EXPECT_EQ((finals[{"memory-checksum-buffer", "1x"}]), Outs{"infra_error"});
  EXPECT_EQ((finals[{"memory-checksum-buffer", "g1x-c3x"}]), Outs{"passed"});
  EXPECT_EQ(ExpectTrialsAreSessions(r, "oracle"), 6u);  // every trial is a session
  for (const auto& t : r.at("trials").as_array()) {
    const auto& o = t.as_object();
    EXPECT_FALSE(o.at("sandbox_id").as_string().empty());
    EXPECT_EQ(o.at("attempt").as_int64(), 1);
    if (o.at("task").as_string() != "memory-checksum-buffer") continue;
    if (o.at("config").as_string() == "1x") {
      EXPECT_NE(std::string(o.at("cause").as_string()).find("oom"), std::string::npos)
          << o.at("cause");
      EXPECT_TRUE(o.at("reward").is_null());
    } else {
      EXPECT_EQ(o.at("reward").as_double(), 1.0);
      // The buffer is 251 MiB: the cgroup saw it; the CPU time is counted too.
      EXPECT_GT(o.at("memory_peak_bytes").as_int64(), 251ll << 20);
      EXPECT_GT(o.at("cpu_seconds").as_double(), 0.0);
      EXPECT_EQ(o.at("resources").at("memory_limit_bytes").as_string(),
                std::to_string(384ull << 20));
      EXPECT_EQ(o.at("resources").at("memory_guaranteed_bytes").as_string(),
                std::to_string(128ull << 20));
    }
  }
  const auto& s1 = r.at("summary").at("1x").as_object();
  EXPECT_EQ(s1.at("n").to_number<uint64_t>(), 3u);
  EXPECT_EQ(s1.at("passed").to_number<uint64_t>(), 2u);
  EXPECT_EQ(s1.at("infra_errors").to_number<uint64_t>(), 1u);
  EXPECT_EQ(s1.at("wilson_95").as_array().size(), 2u);
  const auto& s3 = r.at("summary").at("g1x-c3x").as_object();
  EXPECT_EQ(s3.at("passed").to_number<uint64_t>(), 3u);
  EXPECT_EQ(s3.at("infra_errors").to_number<uint64_t>(), 0u);
  EXPECT_EQ(RunningSandboxes(), 0u);

  // nop: every task's verifier says no.
  const std::string nop_job = dir_.Sub("job-nop");
  run = RunSinew(Eval({"run", suite, "--agent", "nop", "--config", "g1x-c3x", "--job", nop_job,
                       "--concurrency", "2", "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const auto& [key, outs] : Finals(Results(nop_job)))
    EXPECT_EQ(outs, Outs{"failed"}) << key.first;
  EXPECT_EQ(ExpectTrialsAreSessions(Results(nop_job), "nop"), 3u);
  // A session of the job replays with `sinew replay`, the oracle's command in it.
  const std::string first =
      std::string(r.at("trials").as_array()[0].at("session_id").as_string());
  auto replay = RunSinew({"--server", harness_->url(), "--api-key", kKey, "replay", first});
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_NE(replay.out.find("/solution/solve.sh"), std::string::npos) << replay.out;
}

TEST_F(EvalE2E, SetupFailureAndAMissingRewardAreInfraErrorsRetriedAndKept) {
  const std::string suite = dir_.Sub("bad-suite");
  MakeTask(suite + "/setup-fails", "echo ok > out.txt\n", kOkTest, "echo broken >&2\nexit 3\n");
  MakeTask(suite + "/no-reward", "echo ok > out.txt\n", "echo 'I forgot the reward'\n");
  MakeTask(suite + "/fine", "echo ok > out.txt\n", kOkTest);
  MakeTask(suite + "/too-slow", "sleep 30\necho ok > out.txt\n", kOkTest, "",
           "[agent]\ntimeout_sec = 2\n");
  const std::string job = dir_.Sub("job-bad");
  auto run = RunSinew(Eval({"run", suite, "--agent", "oracle", "--max-attempts", "2", "--job", job,
                            "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  json::object r = Results(job);
  std::map<std::string, std::vector<json::object>> by_task;
  for (const auto& t : r.at("trials").as_array()) {
    by_task[std::string(t.at("task").as_string())].push_back(t.as_object());
  }
  ASSERT_EQ(by_task["setup-fails"].size(), 2u);  // retried once, both kept
  for (const auto& a : by_task["setup-fails"]) {
    EXPECT_TRUE(a.at("session_id").is_null());  // it never reached its agent
    EXPECT_EQ(a.at("outcome").as_string(), "infra_error");
    EXPECT_NE(std::string(a.at("cause").as_string()).find("setup.sh failed (exit 3)"),
              std::string::npos);
  }
  EXPECT_EQ(by_task["setup-fails"][1].at("attempt").as_int64(), 2);
  ASSERT_EQ(by_task["no-reward"].size(), 2u);
  EXPECT_NE(std::string(by_task["no-reward"][0].at("cause").as_string()).find("verifier crashed"),
            std::string::npos);
  ASSERT_EQ(by_task["fine"].size(), 1u);
  EXPECT_EQ(by_task["fine"][0].at("outcome").as_string(), "passed");
  // solve.sh past the agent timeout: the oracle's bash call timed out (read from its
  // tool_result's timed_out), an agent_timeout, not retried.
  ASSERT_EQ(by_task["too-slow"].size(), 1u);
  EXPECT_EQ(by_task["too-slow"][0].at("outcome").as_string(), "agent_timeout");
  EXPECT_NE(std::string(by_task["too-slow"][0].at("cause").as_string())
                .find("solve.sh ran past the agent timeout of 2 s"),
            std::string::npos)
      << by_task["too-slow"][0];
  bool timed_out = false;
  for (const auto& e : SessionEvents(std::string(by_task["too-slow"][0].at("session_id").as_string()))) {
    if (const auto* res = e.if_contains("tool_result"))
      timed_out |= res->as_object().contains("timed_out") && res->at("timed_out").as_bool();
  }
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(r.at("summary").at("1x").at("infra_errors").to_number<uint64_t>(), 2u);
  EXPECT_EQ(r.at("summary").at("1x").at("attempts").to_number<uint64_t>(), 6u);

  // Bad input changes nothing: an unknown preset, a bad suite.
  auto bad = RunSinew(Eval({"run", suite, "--config", "4y", "--job", dir_.Sub("never"),
                            "--sandboxd", sandboxd_->address}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("unknown preset"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir_.Sub("never")));
  bad = RunSinew(Eval(
      {"run", dir_.Sub("nowhere"), "--job", dir_.Sub("never"), "--sandboxd", sandboxd_->address}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir_.Sub("never")));
  // No harness answers: every trial is a session, so nothing starts and no job is made.
  bad = RunSinew({"--server", "http://127.0.0.1:1", "--api-key", kKey, "eval", "run", suite,
                  "--agent", "nop", "--job", dir_.Sub("never"), "--sandboxd", sandboxd_->address});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("is a harness session"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir_.Sub("never")));
  bad = RunSinew(Eval({"run", suite, "--job", job, "--sandboxd", sandboxd_->address}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("sinew eval resume"), std::string::npos) << bad.out;
}

TEST_F(EvalE2E, AKilledRunnerResumesAndNoFinishedTrialRunsTwice) {
  const std::string suite = dir_.Sub("slow-suite");
  for (int i = 1; i <= 4; ++i) {
    MakeTask(suite + "/slow-" + std::to_string(i), "sleep 2\necho ok > out.txt\n", kOkTest);
  }
  const std::string job = dir_.Sub("job-kill");
  std::string cmd = "exec '" + testing::BinaryPath("sinew") + "' --server " + harness_->url() +
                    " --api-key " + kKey + " eval run '" + suite +
                    "' --agent oracle --trials 2 --job '" + job + "' --sandboxd " +
                    sandboxd_->address + " >/dev/null 2>&1";
  {
    testing::Subprocess runner({"/bin/sh", "-c", cmd});
    // Wait until some trials finished and another one is running, then SIGKILL.
    for (int i = 0; i < 600; ++i) {
      std::string j = ReadFile(job + "/trials.jsonl");
      size_t ends = 0, pos = 0;
      while ((pos = j.find("\"type\":\"end\"", pos)) != std::string::npos) ++ends, ++pos;
      if (ends >= 2 && j.rfind("\"type\":\"sandbox\"") > j.rfind("\"type\":\"end\"")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    runner.Signal(SIGKILL);
    runner.Wait();
  }
  size_t finished_before = 0;
  {
    std::ifstream in(job + "/trials.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("\"type\":\"end\"") != std::string::npos) ++finished_before;
    }
  }
  ASSERT_GE(finished_before, 2u);
  ASSERT_LT(finished_before, 8u);
  EXPECT_EQ(RunningSandboxes(), 1u);  // the killed runner's sandbox is orphaned

  auto resumed = RunSinew(Eval({"resume", job}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(RunningSandboxes(), 0u);  // closed on resume
  json::object r = Results(job);
  std::map<std::pair<std::string, int64_t>, std::vector<json::object>> per_trial;
  size_t interrupted = 0;
  for (const auto& t : r.at("trials").as_array()) {
    const auto& o = t.as_object();
    per_trial[{std::string(o.at("task").as_string()), o.at("trial").as_int64()}].push_back(o);
    if (o.at("interrupted").as_bool()) ++interrupted;
  }
  ASSERT_EQ(per_trial.size(), 8u);
  EXPECT_EQ(interrupted, 1u);
  for (const auto& [key, attempts] : per_trial) {
    size_t ran_to_the_end = 0;
    for (const auto& a : attempts) ran_to_the_end += !a.at("interrupted").as_bool();
    EXPECT_EQ(ran_to_the_end, 1u) << key.first << " #" << key.second;  // never twice
    EXPECT_EQ(attempts.back().at("outcome").as_string(), "passed");
  }
  EXPECT_EQ(r.at("summary").at("1x").at("passed").to_number<uint64_t>(), 8u);
  // Each trial's final attempt is an oracle session that ran solve.sh once.
  for (const auto& [key, attempts] : per_trial) {
    const auto& last = attempts.back();
    ASSERT_TRUE(last.at("session_id").is_string()) << key.first;
    size_t calls = 0;
    for (const auto& e : SessionEvents(std::string(last.at("session_id").as_string())))
      calls += e.contains("tool_call");
    EXPECT_EQ(calls, 1u) << key.first << " #" << key.second;
  }
  // Resuming a finished job runs nothing.
  auto again = RunSinew(Eval({"resume", job}));
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(Results(job).at("trials").as_array().size(), r.at("trials").as_array().size());
}

TEST_F(EvalE2E, HarnessAgentRunsAScriptedModelSessionInTheTrialSandbox) {
  const std::string suite = SuiteOf({"csv-total"});
  for (const std::string model : {"solver", "idler"}) {
    const std::string job = dir_.Sub("job-" + model);
    auto run = RunSinew(Eval({"run", suite, "--agent", "harness", "--model", model, "--job", job,
                              "--sandboxd", sandboxd_->address}));
    ASSERT_EQ(run.exit_code, 0) << run.out;
    json::object r = Results(job);
    ASSERT_EQ(r.at("trials").as_array().size(), 1u);
    const auto& t = r.at("trials").as_array()[0].as_object();
    EXPECT_EQ(t.at("outcome").as_string(), model == "solver" ? "passed" : "failed") << t;
    ASSERT_TRUE(t.at("session_id").is_string());
    EXPECT_EQ(t.at("tool_calls").as_int64(), model == "solver" ? 1 : 0);
    // The session is in the store: `sinew replay` shows it.
    auto replay = RunSinew({"--server", harness_->url(), "--api-key", kKey, "replay",
                            std::string(t.at("session_id").as_string())});
    EXPECT_EQ(replay.exit_code, 0) << replay.out;
    if (model == "solver") {
      EXPECT_NE(replay.out.find("attached sandbox left to its owner"), std::string::npos)
          << replay.out;
    }
  }
  EXPECT_EQ(RunningSandboxes(), 0u);
}

TEST_F(EvalE2E, ReportRendersInHeadlessChromiumWithoutErrors) {
  const std::string suite = dir_.Sub("report-suite");
  MakeTask(suite + "/passes", "echo ok > out.txt\n", kOkTest);
  MakeTask(suite + "/fails", "echo no > out.txt\n", kOkTest);
  const std::string job = dir_.Sub("job-report");
  auto run = RunSinew(Eval({"run", suite, "--agent", "oracle", "--trials", "2", "--config", "1x",
                            "--config", "roomy=guarantee=256m,ceiling=1g,cpus=2", "--job", job,
                            "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto report = RunSinew(Eval({"report", job}));
  ASSERT_EQ(report.exit_code, 0) << report.out;
  EXPECT_NE(report.out.find("pass rate [95% CI]"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("roomy vs 1x"), std::string::npos) << report.out;
  const std::string html = ReadFile(job + "/report.html");
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // self-contained
  EXPECT_EQ(html.find("<link"), std::string::npos);

  const std::string chromium = "/usr/bin/chromium";
  ASSERT_TRUE(fs::exists(chromium)) << "chromium is missing: run scripts/install-deps.sh";
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions"
      " --user-data-dir=" +
      dir_.Sub("chromium-profile") + " --enable-logging=stderr --v=0 --window-size=1200,1800 ";
  const std::string url = "file://" + job + "/report.html";
  const std::string shot = job + "/report.png";
  testing::Subprocess shooter(
      {"/bin/sh", "-c", "exec " + chromium + flags + "--screenshot=" + shot + " " + url + " 2>&1"});
  std::string log;
  while (auto line = shooter.ReadLine(std::chrono::seconds(120))) log += *line + "\n";
  shooter.Wait();
  const std::string png = ReadFile(shot);
  ASSERT_GT(png.size(), 10000u) << log;
  EXPECT_EQ(png.substr(1, 3), "PNG");
  testing::Subprocess dumper(
      {"/bin/sh", "-c", "exec " + chromium + flags + "--dump-dom " + url + " 2>&1"});
  std::string dom;
  while (auto line = dumper.ReadLine(std::chrono::seconds(120))) dom += *line + "\n";
  dumper.Wait();
  EXPECT_NE(dom.find("id=\"grid\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("Evaluation report"), std::string::npos);
  // Console messages of the page appear as "CONSOLE" lines in Chromium's log.
  for (const std::string& l : {log, dom}) {
    EXPECT_EQ(l.find(":CONSOLE("), std::string::npos) << l;
    EXPECT_EQ(l.find("Uncaught"), std::string::npos) << l;
  }
}

// The whole shipped suite (label long): the oracle passes every task with room to spare
// and nop fails every one.
TEST_F(EvalE2E, LongOracleAndNopOnTheWholeShippedSuite) {
  const std::string job = dir_.Sub("job-suite");
  auto run =
      RunSinew(Eval({"run", Examples(), "--agent", "oracle", "--config", "g1x-c3x", "--concurrency",
                     "2", "--max-attempts", "1", "--job", job, "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  auto finals = Finals(Results(job));
  EXPECT_GE(finals.size(), 12u);
  for (const auto& [key, outs] : finals)
    EXPECT_EQ(outs, std::vector<std::string>{"passed"}) << key.first;
  const std::string nop = dir_.Sub("job-suite-nop");
  run =
      RunSinew(Eval({"run", Examples(), "--agent", "nop", "--config", "g1x-c3x", "--concurrency",
                     "2", "--max-attempts", "1", "--job", nop, "--sandboxd", sandboxd_->address}));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  finals = Finals(Results(nop));
  EXPECT_GE(finals.size(), 12u);
  for (const auto& [key, outs] : finals)
    EXPECT_EQ(outs, std::vector<std::string>{"failed"}) << key.first;
}

}  // namespace
}  // namespace sinew::eval
