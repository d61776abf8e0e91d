// Crash recovery: SIGKILL the harness at random moments, restart it, repeat. Every
// session must finish, its log must have no gaps, every tool call must have exactly one
// result, and no non-idempotent call may take effect twice. Side effects are counted by
// the target of the http_request proxy tool (an HTTP server in this test): each POST
// carries its session and call id in its path.
//
// SINEW_CRASH_CYCLES sets the number of kills (default 30; the `long` label runs 300).
#include <gtest/gtest.h>
#include <signal.h>

#include <random>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "crash-key";

TEST(CrashTest, KilledHarnessesLoseNothingAndRepeatNoSideEffect) {
  const char* env = std::getenv("SINEW_CRASH_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 30;
  testing::TempDir dir;
  std::mutex mutex;
  std::map<std::string, int> effects;  // POST path -> times it took effect
  TestHttpServer target([&](const TestHttpServer::Request& r) {
    TestHttpServer::Response resp;
    resp.content_type = "text/plain";
    resp.body = r.method + " " + r.target;
    if (r.method == "POST") {
      resp.delay_ms = 20;  // a window in which the harness may die mid-call
      std::lock_guard<std::mutex> lock(mutex);
      ++effects[r.target];
    }
    return resp;
  });
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  const std::string t = target.url();
  auto post = [&](int n) {
    return R"({"name": "http_request", "input": {"method": "POST", "url": ")" + t + "/effect/{{session_id}}/{{call_id}}/" +
           std::to_string(n) + R"(", "body": "x"}})";
  };
  auto get = [&] { return R"({"name": "http_request", "input": {"url": ")" + t + R"(/read/{{session_id}}/{{call_id}}"}})"; };
  const int kResponses = 6;
  WriteFile(dir.Sub("script.json"), R"({"responses": [
    {"text": "one", "delay_ms": 15, "tool_calls": [)" + post(1) + "," + get() + R"(]},
    {"text": "two", "delay_ms": 15, "tool_calls": [)" + get() + R"(]},
    {"text": "three", "delay_ms": 15, "tool_calls": [)" + post(2) + "," + post(3) + R"(]},
    {"text": "four", "delay_ms": 15, "tool_calls": [)" + post(4) + R"(]},
    {"text": "five", "delay_ms": 15, "tool_calls": [)" + get() + "," + post(5) + R"(]},
    {"text": "done", "delay_ms": 15}]})");
  const std::string config = R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address + R"("},
    "api_keys": {")" + std::string(kKey) + R"(": "crash"},
    "models": {"scripted": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("}},
    "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target.port()) + R"("}]},
    "lease_ttl_ms": 600, "scan_interval_ms": 200})";

  std::mt19937 rng(std::random_device{}());
  int submitted = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    HarnessProcess harness(dir.Sub("harness.json"), config);
    ASSERT_FALSE(harness.address.empty()) << "cycle " << cycle;
    for (int i = 0; i < 2; ++i) {
      auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "crash me"})");
      if (r.status == 201) ++submitted;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 700)(rng)));
    harness.proc->Signal(SIGKILL);
    harness.proc->Wait();
  }
  // A last harness, left alone, finishes everything.
  HarnessProcess final_harness(dir.Sub("harness.json"), config);
  ASSERT_FALSE(final_harness.address.empty());
  const std::string base = final_harness.url();
  std::vector<std::string> ids;
  std::string token;
  do {
    auto page = Api("GET", base + "/v1/sessions?limit=1000" + (token.empty() ? "" : "&page_token=" + token), kKey);
    ASSERT_EQ(page.status, 200);
    for (const auto& s : page.json.at("sessions").as_array()) ids.emplace_back(s.at("id").as_string());
    token = std::string(page.json.at("next_page_token").as_string());
  } while (!token.empty());
  EXPECT_GE(static_cast<int>(ids.size()), submitted);
  int interrupted = 0, reruns_avoided = 0, posts_checked = 0;
  for (const auto& id : ids) {
    const std::string status = WaitForStatus(base, kKey, id, "completed,failed,cancelled", 120);
    auto events = AllEvents(base, kKey, id);
    if (status != "completed") {
      // Say why: the session's log (its last events tell where it stopped), what the store
      // says of its lease, and the last harness's lines about it.
      std::string why;
      for (size_t i = events.size() > 12 ? events.size() - 12 : 0; i < events.size(); ++i) {
        why += json::serialize(events[i]) + "\n";
      }
      why += "session: " + Api("GET", base + "/v1/sessions/" + id, kKey).body + "\n";
      for (const auto& line : ReadJsonLines(final_harness.proc.get(), std::chrono::milliseconds(500))) {
        if (json::serialize(line).find(id) != std::string::npos) why += json::serialize(line) + "\n";
      }
      FAIL() << id << " is " << status << ":\n" << why;
    }
    std::map<std::string, int> calls, results;
    std::map<std::string, json::object> result_of;
    std::map<std::string, std::string> url_of;
    int responses = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      ASSERT_EQ(e.at("seq").as_string(), std::to_string(i + 1)) << id << ": a gap in the log";
      if (e.contains("model_response")) ++responses;
      if (e.contains("tool_call")) {
        const std::string call(e.at("tool_call").at("call_id").as_string());
        ++calls[call];
        url_of[call] = std::string(e.at("tool_call").at("input_json").as_string());
      }
      if (e.contains("tool_result")) {
        const std::string call(e.at("tool_result").at("call_id").as_string());
        ++results[call];
        result_of[call] = e.at("tool_result").as_object();
      }
    }
    EXPECT_EQ(responses, kResponses) << id << ": each turn's response is recorded once";
    EXPECT_EQ(calls.size(), 8u) << id;
    for (const auto& [call, n] : calls) {
      EXPECT_EQ(n, 1) << id << " " << call << ": one tool_call event per call";
      EXPECT_EQ(results[call], 1) << id << " " << call << ": exactly one result";
      if (url_of[call].find("\"POST\"") == std::string::npos) continue;
      ++posts_checked;
      const std::string path = "/effect/" + id + "/" + call + "/";
      int taken = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& [p, count] : effects) {
          if (p.rfind(path, 0) == 0) taken += count;
        }
      }
      const bool was_interrupted = result_of[call].contains("interrupted") && result_of[call].at("interrupted").as_bool();
      EXPECT_LE(taken, 1) << id << " " << call << ": a non-idempotent call took effect twice";
      if (was_interrupted) {
        ++interrupted;
        reruns_avoided += taken;
      } else {
        EXPECT_EQ(taken, 1) << id << " " << call << ": a completed call must have taken effect once";
      }
    }
  }
  std::printf("crash test: %d kills, %zu sessions, %d POST calls checked, %d interrupted (%d of them had taken effect)\n",
              cycles, ids.size(), posts_checked, interrupted, reruns_avoided);
}

}  // namespace
}  // namespace sinew::harness::test
