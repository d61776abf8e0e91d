// Schedules (docs/harness.md, "Schedules") over a real sinew-store and real sinew-harness
// processes: the API, its refusals, ticks that create one session each, two harness
// replicas on one store, and harnesses SIGKILLed around their ticks.
//
// The harnesses here allow schedules two seconds apart (schedule_min_interval_seconds: 2,
// with a six-field cron), so that ticks come in seconds rather than minutes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "cron.h"
#include "schedule_records.h"
#include "sinew/session_store/session_store.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKeyA = "sched-key-a";
constexpr const char* kKeyB = "sched-key-b";
constexpr const char* kTask = R"({"prompt": "daily report", "model": "nop"})";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class SchedulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty());
    WriteFile(dir_.Sub("quick.json"), R"({"responses": [{"text": "done"}]})");
    harness_ = StartHarness("a");
    ASSERT_FALSE(harness_->address.empty());
    base_ = harness_->url();
  }

  std::unique_ptr<HarnessProcess> StartHarness(const std::string& name) {
    return std::make_unique<HarnessProcess>(dir_.Sub(name + ".json"), R"({"listen": "127.0.0.1:0",
      "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "models": {"quick": {"kind": "scripted", "script": ")" + dir_.Sub("quick.json") + R"("}},
      "lease_ttl_ms": 2000, "scan_interval_ms": 200, "schedule_min_interval_seconds": 2})");
  }

  Reply Create(const std::string& body, const char* key = kKeyA) {
    return Api("POST", base_ + "/v1/schedules", key, body);
  }
  // Creates a schedule; returns its id ("" with a test failure).
  std::string CreateOk(const std::string& body) {
    auto r = Create(body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("schedule").at("id").as_string());
  }

  // The sessions of tenant a that name schedule `id`: tick time -> session ids.
  std::map<int64_t, std::vector<std::string>> SessionsOf(const std::string& id) {
    std::map<int64_t, std::vector<std::string>> out;
    auto r = Api("GET", base_ + "/v1/sessions?limit=1000", kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    for (const auto& s : r.json.at("sessions").as_array()) {
      const auto& meta = s.at("metadata").as_object();
      if (!meta.contains("schedule_id") || meta.at("schedule_id").as_string() != id) continue;
      out[std::stoll(std::string(meta.at("schedule_tick_unix_ms").as_string()))].push_back(
          std::string(s.at("id").as_string()));
    }
    return out;
  }

  // Waits until schedule `id` has sessions for `n` ticks; returns them.
  std::map<int64_t, std::vector<std::string>> WaitForTicks(const std::string& id, size_t n) {
    auto sessions = SessionsOf(id);
    for (int i = 0; i < 300 && sessions.size() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      sessions = SessionsOf(id);
    }
    EXPECT_GE(sessions.size(), n);
    return sessions;
  }

  // The schedule's own log, read from the store: its tick events.
  std::vector<v1::ScheduleTick> TicksInLog(const std::string& id) {
    std::vector<v1::ScheduleTick> ticks;
    auto store = store::ConnectSessionStore(store_->address);
    EXPECT_TRUE(store.ok());
    if (!store.ok()) return ticks;
    v1::GetEventsRequest req;
    req.set_session_id(id);
    req.set_from_seq(1);
    auto events = (*store)->GetEvents(req);
    EXPECT_TRUE(events.ok()) << events.status().message();
    if (!events.ok()) return ticks;
    for (const auto& ev : events->events()) {
      if (ev.has_schedule_tick()) ticks.push_back(ev.schedule_tick());
    }
    return ticks;
  }

  // Checks the log of schedule `id` (cron `cron`, UTC) against its sessions: every fire time
  // from the first tick to the last is accounted for once (ticked, or counted missed by the
  // next tick), and every session of the schedule is the session of exactly one tick.
  void ExpectEachFireTimeOnce(const std::string& id, const std::string& cron) {
    auto ticks = TicksInLog(id);
    ASSERT_FALSE(ticks.empty());
    std::map<int64_t, std::string> created;  // tick time -> session
    std::vector<int64_t> finals;
    std::map<int64_t, uint32_t> missed;
    for (size_t i = 0; i < ticks.size(); ++i) {
      const auto& t = ticks[i];
      if (t.outcome() == "pending") {
        // Each pending tick is followed by its outcome (the last may still be pending).
        if (i + 1 < ticks.size()) {
          EXPECT_EQ(ticks[i + 1].tick_unix_ms(), t.tick_unix_ms());
          EXPECT_NE(ticks[i + 1].outcome(), "pending");
        }
        continue;
      }
      EXPECT_EQ(t.outcome(), "created") << t.reason();
      EXPECT_TRUE(created.emplace(t.tick_unix_ms(), t.session_id()).second) << "tick " << t.tick_unix_ms() << " twice";
      finals.push_back(t.tick_unix_ms());
      missed[t.tick_unix_ms()] = t.missed();
    }
    ASSERT_FALSE(finals.empty());
    auto c = CronSchedule::Parse(cron, "UTC");
    ASSERT_TRUE(c.ok());
    // From the first tick to the last, each fire time is a tick or one its next tick missed.
    uint64_t fire_times = 1;
    for (int64_t f = finals.front() / 1000; f < finals.back() / 1000; f = c->NextAfter(f)) ++fire_times;
    uint64_t accounted = 1;
    for (size_t i = 1; i < finals.size(); ++i) accounted += 1 + missed[finals[i]];
    EXPECT_EQ(accounted, fire_times);
    // The sessions: one per created tick, the tick's own id, nothing else.
    auto sessions = SessionsOf(id);
    for (const auto& [tick, ids] : sessions) {
      ASSERT_EQ(ids.size(), 1u) << "tick " << tick << " has " << ids.size() << " sessions";
      ASSERT_TRUE(created.count(tick)) << "a session for tick " << tick << " that its log does not name";
      EXPECT_EQ(ids[0], created[tick]);
      EXPECT_EQ(ids[0], ScheduleRecords::TickSessionId(id, tick));
    }
    EXPECT_EQ(sessions.size(), created.size());
  }

  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

TEST_F(SchedulesTest, CreateGetListPauseResumeDelete) {
  const int64_t before = NowMs();
  auto r = Create(R"({"cron": "30 9 * * MON-FRI", "timezone": "Europe/Berlin", "missed": "run_once",
                      "task": {"prompt": "report", "model": "nop", "metadata": {"team": "ops"}}})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto& s = r.json.at("schedule").as_object();
  const std::string id(s.at("id").as_string());
  EXPECT_EQ(s.at("state").as_string(), "active");
  EXPECT_EQ(s.at("cron").as_string(), "30 9 * * MON-FRI");
  EXPECT_EQ(s.at("timezone").as_string(), "Europe/Berlin");
  EXPECT_EQ(s.at("missed").as_string(), "run_once");
  EXPECT_EQ(s.at("task").at("prompt").as_string(), "report");
  EXPECT_TRUE(s.at("last_tick").is_null());
  // The next fire time is 09:30 Berlin time on a weekday, after now.
  auto cron = CronSchedule::Parse("30 9 * * MON-FRI", "Europe/Berlin");
  ASSERT_TRUE(cron.ok());
  const int64_t next = s.at("next_run_unix_ms").as_int64();
  EXPECT_GT(next, before);
  EXPECT_EQ(next, cron->NextAfter(next / 1000 - 1) * 1000);

  auto got = Api("GET", base_ + "/v1/schedules/" + id, kKeyA);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json.at("schedule").at("next_run_unix_ms").as_int64(), next);
  auto listed = Api("GET", base_ + "/v1/schedules", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json.at("schedules").as_array().size(), 1u);
  EXPECT_EQ(listed.json.at("schedules").at(0).at("id").as_string(), id);

  auto paused = Api("POST", base_ + "/v1/schedules/" + id + "/pause", kKeyA);
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(paused.json.at("schedule").at("state").as_string(), "paused");
  EXPECT_TRUE(paused.json.at("schedule").at("next_run_unix_ms").is_null());
  // Pausing a paused schedule changes nothing.
  auto again = Api("POST", base_ + "/v1/schedules/" + id + "/pause", kKeyA);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json.at("schedule").at("state").as_string(), "paused");
  auto resumed = Api("POST", base_ + "/v1/schedules/" + id + "/resume", kKeyA);
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(resumed.json.at("schedule").at("state").as_string(), "active");
  EXPECT_EQ(resumed.json.at("schedule").at("next_run_unix_ms").as_int64(), next);

  auto deleted = Api("DELETE", base_ + "/v1/schedules/" + id, kKeyA);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json.at("schedule").at("state").as_string(), "deleted");
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules/" + id, kKeyA).status, 404);
  EXPECT_EQ(Api("DELETE", base_ + "/v1/schedules/" + id, kKeyA).status, 404);
  EXPECT_EQ(Api("POST", base_ + "/v1/schedules/" + id + "/resume", kKeyA).status, 404);
  EXPECT_TRUE(Api("GET", base_ + "/v1/schedules", kKeyA).json.at("schedules").as_array().empty());
}

