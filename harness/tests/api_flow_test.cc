// The API's flows against a real harness and store: a task runs to completion with its
// log written ahead; SSE reconnects lose and repeat nothing; cancel, follow-up messages,
// limits, fork, import; credentials injected by the proxy tool and redacted everywhere.
#include <csignal>

#include <algorithm>
#include <set>

#include "api_fixture.h"
#include "sinew/session_store/session_store.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
using ApiFlowTest = ApiFixture;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> Types(const std::vector<json::object>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e.at("type").as_string());
  return out;
}

TEST_F(ApiFlowTest, ATaskRunsInTheBackgroundAndItsLogIsWrittenAhead) {
  auto r = Api("POST", base_ + "/v1/sessions", kKeyA, R"({"prompt": "fetch the data", "title": "t1"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto& s = r.json.at("session");
  EXPECT_EQ(s.at("status").as_string(), "queued");
  EXPECT_EQ(s.at("tenant").as_string(), "tenant-a");
  EXPECT_EQ(s.at("title").as_string(), "t1");
  EXPECT_EQ(s.at("id").as_string().size(), 32u);
  const std::string id(s.at("id").as_string());
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(Types(events), (std::vector<std::string>{"session_created", "user_message", "status_change",
                                                     "model_request", "model_response", "tool_call", "tool_result",
                                                     "model_request", "model_response", "status_change"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].at("seq").as_string(), std::to_string(i + 1));
  EXPECT_EQ(events[6].at("tool_result").at("call_id").as_string(), events[5].at("tool_call").at("call_id").as_string());
  EXPECT_NE(std::string(events[6].at("tool_result").at("output").as_string()).find("echo GET /data"), std::string::npos);
  EXPECT_EQ(events.back().at("status_change").at("to").as_string(), "SESSION_STATUS_COMPLETED");
  // Positional slices.
  auto page = Api("GET", base_ + "/v1/sessions/" + id + "/events?after=3&limit=2", kKeyA);
  ASSERT_EQ(page.status, 200);
  ASSERT_EQ(page.json.at("events").as_array().size(), 2u);
  EXPECT_EQ(page.json.at("events").at(0).at("seq").as_string(), "4");
  EXPECT_EQ(page.json.at("next_seq").as_int64(), 11);
  auto past_end = Api("GET", base_ + "/v1/sessions/" + id + "/events?after=50", kKeyA);
  EXPECT_EQ(past_end.json.at("events").as_array().size(), 0u);
  // Listing with a status filter and paging.
  Submit(R"({"prompt": "second"})");
  auto list = Api("GET", base_ + "/v1/sessions?limit=1", kKeyA);
  ASSERT_EQ(list.json.at("sessions").as_array().size(), 1u);
  const std::string token(list.json.at("next_page_token").as_string());
  EXPECT_FALSE(token.empty());
  auto next = Api("GET", base_ + "/v1/sessions?limit=1&page_token=" + token, kKeyA);
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json.at("sessions").at(0).at("id").as_string(), id);  // newest first
  auto done = Api("GET", base_ + "/v1/sessions?status=completed", kKeyA);
  for (const auto& x : done.json.at("sessions").as_array()) EXPECT_EQ(x.at("status").as_string(), "completed");
}

TEST_F(ApiFlowTest, TheModelSeesTheTaskAndTheSystemPromptFromTheFirstCall) {
  const std::string id = Submit(R"({"prompt": "count the stars", "system": "you are terse", "model": "served"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed,failed"), "completed");
  bool seen = false;
  for (const auto& r : target_->requests()) {
    if (r.target != "/llm/chat/completions") continue;
    seen = true;
    auto body = json::parse(r.body).as_object();
    const auto& messages = body.at("messages").as_array();
    ASSERT_EQ(messages.size(), 2u) << r.body;
    EXPECT_EQ(messages[0].at("content").as_string(), "you are terse");
    EXPECT_EQ(messages[1].at("role").as_string(), "user");
    EXPECT_EQ(messages[1].at("content").as_string(), "count the stars");
    EXPECT_FALSE(body.at("tools").as_array().empty());
  }
  EXPECT_TRUE(seen);
}

