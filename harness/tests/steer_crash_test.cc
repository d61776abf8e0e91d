// Steering under crashes: the harness is SIGKILLed at random moments while sessions
// wait for a decision (requires_action) or for input (keep_open, waiting_for_input),
// and while decisions, messages and closes are sent to it. After a last harness is left
// alone, every session has completed, its log has no gaps, and:
//  - every call that asked has one request, one decision and one result; an approved
//    call took effect exactly once at the target, a denied one never; a decision that
//    was acknowledged (200) is the one in the log. (A kill between a POST's tool_call and
//    its request leaves a result marked interrupted: the harness never sends a POST
//    again behind the model's back, so that call took effect at most once);
//  - every message that was acknowledged (202) is in the log once and got its own
//    turn; a close that was acknowledged ends the session as closed by the user.
// The target of http_request is an HTTP server in this test that counts each POST by
// its session and call id.
//
// SINEW_STEER_CRASH_CYCLES sets the number of kills (default 10; the `long` label runs 100).
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <mutex>
#include <random>
#include <set>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

struct Asking {
  std::string id;
  std::map<std::string, std::string> acknowledged;  // call id -> "approve" or "deny"
};

struct Open {
  std::string id;
  std::set<std::string> acknowledged;  // message texts answered 202
  std::set<std::string> sent;          // every message text sent, answered or not
  bool close_acknowledged = false;
};

std::string SessionStatus(const std::string& base, const std::string& id) {
  auto r = Api("GET", base + "/v1/sessions/" + id, kKeyA);
  return r.status == 200 ? std::string(r.json.at("session").at("status").as_string()) : "";
}

std::vector<std::string> PendingCalls(const std::string& base, const std::string& id) {
  std::vector<std::string> calls;
  auto r = Api("GET", base + "/v1/sessions/" + id, kKeyA);
  if (r.status != 200) return calls;
  const auto* pending = r.json.at("session").as_object().if_contains("pending_approvals");
  if (pending == nullptr) return calls;
  for (const auto& p : pending->as_array()) calls.emplace_back(p.at("call_id").as_string());
  return calls;
}

int Decide(const std::string& base, const std::string& id, const std::string& call,
           const std::string& decision) {
  json::object d{{"call_id", call}, {"decision", decision}};
  return Api("POST", base + "/v1/sessions/" + id + "/decisions", kKeyA,
             json::serialize(json::object{{"decisions", json::array{d}}}))
      .status;
}

