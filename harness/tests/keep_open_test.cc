// Conversations that stay open (docs/harness.md, "Conversations that stay open") against
// real sinew-store and sinew-harness processes: keep_open -> waiting_for_input at the end
// of each turn; a message runs another turn; close -> completed (a second close is 409,
// nothing appended); the idle limit closes it; a harness SIGKILLed while a session waits
// is restarted and the session still takes messages and still closes when idle; bad input.
#include <csignal>

#include <algorithm>
#include <thread>

#include "api_fixture.h"
#include "sinew/session_store/session_store.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

class KeepOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    WriteFile(dir_.Sub("chat.json"),
              R"({"responses": [{"text": "First answer."}, {"text": "Second answer."},
                                                       {"text": "Third answer."}]})");
    // A turn that takes a while: long enough to close the session while it runs.
    WriteFile(dir_.Sub("slow.json"),
              R"({"responses": [{"text": "Slow answer.", "delay_ms": 4000}]})");
    harness_ = StartHarness("harness.json");
    ASSERT_NE(harness_, nullptr);
    base_ = harness_->url();
  }

  std::string Config() const {
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" +
           std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "default_model": "chat",
      "models": {"chat": {"kind": "scripted", "script": ")" +
           dir_.path() + R"(/chat.json"},
                 "slow": {"kind": "scripted", "script": ")" +
           dir_.path() + R"(/slow.json"}},
      "lease_ttl_ms": 2000, "scan_interval_ms": 300})";
  }

  std::unique_ptr<HarnessProcess> StartHarness(const std::string& name) {
    auto h = std::make_unique<HarnessProcess>(dir_.Sub(name), Config());
    if (h->address.empty()) return nullptr;
    return h;
  }

  std::string Submit(const std::string& body) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  // Polls until the session has `responses` model responses and is waiting for input
  // again; false after 60 s.
  bool WaitForTurns(const std::string& id, size_t responses) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      auto events = AllEvents(base_, kKeyA, id);
      const size_t n = static_cast<size_t>(std::count_if(
          events.begin(), events.end(),
          [](const json::object& e) { return e.at("type").as_string() == "model_response"; }));
      if (n >= responses &&
          WaitForStatus(base_, kKeyA, id, "waiting_for_input", 1) == "waiting_for_input")
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  int64_t NextSeq(const std::string& id) {
    auto r = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json.at("session").at("next_seq").as_int64() : -1;
  }

  Reply Message(const std::string& id, const std::string& text) {
    return Api("POST", base_ + "/v1/sessions/" + id + "/messages", kKeyA,
               json::serialize(json::object{{"text", text}}));
  }

  // SIGKILLs the harness as if it had just logged `text` for session `id` (under a lease
  // of its own) and died before it woke the session; starts another harness.
  void KillHarnessAfterItLogged(const std::string& id, const std::string& text) {
    harness_->proc->Signal(SIGKILL);
    harness_->proc->Wait();
    auto store = store::ConnectSessionStore(store_->address);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<v1::Lease> lease = Status::Unavailable("not tried");
    for (int i = 0; i < 100 && !lease.ok(); ++i) {
      lease = (*store)->AcquireLease(id, {"a-harness-that-died", ""}, std::chrono::milliseconds(500));
      if (!lease.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    auto meta = (*store)->GetSession(id);
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    v1::AppendRequest req;
    req.set_session_id(id);
    req.set_expected_next_seq(meta->next_seq());
    req.set_lease_epoch(lease->epoch());
    req.add_events()->mutable_user_message()->set_text(text);
    ASSERT_TRUE((*store)->Append(req).ok());
    ASSERT_TRUE((*store)->ReleaseLease(id, "a-harness-that-died", lease->epoch()).ok());
    harness_ = StartHarness("restarted.json");
    ASSERT_NE(harness_, nullptr);
    base_ = harness_->url();
  }

  Reply Close(const std::string& id) {
    return Api("POST", base_ + "/v1/sessions/" + id + "/close", kKeyA);
  }

  testing::TempDir dir_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

constexpr const char* kRunning = "SESSION_STATUS_RUNNING";
constexpr const char* kWaiting = "SESSION_STATUS_WAITING_FOR_INPUT";
constexpr const char* kCompleted = "SESSION_STATUS_COMPLETED";

TEST_F(KeepOpenTest, TheEndOfATurnWaitsForInputAndAMessageRunsAnotherTurn) {
  const std::string id = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_TRUE(WaitForTurns(id, 1));
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting}));
  // The task keeps the flag and the default limit.
  auto created = OfType(events, "session_created");
  ASSERT_EQ(created.size(), 1u);
  auto task = json::parse(Str(created[0], "task_json")).as_object();
  EXPECT_TRUE(task.at("keep_open").as_bool());
  EXPECT_EQ(task.at("idle_close_seconds").as_int64(), 3600);
  // Listed by its status.
  auto listed = Api("GET", base_ + "/v1/sessions?status=waiting_for_input", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find(id), std::string::npos);

  auto sent = Message(id, "and then?");
  ASSERT_EQ(sent.status, 202) << sent.body;
  ASSERT_TRUE(WaitForTurns(id, 2));
  events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting, kRunning, kWaiting}));
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(Str(responses[1], "text"), "Second answer.");

  // Once more, then close.
  ASSERT_EQ(Message(id, "one more").status, 202);
  ASSERT_TRUE(WaitForTurns(id, 3));
  auto closed = Close(id);
  ASSERT_EQ(closed.status, 202) << closed.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting, kRunning, kWaiting,
                                                        kRunning, kWaiting, kCompleted}));
  auto changes = OfType(events, "status_change");
  EXPECT_NE(Str(changes.back(), "reason").find("closed by the user"), std::string::npos)
      << Str(changes.back(), "reason");
  auto audits = OfType(events, "audit");
  EXPECT_TRUE(std::any_of(audits.begin(), audits.end(),
                          [](const json::object& a) { return Str(a, "action") == "close"; }));
}