TEST_F(ApiFlowTest, StreamReconnectWithLastEventIdLosesAndRepeatsNothing) {
  const std::string id = Submit(R"({"prompt": "slow work", "model": "slow"})");
  ASSERT_FALSE(id.empty());
  const std::string url = base_ + "/v1/sessions/" + id + "/events/stream";
  std::vector<SseEvent> seen = ReadStream(url, kKeyA, "", 4);
  ASSERT_EQ(seen.size(), 4u);
  // Reconnect (twice), each time from the last id received.
  auto more = ReadStream(url, kKeyA, std::to_string(seen.back().id), 3);
  seen.insert(seen.end(), more.begin(), more.end());
  auto rest = ReadStream(url, kKeyA, std::to_string(seen.back().id), 1000);
  seen.insert(seen.end(), rest.begin(), rest.end());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().type, "status_change");  // the server ended the stream at the end
  auto all = AllEvents(base_, kKeyA, id);
  ASSERT_EQ(seen.size(), all.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].id, i + 1);
    EXPECT_EQ(seen[i].type, std::string(all[i].at("type").as_string()));
    EXPECT_EQ(json::parse(seen[i].data).as_object(), all[i]);
  }
  // ?after= works the same; a finished session's stream sends the past and ends.
  auto tail = ReadStream(url + "?after=" + std::to_string(all.size() - 2), kKeyA, "", 1000);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].id, all.size() - 1);
}

TEST_F(ApiFlowTest, CancelEndsARunningSessionWithAFinalStatusEvent) {
  const std::string id = Submit(R"({"prompt": "think forever", "model": "stuck"})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "running"), "running");
  auto c = Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyA);
  EXPECT_EQ(c.status, 202) << c.body;
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "cancelled", 30), "cancelled");
  auto events = AllEvents(base_, kKeyA, id);
  EXPECT_EQ(events.back().at("status_change").at("reason").as_string(), "cancelled by the user");
  auto again = Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyA);
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(ErrorCode(again), "conflict");
}

TEST_F(ApiFlowTest, AFollowUpMessageWakesAFinishedSession) {
  const std::string id = Submit(R"({"prompt": "first"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const size_t before = AllEvents(base_, kKeyA, id).size();
  auto m = Api("POST", base_ + "/v1/sessions/" + id + "/messages", kKeyA, R"({"text": "and then?"})");
  ASSERT_EQ(m.status, 202) << m.body;
  // It runs again and completes again: wait until the log has grown past the message.
  for (int i = 0; i < 400 && AllEvents(base_, kKeyA, id).size() < before + 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, id);
  ASSERT_GT(events.size(), before);
  EXPECT_EQ(events[before].at("user_message").at("text").as_string(), "and then?");
  EXPECT_EQ(events.back().at("status_change").at("to").as_string(), "SESSION_STATUS_COMPLETED");
}

// A session whose driving harness has just died is between drivers until its lease ends:
// a follow-up message or a cancel for it is a 503 whose Retry-After is when that lease
// ends (a client retries that), never a 409 (which says the request conflicts with the
// session; it was the answer when the request came forwarded from another harness), and
// changes nothing. docs/harness.md, "Errors".
TEST_F(ApiFlowTest, AMessageForASessionWhoseHarnessJustDiedIs503WithRetryAfter) {
  harness_.reset();  // only a and b below drive sessions
  std::string config = Config();
  const std::string ttl = R"("lease_ttl_ms": 2000)";
  ASSERT_NE(config.find(ttl), std::string::npos);
  config.replace(config.find(ttl), ttl.size(), R"("lease_ttl_ms": 120000)");  // outlives the test
  HarnessProcess a(dir_.Sub("a.json"), config);
  HarnessProcess b(dir_.Sub("b.json"), config);
  ASSERT_FALSE(a.address.empty());
  ASSERT_FALSE(b.address.empty());
  auto created = Api("POST", a.url() + "/v1/sessions", kKeyA, R"({"prompt": "think", "model": "stuck"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(a.url(), kKeyA, id, "running"), "running");
  a.proc->Signal(SIGKILL);
  a.proc->Wait();
  auto store = store::ConnectSessionStore(store_->address);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto leased = (*store)->GetSession(id);
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << "a's lease is gone";
  const int64_t lease_ends_ms = leased->lease().expires_unix_ms();
  const size_t before = AllEvents(b.url(), kKeyA, id).size();
  const std::string s = b.url() + "/v1/sessions/" + id;
  const std::string auth = "Authorization: Bearer " + std::string(kKeyA), as_json = "Content-Type: application/json";
  struct Case {
    std::string what, path, body;
    std::vector<std::string> headers;
  };
  const std::vector<Case> cases = {
      {"message", s + "/messages", R"({"text": "more"})", {auth, as_json}},
      {"cancel", s + "/cancel", "", {auth, as_json}},
      {"message forwarded by another harness", s + "/messages", R"({"text": "more"})",
       {auth, as_json, "X-Sinew-Forwarded: 1"}},
      {"cancel forwarded by another harness", s + "/cancel", "", {auth, as_json, "X-Sinew-Forwarded: 1"}},
  };
  for (const auto& c : cases) {
    const int64_t sent_ms = NowMs();
    const Reply reply = Call("POST", c.path, c.body, c.headers);
    const int64_t answered_ms = NowMs();
    EXPECT_EQ(reply.status, 503) << c.what << ": " << reply.body;
    EXPECT_EQ(ErrorCode(reply), "unavailable") << c.what;
    const std::string retry = reply.Header("retry-after");
    ASSERT_FALSE(retry.empty()) << c.what << ": no Retry-After";
    // The seconds left of a's lease, rounded up, when the harness answered.
    EXPECT_GE(std::stoll(retry), (lease_ends_ms - answered_ms) / 1000) << c.what;
    EXPECT_LE(std::stoll(retry), (lease_ends_ms - sent_ms + 999) / 1000) << c.what;
  }
  EXPECT_EQ(AllEvents(b.url(), kKeyA, id).size(), before) << "a refused request changed the log";
  EXPECT_EQ(Api("GET", s, kKeyA).json.at("session").at("status").as_string(), "running");
}

TEST_F(ApiFlowTest, TheTurnLimitEndsTheSessionAsFailed) {
  const std::string id = Submit(R"({"prompt": "loop", "model": "loop", "limits": {"max_turns": 3}})");
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "failed"), "failed");
  auto events = AllEvents(base_, kKeyA, id);
  int responses = 0;
  for (const auto& e : events) responses += e.contains("model_response") ? 1 : 0;
  EXPECT_EQ(responses, 3);
  const auto& error = events[events.size() - 2].at("error");
  EXPECT_EQ(error.at("code").as_string(), "limit_exceeded");
  EXPECT_NE(std::string(events.back().at("status_change").at("reason").as_string()).find("max_turns 3"),
            std::string::npos);
}