TEST_F(SchedulesTest, AnotherTenantsScheduleIsNotFoundAndStaysAsItWas) {
  const std::string id = CreateOk(R"({"cron": "@daily", "task": {"prompt": "p", "model": "nop"}})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules/" + id, kKeyB).status, 404);
  EXPECT_EQ(Api("POST", base_ + "/v1/schedules/" + id + "/pause", kKeyB).status, 404);
  EXPECT_EQ(Api("POST", base_ + "/v1/schedules/" + id + "/resume", kKeyB).status, 404);
  EXPECT_EQ(Api("DELETE", base_ + "/v1/schedules/" + id, kKeyB).status, 404);
  EXPECT_TRUE(Api("GET", base_ + "/v1/schedules", kKeyB).json.at("schedules").as_array().empty());
  // A schedule is not a session, and a session is not a schedule.
  EXPECT_EQ(Api("GET", base_ + "/v1/sessions/" + id, kKeyA).status, 404);
  auto session = Api("POST", base_ + "/v1/sessions", kKeyA, kTask);
  ASSERT_EQ(session.status, 201);
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules/" + std::string(session.json.at("session").at("id").as_string()), kKeyA)
                .status,
            404);
  auto mine = Api("GET", base_ + "/v1/schedules/" + id, kKeyA);
  ASSERT_EQ(mine.status, 200);
  EXPECT_EQ(mine.json.at("schedule").at("state").as_string(), "active");
}