TEST_F(KeepOpenTest, ASecondCloseIs409AndAppendsNothing) {
  const std::string id = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_TRUE(WaitForTurns(id, 1));
  ASSERT_EQ(Close(id).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const int64_t seq = NextSeq(id);
  auto again = Close(id);
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json.at("error").at("code").as_string(), "conflict") << again.body;
  EXPECT_EQ(NextSeq(id), seq);
  // Unknown sessions and other tenants' sessions are 404.
  EXPECT_EQ(Api("POST", base_ + "/v1/sessions/" + id + "/close", kKeyB).status, 404);
  EXPECT_EQ(Api("GET", base_ + "/v1/sessions/" + id + "/close", kKeyA).status, 405);
}

// A fork of a closed conversation is open: the close belonged to the source.
TEST_F(KeepOpenTest, AForkOfAClosedConversationStaysOpen) {
  const std::string id = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_TRUE(WaitForTurns(id, 1));
  ASSERT_EQ(Close(id).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto forked =
      Api("POST", base_ + "/v1/sessions/" + id + "/fork", kKeyA,
          json::serialize(json::object{{"at_seq", NextSeq(id) - 1}, {"message", "And then?"}}));
  ASSERT_EQ(forked.status, 201) << forked.body;
  const std::string fork(forked.json.at("session").at("id").as_string());
  ASSERT_TRUE(WaitForTurns(fork, 2)) << "the fork did not wait for input after its turn";
  auto events = AllEvents(base_, kKeyA, fork);
  const auto audits = OfType(events, "audit");
  EXPECT_TRUE(std::none_of(audits.begin(), audits.end(),
                           [](const json::object& a) { return Str(a, "action") == "close"; }));
  ASSERT_EQ(Close(fork).status, 202);
  EXPECT_EQ(WaitForStatus(base_, kKeyA, fork, "completed"), "completed");
}

// A close while the model works ends the session at the end of that turn: it does not
// wait for input.
TEST_F(KeepOpenTest, ACloseWhileATurnRunsCompletesItAtTheEndOfTheTurn) {
  const std::string id = Submit(R"({"prompt": "hello", "model": "slow", "keep_open": true})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "running,waiting_for_input"), "running");
  auto closed = Close(id);
  ASSERT_EQ(closed.status, 202) << closed.body;
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,waiting_for_input"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kCompleted}));
  EXPECT_EQ(OfType(events, "model_response").size(), 1u);
  auto changes = OfType(events, "status_change");
  EXPECT_NE(Str(changes.back(), "reason").find("closed by the user"), std::string::npos)
      << Str(changes.back(), "reason");
  EXPECT_EQ(Close(id).status, 409);
}

TEST_F(KeepOpenTest, ASessionWithoutKeepOpenCompletesAsBefore) {
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  EXPECT_EQ(Statuses(AllEvents(base_, kKeyA, id)),
            (std::vector<std::string>{kRunning, kCompleted}));
  EXPECT_EQ(Close(id).status, 409);
}

TEST_F(KeepOpenTest, ASessionIdlePastItsLimitCompletes) {
  const std::string id =
      Submit(R"({"prompt": "hello", "keep_open": true, "idle_close_seconds": 1})");
  // Polled, without a bound on when: the scanner wakes it once the limit has passed.
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting, kCompleted}));
  auto changes = OfType(events, "status_change");
  EXPECT_NE(Str(changes.back(), "reason").find("idle_close_seconds"), std::string::npos)
      << Str(changes.back(), "reason");
}