TEST_F(ApiFlowTest, ProxyToolInjectsTheCredentialAndTheLogNeverHoldsIt) {
  const std::string id = Submit(std::string(R"({"prompt": "use the token )") + kSecret + R"(", "model": "secret"})");
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  // The allowed host received the harness's credential, not the model's guess.
  bool saw = false;
  for (const auto& r : target_->requests()) {
    if (r.target == "/private") {
      saw = true;
      EXPECT_EQ(r.headers.at("authorization"), std::string("Bearer ") + kSecret);
    }
    EXPECT_NE(r.target, "/other") << "a host that is not allowed was reached";
  }
  EXPECT_TRUE(saw);
  std::string log;
  for (const auto& e : AllEvents(base_, kKeyA, id)) log += json::serialize(e) + "\n";
  EXPECT_EQ(log.find(kSecret), std::string::npos) << log;
  EXPECT_NE(log.find("[REDACTED:target_token]"), std::string::npos);
  EXPECT_NE(log.find("is not allowed; allowed hosts"), std::string::npos);
  auto session = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  EXPECT_EQ(session.body.find(kSecret), std::string::npos);
}

TEST_F(ApiFlowTest, ForkCopiesThePrefixAndContinues) {
  const std::string id = Submit(R"({"prompt": "original"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto f = Api("POST", base_ + "/v1/sessions/" + id + "/fork", kKeyA, R"({"at_seq": 2, "message": "also this"})");
  ASSERT_EQ(f.status, 201) << f.body;
  EXPECT_EQ(f.json.at("session").at("forked_from_session").as_string(), id);
  EXPECT_EQ(f.json.at("session").at("forked_at_seq").as_int64(), 2);
  const std::string fork(f.json.at("session").at("id").as_string());
  EXPECT_EQ(WaitForStatus(base_, kKeyA, fork, "completed"), "completed");
  auto events = AllEvents(base_, kKeyA, fork);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0].at("session_created").at("forked_from_session").as_string(), id);
  EXPECT_EQ(events[1].at("user_message").at("text").as_string(), "original");
  EXPECT_EQ(events[3].at("user_message").at("text").as_string(), "also this");
}