TEST_F(SchedulesTest, BadInputIsAClear400AndStoresNothing) {
  const std::pair<std::string, std::string> bad[] = {
      {R"({"cron": "0 0 30 2 *", "task": {"prompt": "p"}})", "never fires"},
      {R"({"cron": "* * * * * *", "task": {"prompt": "p"}})", "schedule_min_interval_seconds"},
      {R"({"cron": "*/1 * * * * *", "task": {"prompt": "p"}})", "at most once every 2 s"},
      {R"({"cron": "0 9 * * *", "timezone": "Mars/Olympus", "task": {"prompt": "p"}})", "timezone"},
      {R"({"cron": "0 9 * * *", "timezone": "../../etc/passwd", "task": {"prompt": "p"}})", "timezone"},
      {R"({"cron": "0 9 * * *", "timezone": 5, "task": {"prompt": "p"}})", "timezone"},
      {R"({"cron": "61 9 * * *", "task": {"prompt": "p"}})", "minute"},
      {R"({"cron": "@reboot", "task": {"prompt": "p"}})", "@yearly"},
      {R"({"cron": "0 9 * *", "task": {"prompt": "p"}})", "5 fields"},
      {R"({"task": {"prompt": "p"}})", "cron"},
      {R"({"cron": "0 9 * * *"})", "task"},
      {R"({"cron": "0 9 * * *", "task": "p"})", "task"},
      {R"({"cron": "0 9 * * *", "task": {"prompt": "p", "model": "no-such-model"}})", "body.task"},
      {R"({"cron": "0 9 * * *", "task": {"model": "nop"}})", "body.task"},
      {R"({"cron": "0 9 * * *", "task": {"prompt": "p"}, "missed": "always"})", "missed"},
      {R"({"cron": "0 9 * * *", "task": {"prompt": "p"}, "paused": "yes"})", "paused"},
      {R"({"cron": "0 9 * * *", "task": {"prompt": "p"}, "every": 5})", "every"},
      {R"([1, 2])", "object"},
      {"not json", "JSON"},
  };
  for (const auto& [body, says] : bad) {
    auto r = Create(body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(r.json.at("error").at("code").as_string(), "invalid_argument") << body;
    EXPECT_NE(r.body.find(says), std::string::npos) << body << " -> " << r.body;
  }
  EXPECT_EQ(Call("POST", base_ + "/v1/schedules", "cron=x",
                 {std::string("Authorization: Bearer ") + kKeyA, "Content-Type: text/plain"})
                .status,
            415);
  EXPECT_EQ(Api("PUT", base_ + "/v1/schedules", kKeyA, "{}").status, 405);
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules?limit=0", kKeyA).status, 400);
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules?page_token=%zz", kKeyA).status, 400);
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules/nothex", kKeyA).status, 404);
  EXPECT_EQ(Api("GET", base_ + "/v1/schedules", "").status, 401);
  // Nothing was stored: no schedule, no session.
  EXPECT_TRUE(Api("GET", base_ + "/v1/schedules", kKeyA).json.at("schedules").as_array().empty());
  EXPECT_TRUE(Api("GET", base_ + "/v1/sessions", kKeyA).json.at("sessions").as_array().empty());
}

TEST_F(SchedulesTest, EachTickCreatesOneSessionThatNamesItsSchedule) {
  const std::string id = CreateOk(R"({"cron": "*/2 * * * * *", "task": {"prompt": "tick", "model": "nop"}})");
  ASSERT_FALSE(id.empty());
  auto sessions = WaitForTicks(id, 3);
  ASSERT_EQ(Api("POST", base_ + "/v1/schedules/" + id + "/pause", kKeyA).status, 200);
  for (const auto& [tick, ids] : sessions) {
    EXPECT_EQ(tick % 2000, 0) << tick;
    ASSERT_EQ(ids.size(), 1u);
    auto s = Api("GET", base_ + "/v1/sessions/" + ids[0], kKeyA);
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.json.at("session").at("metadata").at("schedule_id").as_string(), id);
    EXPECT_EQ(WaitForStatus(base_, kKeyA, ids[0], "completed"), "completed");
  }
  auto got = Api("GET", base_ + "/v1/schedules/" + id, kKeyA);
  ASSERT_EQ(got.status, 200);
  const auto& last = got.json.at("schedule").at("last_tick");
  EXPECT_EQ(last.at("outcome").as_string(), "created");
  ExpectEachFireTimeOnce(id, "*/2 * * * * *");
}