// Nothing of a wait is in a harness's memory: after a SIGKILL another harness takes a
// message for one waiting session (a limit far off) and closes another at its idle limit.
TEST_F(KeepOpenTest, AHarnessKilledWhileASessionWaitsIsRestartedAndTheSessionGoesOn) {
  const std::string talk = Submit(R"({"prompt": "hello", "keep_open": true})");
  const std::string idle =
      Submit(R"({"prompt": "hello", "keep_open": true, "idle_close_seconds": 3})");
  ASSERT_TRUE(WaitForTurns(talk, 1));
  ASSERT_TRUE(WaitForTurns(idle, 1));
  harness_->proc->Signal(SIGKILL);
  harness_->proc->Wait();
  harness_ = StartHarness("restarted.json");
  ASSERT_NE(harness_, nullptr);
  base_ = harness_->url();
  EXPECT_EQ(WaitForStatus(base_, kKeyA, talk, "waiting_for_input", 1), "waiting_for_input");
  ASSERT_EQ(Message(talk, "still there?").status, 202);
  ASSERT_TRUE(WaitForTurns(talk, 2));
  auto events = AllEvents(base_, kKeyA, talk);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting, kRunning, kWaiting}));
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(Str(responses[1], "text"), "Second answer.");
  ASSERT_EQ(Close(talk).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, talk, "completed"), "completed");

  // The idle limit counts from the last recorded event, whichever harness is up then.
  ASSERT_EQ(WaitForStatus(base_, kKeyA, idle, "completed"), "completed");
  events = AllEvents(base_, kKeyA, idle);
  EXPECT_EQ(Statuses(events), (std::vector<std::string>{kRunning, kWaiting, kCompleted}));
  auto changes = OfType(events, "status_change");
  EXPECT_NE(Str(changes.back(), "reason").find("idle_close_seconds"), std::string::npos)
      << Str(changes.back(), "reason");
  EXPECT_EQ(OfType(events, "model_response").size(), 1u);
}

// A harness logged a message for a waiting session and died before it woke the session.
// The message was acknowledged: the next harness gives it its turn, unasked.
TEST_F(KeepOpenTest, AMessageWhoseWakeWasLostWithItsHarnessStillGetsItsTurn) {
  const std::string id = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_TRUE(WaitForTurns(id, 1));
  KillHarnessAfterItLogged(id, "are you there?");
  ASSERT_TRUE(WaitForTurns(id, 2));
  auto responses = OfType(AllEvents(base_, kKeyA, id), "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(Str(responses[1], "text"), "Second answer.");
}

// The same, with a close sent before the new harness has woken the session: the message
// gets its turn first, and then the close ends the session as closed by the user.
TEST_F(KeepOpenTest, ACloseAfterAMessageWhoseWakeWasLostAnswersTheMessageFirst) {
  const std::string id = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_TRUE(WaitForTurns(id, 1));
  KillHarnessAfterItLogged(id, "are you there?");
  ASSERT_EQ(Close(id).status, 202);
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u) << "the acknowledged message got no turn";
  EXPECT_EQ(Str(responses[1], "text"), "Second answer.");
  auto changes = OfType(events, "status_change");
  EXPECT_NE(Str(changes.back(), "reason").find("closed by the user"), std::string::npos)
      << Str(changes.back(), "reason");
}

TEST_F(KeepOpenTest, BadKeepOpenInputIs400AndCreatesNothing) {
  for (const char* body :
       {R"({"prompt": "x", "keep_open": "yes"})", R"({"prompt": "x", "keep_open": 1})",
        R"({"prompt": "x", "idle_close_seconds": 5})",
        R"({"prompt": "x", "keep_open": false, "idle_close_seconds": 5})",
        R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 0})",
        R"({"prompt": "x", "keep_open": true, "idle_close_seconds": -1})",
        R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 1.5})",
        R"({"prompt": "x", "keep_open": true, "idle_close_seconds": "60"})",
        R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 2592001})"}) {
    auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    if (r.status == 400) {
      EXPECT_EQ(r.json.at("error").at("code").as_string(), "invalid_argument") << r.body;
    }
  }
  auto listed = Api("GET", base_ + "/v1/sessions", kKeyA);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_TRUE(listed.json.at("sessions").as_array().empty()) << listed.body;
  // The largest limit is taken.
  const std::string id =
      Submit(R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 2592000})");
  EXPECT_FALSE(id.empty());
}

}  // namespace
}  // namespace sinew::harness::test