// An export is a read (docs/security.md, "Audit log"): the session's log stays as it was,
// so its event stream still ends, export -> import -> export gives the same bytes, and the
// access is recorded in the tenant's audit log (GET /v1/audit), which only that tenant sees.
TEST_F(ApiFlowTest, ExportLeavesTheLogAsItWasAndIsRecordedInTheTenantAuditLog) {
  const std::string id = Submit(R"({"prompt": "to be exported"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const std::string auth = "Authorization: Bearer " + std::string(kKeyA);
  auto export_of = [&](const std::string& base) {
    auto r = Call("GET", base + "/v1/sessions/" + id + "/export", "", {auth});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("content-type").rfind("application/x-ndjson", 0), 0u) << r.Header("content-type");
    return r.body;
  };
  // The stream of a completed session ends (Call gives up after 30 s: a stream that does
  // not end answers no status); it carries every event once.
  auto stream_ends = [&](const std::string& base, size_t events) {
    auto r = Call("GET", base + "/v1/sessions/" + id + "/events/stream", "", {auth});
    EXPECT_EQ(r.status, 200) << "the event stream of a completed session did not end";
    size_t ids = 0;
    for (size_t at = r.body.find("id: "); at != std::string::npos; at = r.body.find("\nid: ", at + 1)) ++ids;
    EXPECT_EQ(ids, events) << r.body;
  };
  const auto before = AllEvents(base_, kKeyA, id);
  const std::string exported = export_of(base_);
  EXPECT_EQ(static_cast<size_t>(std::count(exported.begin(), exported.end(), '\n')), before.size());
  EXPECT_EQ(AllEvents(base_, kKeyA, id), before) << "the export changed the session's log";
  EXPECT_EQ(export_of(base_), exported) << "a second export differs from the first";
  stream_ends(base_, before.size());

  const std::vector<std::string> ndjson_headers = {auth, "Content-Type: application/x-ndjson"};
  auto dup = Call("POST", base_ + "/v1/sessions/import", exported, ndjson_headers);
  EXPECT_EQ(dup.status, 409) << dup.body;
  EXPECT_EQ(ErrorCode(dup), "conflict");
  // A second platform: its own store and harness.
  StoreProcess other_store(dir_.Sub("db2"));
  std::string config = Config();
  config.replace(config.find(store_->address), store_->address.size(), other_store.address);
  HarnessProcess other(dir_.Sub("harness2.json"), config);
  ASSERT_FALSE(other.address.empty());
  auto imported = Call("POST", other.url() + "/v1/sessions/import", exported, ndjson_headers);
  ASSERT_EQ(imported.status, 201) << imported.body;
  EXPECT_EQ(imported.json.at("session").at("id").as_string(), id);
  EXPECT_EQ(imported.json.at("session").at("status").as_string(), "completed");
  EXPECT_EQ(export_of(other.url()), exported) << "export -> import -> export is not byte-identical";
  stream_ends(other.url(), before.size());

  // The tenant audit log of each platform: the two exports here, the import and the
  // export there.
  auto audit_of = [&](const std::string& base, const char* key) {
    auto r = Api("GET", base + "/v1/audit", key);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json.is_object() ? r.json.at("records").as_array() : json::array();
  };
  auto here = audit_of(base_, kKeyA);
  ASSERT_EQ(here.size(), 2u) << json::serialize(here);
  for (const auto& record : here) {
    EXPECT_EQ(record.at("action").as_string(), "export");
    EXPECT_EQ(record.at("session_id").as_string(), id);
    EXPECT_EQ(record.at("tenant").as_string(), "tenant-a");
    EXPECT_EQ(record.at("detail").as_string(), "events 1-" + std::to_string(before.size()));
  }
  auto there = audit_of(other.url(), kKeyA);
  ASSERT_EQ(there.size(), 2u) << json::serialize(there);
  EXPECT_EQ(there[0].at("action").as_string(), "import");
  EXPECT_EQ(there[0].at("session_id").as_string(), id);
  EXPECT_EQ(there[1].at("action").as_string(), "export");
  // Another tenant's audit log has none of it.
  EXPECT_TRUE(audit_of(base_, kKeyB).empty());
  EXPECT_TRUE(audit_of(other.url(), kKeyB).empty());
}

// GET /v1/audit pages oldest first; a bad limit or page token is a 400 and changes nothing.
TEST_F(ApiFlowTest, TheAuditLogPagesOldestFirst) {
  const std::string id = Submit(R"({"prompt": "read me"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  for (int i = 0; i < 5; ++i) {
    auto r = Call("GET", base_ + "/v1/sessions/" + id + "/export", "", {"Authorization: Bearer " + std::string(kKeyA)});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::vector<std::string> ids;
  std::string token;
  for (int page = 0; page < 10; ++page) {
    auto r = Api("GET", base_ + "/v1/audit?limit=2" + (token.empty() ? "" : "&page_token=" + token), kKeyA);
    ASSERT_EQ(r.status, 200) << r.body;
    const auto& records = r.json.at("records").as_array();
    EXPECT_LE(records.size(), 2u);
    for (const auto& rec : records) ids.emplace_back(rec.at("id").as_string());
    token = std::string(r.json.at("next_page_token").as_string());
    if (token.empty()) break;
  }
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end())) << "not oldest first";
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 5u);
  EXPECT_EQ(Api("GET", base_ + "/v1/audit?limit=0", kKeyA).status, 400);
  EXPECT_EQ(Api("GET", base_ + "/v1/audit?page_token=zz", kKeyA).status, 400);
  EXPECT_EQ(Api("POST", base_ + "/v1/audit", kKeyA, "{}").status, 405);
  EXPECT_EQ(Call("GET", base_ + "/v1/audit").status, 401);
  auto all = Api("GET", base_ + "/v1/audit?limit=1000", kKeyA);
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.json.at("records").as_array().size(), 5u) << "a refused request was recorded";
}

}  // namespace
}  // namespace sinew::harness::test