bool Flag(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

TEST(SteerCrashTest, KilledHarnessesKeepEveryDecisionMessageAndCloseOnce) {
  const char* env = std::getenv("SINEW_STEER_CRASH_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 10;
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
  const std::string post = R"({"name": "http_request", "input": {"method": "POST", "url": ")" +
                           target.url() + R"(/effect/{{session_id}}/{{call_id}}", "body": "x"}})";
  WriteFile(dir.Sub("post.json"), R"({"responses": [
    {"text": "Posting twice.", "tool_calls": [)" + post + "," + post + R"(]},
    {"text": "Once more.", "tool_calls": [)" + post + R"(]},
    {"text": "Done."}]})");
  WriteFile(dir.Sub("chat.json"), R"({"loop": true, "responses": [{"text": "An answer."}]})");
  const std::string config =
      R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address + R"("},
    "api_keys": {")" + std::string(kKeyA) + R"(": "tenant-a"},
    "default_model": "chat",
    "models": {"post": {"kind": "scripted", "script": ")" + dir.Sub("post.json") + R"("},
               "chat": {"kind": "scripted", "script": ")" + dir.Sub("chat.json") + R"("}},
    "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target.port()) + R"("}]},
    "lease_ttl_ms": 600, "scan_interval_ms": 200})";

  std::mt19937 rng(std::random_device{}());
  auto chance = [&](int percent) {
    return std::uniform_int_distribution<int>(0, 99)(rng) < percent;
  };
  auto pause = [&](int max_ms) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, max_ms)(rng)));
  };
  std::vector<Asking> asking;
  std::vector<Open> open;
  int messages = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    HarnessProcess harness(dir.Sub("harness.json"), config);
    ASSERT_FALSE(harness.address.empty()) << "cycle " << cycle;
    const std::string base = harness.url();
    auto a = Api("POST", base + "/v1/sessions", kKeyA,
                 R"({"prompt": "post", "model": "post", "approvals": {"default": "ask"}})");
    if (a.status == 201) asking.push_back({std::string(a.json.at("session").at("id").as_string()), {}});
    auto o = Api("POST", base + "/v1/sessions", kKeyA, R"({"prompt": "hello", "keep_open": true})");
    if (o.status == 201) {
      Open s;
      s.id = std::string(o.json.at("session").at("id").as_string());
      open.push_back(std::move(s));
    }
    pause(400);
    // Steer whatever waits now; the kill below may land while any of it is applied.
    for (Asking& s : asking) {
      if (!chance(60)) continue;
      for (const std::string& call : PendingCalls(base, s.id)) {
        const std::string decision = chance(70) ? "approve" : "deny";
        if (Decide(base, s.id, call, decision) == 200) s.acknowledged[call] = decision;
      }
    }
    for (Open& s : open) {
      if (s.close_acknowledged || !chance(60)) continue;
      if (SessionStatus(base, s.id) != "waiting_for_input") continue;
      if (chance(20)) {
        auto closed = Api("POST", base + "/v1/sessions/" + s.id + "/close", kKeyA);
        s.close_acknowledged = closed.status == 202;
        continue;
      }
      const std::string text = "message " + std::to_string(++messages);
      s.sent.insert(text);
      auto sent = Api("POST", base + "/v1/sessions/" + s.id + "/messages", kKeyA,
                      json::serialize(json::object{{"text", text}}));
      if (sent.status == 202) s.acknowledged.insert(text);
    }
    pause(300);
    harness.proc->Signal(SIGKILL);
    harness.proc->Wait();
  }

  // A last harness, left alone: approve what still asks, close what still waits.
  HarnessProcess final_harness(dir.Sub("harness.json"), config);
  ASSERT_FALSE(final_harness.address.empty());
  const std::string base = final_harness.url();
  for (Asking& s : asking) {
    for (;;) {
      const std::string status = WaitForStatus(base, kKeyA, s.id, "requires_action,completed", 60);
      ASSERT_TRUE(status == "requires_action" || status == "completed") << s.id << ": " << status;
      if (status == "completed") break;
      for (const std::string& call : PendingCalls(base, s.id)) {
        if (Decide(base, s.id, call, "approve") == 200) s.acknowledged[call] = "approve";
      }
      // The decision is recorded before the 200: wait for the session to move on.
      for (int i = 0; i < 600 && !PendingCalls(base, s.id).empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  for (Open& s : open) {
    const std::string status = WaitForStatus(base, kKeyA, s.id, "waiting_for_input,completed", 60);
    ASSERT_TRUE(status == "waiting_for_input" || status == "completed") << s.id << ": " << status;
    if (status == "waiting_for_input") {
      ASSERT_EQ(Api("POST", base + "/v1/sessions/" + s.id + "/close", kKeyA).status, 202);
    }
    ASSERT_EQ(WaitForStatus(base, kKeyA, s.id, "completed", 60), "completed") << s.id;
  }

  int decisions = 0, approved_posts = 0;
  for (const Asking& s : asking) {
    const auto events = AllEvents(base, kKeyA, s.id);
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1)) << s.id << ": a gap";
    }
    std::map<std::string, int> requested, results;
    std::map<std::string, std::vector<bool>> decided;  // call id -> approved, per event
    for (const auto& r : OfType(events, "approval_requested")) ++requested[Str(r, "call_id")];
    for (const auto& d : OfType(events, "approval_decided")) {
      decided[Str(d, "call_id")].push_back(Flag(d, "approved"));
    }
    std::set<std::string> interrupted;  // "may or may not have taken effect"
    for (const auto& r : OfType(events, "tool_result")) {
      ++results[Str(r, "call_id")];
      if (Flag(r, "interrupted")) interrupted.insert(Str(r, "call_id"));
    }
    EXPECT_FALSE(requested.empty()) << s.id;
    for (const auto& [call, n] : requested) {
      EXPECT_EQ(n, 1) << s.id << " " << call << ": asked once";
      ASSERT_EQ(decided[call].size(), 1u) << s.id << " " << call << ": decided once";
      EXPECT_EQ(results[call], 1) << s.id << " " << call << ": one result";
      const bool approved = decided[call][0];
      ++decisions;
      if (auto it = s.acknowledged.find(call); it != s.acknowledged.end()) {
        EXPECT_EQ(approved, it->second == "approve") << s.id << " " << call
                                                     << ": not the acknowledged decision";
      }
      int taken = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = effects.find("/effect/" + s.id + "/" + call);
        if (it != effects.end()) taken = it->second;
      }
      if (approved && interrupted.count(call) != 0) {
        EXPECT_LE(taken, 1) << s.id << " " << call << ": interrupted, yet took effect " << taken
                            << " times";
      } else {
        EXPECT_EQ(taken, approved ? 1 : 0) << s.id << " " << call << ": took effect " << taken
                                           << " times, approved " << approved;
      }
      approved_posts += approved;
    }
  }
  int closes = 0;
  for (const Open& s : open) {
    const auto events = AllEvents(base, kKeyA, s.id);
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1)) << s.id << ": a gap";
    }
    std::map<std::string, int> seen;
    int user_turns = 0;
    for (const auto& m : OfType(events, "user_message")) {
      const std::string text = Str(m, "text");
      if (s.sent.count(text) != 0) {
        ++seen[text];
        ++user_turns;
      }
    }
    for (const std::string& text : s.acknowledged) {
      EXPECT_EQ(seen[text], 1) << s.id << ": the acknowledged \"" << text << "\" is logged once";
    }
    for (const auto& [text, n] : seen) EXPECT_EQ(n, 1) << s.id << ": \"" << text << "\"";
    // The first turn answers the prompt; every logged message gets one more.
    EXPECT_EQ(OfType(events, "model_response").size(), static_cast<size_t>(1 + user_turns))
        << s.id;
    const auto changes = OfType(events, "status_change");
    ASSERT_FALSE(changes.empty());
    if (s.close_acknowledged) {
      EXPECT_NE(Str(changes.back(), "reason").find("closed by the user"), std::string::npos)
          << s.id << ": " << Str(changes.back(), "reason");
      ++closes;
    }
  }
  std::printf(
      "steer crash test: %d kills, %zu asking sessions (%d decisions, %d approved POSTs), %zu "
      "open sessions (%d messages sent, %d closes acknowledged mid-run)\n",
      cycles, asking.size(), decisions, approved_posts, open.size(), messages, closes);
}

}  // namespace
}  // namespace sinew::harness::test