TEST_F(SchedulesTest, APausedScheduleDoesNotTickAndResumesFromNow) {
  const std::string id =
      CreateOk(R"({"cron": "*/2 * * * * *", "paused": true, "missed": "run_once", "task": {"prompt": "t", "model": "nop"}})");
  ASSERT_FALSE(id.empty());
  auto got = Api("GET", base_ + "/v1/schedules/" + id, kKeyA);
  EXPECT_EQ(got.json.at("schedule").at("state").as_string(), "paused");
  // Three fire times pass while it is paused: none of them runs, not even on resume.
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));
  EXPECT_TRUE(SessionsOf(id).empty());
  const int64_t resumed_at = NowMs();
  ASSERT_EQ(Api("POST", base_ + "/v1/schedules/" + id + "/resume", kKeyA).status, 200);
  auto sessions = WaitForTicks(id, 1);
  ASSERT_FALSE(sessions.empty());
  EXPECT_GT(sessions.begin()->first, resumed_at - 1000);
  auto ticks = TicksInLog(id);
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.front().missed(), 0u);
}

TEST_F(SchedulesTest, TwoHarnessesOnOneStoreTickEachFireTimeOnce) {
  auto b = StartHarness("b");
  ASSERT_FALSE(b->address.empty());
  const std::string id = CreateOk(R"({"cron": "*/2 * * * * *", "missed": "run_once", "task": {"prompt": "t", "model": "nop"}})");
  ASSERT_FALSE(id.empty());
  WaitForTicks(id, 4);
  ASSERT_EQ(Api("POST", b->url() + "/v1/schedules/" + id + "/pause", kKeyA).status, 200);
  ExpectEachFireTimeOnce(id, "*/2 * * * * *");
  // Both answer for it.
  EXPECT_EQ(Api("GET", b->url() + "/v1/schedules/" + id, kKeyA).json.at("schedule").at("state").as_string(), "paused");
}

// Two harnesses; one of them at a time is SIGKILLed at a random moment (often inside a
// tick: between writing it pending, creating its session and writing its outcome) and
// started again. At the end, every fire time is ticked once or counted missed once, and
// no tick has two sessions.
TEST_F(SchedulesTest, SigkilledHarnessesNeverTickAFireTimeTwice) {
  int cycles = 6;
  if (const char* env = std::getenv("SINEW_SCHEDULE_CRASH_CYCLES")) cycles = std::atoi(env);
  auto b = StartHarness("b");
  ASSERT_FALSE(b->address.empty());
  const std::string id = CreateOk(R"({"cron": "*/2 * * * * *", "missed": "run_once", "task": {"prompt": "t", "model": "nop"}})");
  ASSERT_FALSE(id.empty());
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_ms(200, 2500);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    auto& victim = cycle % 2 == 0 ? harness_ : b;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    victim->proc->Signal(SIGKILL);
    victim->proc->Wait();
    victim = StartHarness(cycle % 2 == 0 ? "a" : "b");
    ASSERT_FALSE(victim->address.empty()) << "cycle " << cycle;
  }
  base_ = harness_->url();
  WaitForTicks(id, 2);
  // The pause waits for a tick in progress, or for the lease of a killed one to end.
  Reply paused;
  for (int i = 0; i < 50; ++i) {
    paused = Api("POST", base_ + "/v1/schedules/" + id + "/pause", kKeyA);
    if (paused.status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(paused.status, 200) << paused.body;
  ExpectEachFireTimeOnce(id, "*/2 * * * * *");
}

// `sinew schedule ...` (docs/cli.md) through the same API: its output and exit statuses.
struct CliResult {
  int exit = -1;
  std::string out;
};
CliResult Sinew(const std::string& base, const char* key, const std::vector<std::string>& args) {
  std::vector<std::string> argv{testing::BinaryPath("sinew"), "--server", base, "--api-key", key};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::Subprocess proc(argv);
  CliResult r;
  while (auto line = proc.ReadLine(std::chrono::seconds(60))) r.out += *line + "\n";
  r.out += proc.partial();
  const int status = proc.Wait();
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(SchedulesTest, TheCliCreatesListsPausesResumesAndRemovesASchedule) {
  CliResult created = Sinew(base_, kKeyA, {"schedule", "create", "--cron", "0 9 * * MON-FRI", "--timezone",
                                           "Europe/Berlin", "--missed", "run_once", "--model", "nop", "morning report"});
  ASSERT_EQ(created.exit, 0) << created.out;
  const std::string id = created.out.substr(0, created.out.find('\n'));
  ASSERT_EQ(id.size(), 32u) << created.out;
  auto got = Api("GET", base_ + "/v1/schedules/" + id, kKeyA);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.json.at("schedule").at("task").at("prompt").as_string(), "morning report");
  EXPECT_EQ(got.json.at("schedule").at("missed").as_string(), "run_once");
  CliResult listed = Sinew(base_, kKeyA, {"schedule", "ls"});
  EXPECT_EQ(listed.exit, 0);
  EXPECT_EQ(listed.out.rfind(id + "  active  0 9 * * MON-FRI  Europe/Berlin  next ", 0), 0u) << listed.out;
  CliResult paused = Sinew(base_, kKeyA, {"schedule", "pause", id});
  EXPECT_EQ(paused.exit, 0) << paused.out;
  EXPECT_NE(paused.out.find("paused"), std::string::npos) << paused.out;
  EXPECT_EQ(Sinew(base_, kKeyA, {"schedule", "resume", id}).exit, 0);
  CliResult never = Sinew(base_, kKeyA, {"schedule", "create", "--cron", "0 0 30 2 *", "p"});
  EXPECT_NE(never.exit, 0) << "a refused schedule fails the CLI: " << never.out;
  EXPECT_EQ(never.out, "");
  CliResult theirs = Sinew(base_, kKeyB, {"schedule", "rm", id});
  EXPECT_EQ(theirs.exit, 2) << "another tenant's id is not found: " << theirs.out;
  CliResult removed = Sinew(base_, kKeyA, {"schedule", "rm", id});
  EXPECT_EQ(removed.exit, 0) << removed.out;
  EXPECT_NE(removed.out.find("deleted"), std::string::npos) << removed.out;
  EXPECT_EQ(Sinew(base_, kKeyA, {"schedule", "ls"}).out, "");
}

}  // namespace
}  // namespace sinew::harness::test
