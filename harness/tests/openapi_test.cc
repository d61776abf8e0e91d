// The harness against its OpenAPI document (docs/harness-openapi.yaml), live: a real
// sinew-store and sinew-harness answer real requests on every operation the document
// has, and scripts/check-openapi.py checks each answer against it (the status is listed
// for the operation; the body is of the documented media type and valid against the
// documented schema; documented required headers are there) and that every operation had
// a success and a refusal checked, so a route added to the document without a live check
// here fails.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

// One request of a case: a path with the session id filled in, header lines, a body.
struct Request {
  std::string what, method, path;
  std::vector<std::string> headers;
  std::string body;
};

class OpenApiTest : public ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    auto out = RunCheck(Doc());
    ASSERT_EQ(out.first, 0) << "the OpenAPI document is not valid:\n" << out.second;
    operations_ = json::parse(out.second).as_object();
  }

  static std::string Doc() { return std::string(SINEW_SOURCE_ROOT) + "/docs/harness-openapi.yaml"; }

  // Runs scripts/check-openapi.py DOC ARGS...: its exit status and what it printed.
  static std::pair<int, std::string> RunCheck(const std::string& doc, const std::string& args = "") {
    const std::string command = std::string(SINEW_PYTHON3) + " " + SINEW_SOURCE_ROOT + "/scripts/check-openapi.py " +
                                doc + " " + args + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return {-1, "popen failed"};
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    const int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }

  // Keeps `reply` as the answer of operation `key` ("GET /v1/sessions/{id}") to check.
  void Record(const std::string& key, const Reply& reply, const std::string& what) {
    ASSERT_NE(reply.status, 0) << key << " (" << what << "): no answer: " << reply.body;
    json::object headers;
    for (const auto& [name, value] : reply.headers) headers[name] = value;
    const size_t space = key.find(' ');
    answers_.push_back(json::object{{"method", key.substr(0, space)},
                                    {"route", key.substr(space + 1)},
                                    {"status", reply.status},
                                    {"content_type", reply.Header("content-type")},
                                    {"headers", std::move(headers)},
                                    {"body", reply.body},
                                    {"what", what}});
  }

  Reply Send(const std::string& base, const Request& r) { return Call(r.method, base + r.path, r.body, r.headers); }

  // Checks every recorded answer against the document (and, with `coverage`, that every
  // operation had a success and a refusal among them).
  void CheckAnswers(bool coverage) {
    const std::string path = dir_.Sub("answers-" + std::to_string(++checks_) + ".json");
    WriteFile(path, json::serialize(answers_));
    // The sandbox routes need sinew-sandboxd and runc: harness_sandbox_api_test checks them.
    auto out = RunCheck(Doc(), "--answers " + path + (coverage ? " --coverage-except=/v1/sandboxes" : ""));
    EXPECT_EQ(out.first, 0) << answers_.size() << " answers checked; the document and the server disagree:\n"
                            << out.second;
  }

  json::object operations_;  // "METHOD /route" -> its documented statuses
  json::array answers_;
  int checks_ = 0;
};

// The route of `key` with {id} filled in.
std::string PathOf(const std::string& key, const std::string& id) {
  std::string path = key.substr(key.find(' ') + 1);
  if (const size_t at = path.find("{id}"); at != std::string::npos) path.replace(at, 4, id);
  return path;
}

TEST_F(OpenApiTest, EveryOperationAnswersAsDocumented) {
  const std::string auth = "Authorization: Bearer " + std::string(kKeyA);
  const std::string as_json = "Content-Type: application/json", as_ndjson = "Content-Type: application/x-ndjson";
  // What the cases work on: a finished session, one that waits on its model (to cancel),
  // its export as a session to import under a new id, and an id nobody has.
  const std::string done = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, done, "completed"), "completed");
  const std::string waiting = Submit(R"({"prompt": "wait", "model": "stuck"})");
  ASSERT_FALSE(waiting.empty());
  // One to interrupt (docs/harness.md, "Interrupts").
  const std::string interrupted = Submit(R"({"prompt": "wait", "model": "stuck"})");
  ASSERT_FALSE(interrupted.empty());
  // One whose tool call waits for a decision (docs/harness.md, "Tool approvals").
  const std::string asking = Submit(R"({"prompt": "fetch", "approvals": {"tools": {"http_request": "ask"}}})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, asking, "requires_action"), "requires_action");
  // One that stays open, waiting for input (docs/harness.md, "Conversations that stay open").
  const std::string open = Submit(R"({"prompt": "hello", "keep_open": true})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, open, "waiting_for_input"), "waiting_for_input");
  std::string to_import;
  for (auto e : AllEvents(base_, kKeyA, done)) {
    e["session_id"] = std::string(32, 'e');
    to_import += json::serialize(e) + "\n";
  }
  const std::string missing(32, 'f');
  const std::string s = "/v1/sessions/" + done, m = "/v1/sessions/" + missing;
  // Webhook endpoints (docs/harness.md, "Webhooks"): one to read, one to delete. A public
  // name is not resolved at creation (the deliveries to it fail here, offline).
  auto webhook = [&] {
    auto r = Api("POST", base_ + "/v1/webhooks", kKeyA, R"({"url": "https://example.com/hook"})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json.at("webhook").at("id").as_string()) : missing;
  };
  const std::string hook = "/v1/webhooks/" + webhook(), doomed_hook = "/v1/webhooks/" + webhook();
  const std::string no_hook = "/v1/webhooks/" + missing;
  // Two schedules (docs/harness.md, "Schedules"): one to show, pause and resume, one to delete.
  auto schedule = [&] {
    auto r = Api("POST", base_ + "/v1/schedules", kKeyA, R"({"cron": "@daily", "task": {"prompt": "hi"}})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? "/v1/schedules/" + std::string(r.json.at("schedule").at("id").as_string()) : "";
  };
  const std::string sc = schedule(), doomed = schedule(), msc = "/v1/schedules/" + missing;
  ASSERT_FALSE(sc.empty());
  ASSERT_FALSE(doomed.empty());

  // The cases of each operation, its success first (the sweeps below send that one again).
  const std::map<std::string, std::vector<Request>> cases = {
      {"POST /v1/sessions",
       {{"created", "POST", "/v1/sessions", {auth, as_json}, R"({"prompt": "hi", "sandbox": {"runtime": "runsc"}})"},
        {"not JSON", "POST", "/v1/sessions", {auth, as_json}, "{oops"},
        {"a runtime the enum lacks", "POST", "/v1/sessions", {auth, as_json},
         R"({"prompt": "hi", "sandbox": {"runtime": "docker"}})"},
        {"an unknown key", "POST", "/v1/sessions", {auth, as_json}, R"({"prompt": "hi", "colour": "red"})"},
        {"a wrong key", "POST", "/v1/sessions", {"Authorization: Bearer wrong", as_json}, R"({"prompt": "hi"})"},
        {"no media type", "POST", "/v1/sessions", {auth}, R"({"prompt": "hi"})"}}},
      {"GET /v1/sessions",
       {{"listed", "GET", "/v1/sessions?limit=2&status=completed", {auth}, ""},
        {"limit=5%00", "GET", "/v1/sessions?limit=5%00", {auth}, ""},
        {"an unknown status", "GET", "/v1/sessions?status=sleeping", {auth}, ""},
        {"a page token not issued", "GET", "/v1/sessions?page_token=zz", {auth}, ""},
        {"no key", "GET", "/v1/sessions", {}, ""}}},
      {"POST /v1/sessions/import",
       {{"imported", "POST", "/v1/sessions/import", {auth, as_ndjson}, to_import},
        {"the same id again", "POST", "/v1/sessions/import", {auth, as_ndjson}, to_import},
        {"a line that is not an event", "POST", "/v1/sessions/import", {auth, as_ndjson}, "not json\n"},
        {"JSON, not NDJSON", "POST", "/v1/sessions/import", {auth, as_json}, "{}"},
        {"no key", "POST", "/v1/sessions/import", {as_ndjson}, to_import}}},
      {"GET /v1/sessions/{id}",
       {{"shown", "GET", s, {auth}, ""},
        {"one that requires action, with its pending approvals", "GET", "/v1/sessions/" + asking, {auth}, ""},
        {"unknown id", "GET", m, {auth}, ""},
        {"another tenant's", "GET", s, {"Authorization: Bearer " + std::string(kKeyB)}, ""},
        {"a malformed id", "GET", "/v1/sessions/..%2f..", {auth}, ""},
        {"no key", "GET", s, {}, ""}}},
      {"GET /v1/sessions/{id}/export",
       {{"exported", "GET", s + "/export", {auth}, ""},
        {"unknown id", "GET", m + "/export", {auth}, ""},
        {"no key", "GET", s + "/export", {}, ""}}},
      {"GET /v1/sessions/{id}/events",
       {{"a page of events", "GET", s + "/events?after=1&limit=3", {auth}, ""},
        {"after=-1", "GET", s + "/events?after=-1", {auth}, ""},
        {"limit=0", "GET", s + "/events?limit=0", {auth}, ""},
        {"unknown id", "GET", m + "/events", {auth}, ""},
        {"no key", "GET", s + "/events", {}, ""}}},
      {"GET /v1/sessions/{id}/events/stream",
       {{"the stream of a finished session", "GET", s + "/events/stream", {auth}, ""},
        {"after=x", "GET", s + "/events/stream?after=x", {auth}, ""},
        {"Last-Event-ID past the range", "GET", s + "/events/stream", {auth, "Last-Event-ID: 99999999999999999999"}, ""},
        {"unknown id", "GET", m + "/events/stream", {auth}, ""},
        {"no key", "GET", s + "/events/stream", {}, ""}}},
      {"POST /v1/sessions/{id}/cancel",
       {{"cancelled", "POST", "/v1/sessions/" + waiting + "/cancel", {auth}, ""},
        {"already finished", "POST", s + "/cancel", {auth}, ""},
        {"unknown id", "POST", m + "/cancel", {auth}, ""},
        {"no key", "POST", s + "/cancel", {}, ""}}},
      {"POST /v1/sessions/{id}/close",
       {{"closed", "POST", "/v1/sessions/" + open + "/close", {auth}, ""},
        {"already finished", "POST", s + "/close", {auth}, ""},
        {"unknown id", "POST", m + "/close", {auth}, ""},
        {"no key", "POST", s + "/close", {}, ""}}},
      {"POST /v1/sessions/{id}/interrupt",
       {{"interrupted", "POST", "/v1/sessions/" + interrupted + "/interrupt", {auth, as_json},
         R"({"message": "stop and summarize"})"},
        {"already finished", "POST", s + "/interrupt", {auth, as_json}, R"({"message": "stop"})"},
        {"no message", "POST", s + "/interrupt", {auth, as_json}, "{}"},
        {"unknown id", "POST", m + "/interrupt", {auth, as_json}, R"({"message": "stop"})"},
        {"no media type", "POST", s + "/interrupt", {auth}, R"({"message": "stop"})"},
        {"no key", "POST", s + "/interrupt", {as_json}, R"({"message": "stop"})"}}},
      {"POST /v1/sessions/{id}/fork",
       {{"forked", "POST", s + "/fork", {auth, as_json}, R"({"at_seq": 2})"},
        {"no at_seq", "POST", s + "/fork", {auth, as_json}, "{}"},
        {"at_seq past the end", "POST", s + "/fork", {auth, as_json}, R"({"at_seq": 100000})"},
        {"unknown id", "POST", m + "/fork", {auth, as_json}, R"({"at_seq": 2})"},
        {"no media type", "POST", s + "/fork", {auth}, R"({"at_seq": 2})"},
        {"no key", "POST", s + "/fork", {as_json}, R"({"at_seq": 2})"}}},
      {"POST /v1/sessions/{id}/decisions",
       {{"approved", "POST", "/v1/sessions/" + asking + "/decisions", {auth, as_json},
         R"({"decisions": [{"call_id": "call_0_0", "decision": "approve"}]})"},
        {"a call that waits for nothing", "POST", s + "/decisions", {auth, as_json},
         R"({"decisions": [{"call_id": "call_0_0", "decision": "deny", "message": "no"}]})"},
        {"a decision the enum lacks", "POST", s + "/decisions", {auth, as_json},
         R"({"decisions": [{"call_id": "call_0_0", "decision": "maybe"}]})"},
        {"unknown id", "POST", m + "/decisions", {auth, as_json},
         R"({"decisions": [{"call_id": "call_0_0", "decision": "approve"}]})"},
        {"no media type", "POST", s + "/decisions", {auth}, R"({"decisions": []})"},
        {"no key", "POST", s + "/decisions", {as_json}, R"({"decisions": []})"}}},
      {"POST /v1/sessions/{id}/messages",
       {{"accepted", "POST", s + "/messages", {auth, as_json}, R"({"text": "and then?"})"},
        {"empty text", "POST", s + "/messages", {auth, as_json}, R"({"text": ""})"},
        {"unknown id", "POST", m + "/messages", {auth, as_json}, R"({"text": "x"})"},
        {"no media type", "POST", s + "/messages", {auth}, R"({"text": "x"})"},
        {"no key", "POST", s + "/messages", {as_json}, R"({"text": "x"})"}}},
      {"GET /v1/audit",
       {{"a page of the tenant's records", "GET", "/v1/audit?limit=2", {auth}, ""},
        {"limit=0", "GET", "/v1/audit?limit=0", {auth}, ""},
        {"limit=5%00", "GET", "/v1/audit?limit=5%00", {auth}, ""},
        {"a page token not issued", "GET", "/v1/audit?page_token=zz", {auth}, ""},
        {"POST, a method it does not have", "POST", "/v1/audit", {auth, as_json}, "{}"},
        {"no key", "GET", "/v1/audit", {}, ""}}},
      {"POST /v1/schedules",
       {{"created", "POST", "/v1/schedules", {auth, as_json},
         R"({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "missed": "run_once", "task": {"prompt": "hi"}})"},
        {"a cron that never fires", "POST", "/v1/schedules", {auth, as_json},
         R"({"cron": "0 0 30 2 *", "task": {"prompt": "hi"}})"},
        {"every second", "POST", "/v1/schedules", {auth, as_json}, R"({"cron": "* * * * * *", "task": {"prompt": "hi"}})"},
        {"an unknown zone", "POST", "/v1/schedules", {auth, as_json},
         R"({"cron": "@daily", "timezone": "Mars/Olympus", "task": {"prompt": "hi"}})"},
        {"a missed policy the enum lacks", "POST", "/v1/schedules", {auth, as_json},
         R"({"cron": "@daily", "missed": "always", "task": {"prompt": "hi"}})"},
        {"no media type", "POST", "/v1/schedules", {auth}, R"({"cron": "@daily", "task": {"prompt": "hi"}})"},
        {"no key", "POST", "/v1/schedules", {as_json}, R"({"cron": "@daily", "task": {"prompt": "hi"}})"}}},
      {"GET /v1/schedules",
       {{"listed", "GET", "/v1/schedules?limit=2", {auth}, ""},
        {"limit=0", "GET", "/v1/schedules?limit=0", {auth}, ""},
        {"a page token not issued", "GET", "/v1/schedules?page_token=zz", {auth}, ""},
        {"PUT, a method it does not have", "PUT", "/v1/schedules", {auth, as_json}, "{}"},
        {"no key", "GET", "/v1/schedules", {}, ""}}},
      {"GET /v1/schedules/{id}",
       {{"shown", "GET", sc, {auth}, ""},
        {"unknown id", "GET", msc, {auth}, ""},
        {"another tenant's", "GET", sc, {"Authorization: Bearer " + std::string(kKeyB)}, ""},
        {"no key", "GET", sc, {}, ""}}},
      {"DELETE /v1/schedules/{id}",
       {{"deleted", "DELETE", doomed, {auth}, ""},
        {"already deleted", "DELETE", doomed, {auth}, ""},
        {"unknown id", "DELETE", msc, {auth}, ""},
        {"no key", "DELETE", sc, {}, ""}}},
      {"POST /v1/schedules/{id}/pause",
       {{"paused", "POST", sc + "/pause", {auth}, ""},
        {"unknown id", "POST", msc + "/pause", {auth}, ""},
        {"GET, a method it does not have", "GET", sc + "/pause", {auth}, ""},
        {"no key", "POST", sc + "/pause", {}, ""}}},
      {"POST /v1/schedules/{id}/resume",
       {{"resumed", "POST", sc + "/resume", {auth}, ""},
        {"another tenant's", "POST", sc + "/resume", {"Authorization: Bearer " + std::string(kKeyB)}, ""},
        {"no key", "POST", sc + "/resume", {}, ""}}},
      // The sandbox routes' refusals without a sinew-sandboxd (their successes:
      // harness_sandbox_api_test, which has one).
      {"POST /v1/sandboxes",
       {{"a harness without sandboxd", "POST", "/v1/sandboxes", {auth, as_json}, "{}"},
        {"an unknown field", "POST", "/v1/sandboxes", {auth, as_json}, R"({"colour": "red"})"}}},
      {"GET /v1/sandboxes", {{"listed", "GET", "/v1/sandboxes", {auth}, ""}}},
      {"GET /v1/sandboxes/{id}", {{"unknown id", "GET", "/v1/sandboxes/" + missing, {auth}, ""}}},
      {"POST /v1/sandboxes/{id}/execute",
       {{"unknown id", "POST", "/v1/sandboxes/" + missing + "/execute", {auth, as_json},
         R"({"name": "bash", "input": {"command": "ls"}})"}}},
      {"GET /v1/sandboxes/snapshots",
       {{"a harness without sandboxd", "GET", "/v1/sandboxes/snapshots", {auth}, ""},
        {"no key", "GET", "/v1/sandboxes/snapshots", {}, ""}}},
      {"DELETE /v1/sandboxes/snapshots/{snapshot_id}",
       {{"a harness without sandboxd", "DELETE", "/v1/sandboxes/snapshots/snap-" + missing, {auth}, ""},
        {"a malformed id", "DELETE", "/v1/sandboxes/snapshots/snap-nope", {auth}, ""}}},
      {"POST /v1/webhooks",
       {{"created", "POST", "/v1/webhooks", {auth, as_json},
         R"({"url": "https://example.com/a", "events": ["session.error"], "description": "errors"})"},
        {"a loopback URL", "POST", "/v1/webhooks", {auth, as_json}, R"({"url": "http://127.0.0.1:9/x"})"},
        {"an event type the enum lacks", "POST", "/v1/webhooks", {auth, as_json},
         R"({"url": "https://example.com/a", "events": ["session.created"]})"},
        {"no media type", "POST", "/v1/webhooks", {auth}, R"({"url": "https://example.com/a"})"},
        {"PUT, a method it does not have", "PUT", "/v1/webhooks", {auth, as_json}, "{}"},
        {"no key", "POST", "/v1/webhooks", {as_json}, R"({"url": "https://example.com/a"})"}}},
      {"GET /v1/webhooks", {{"listed", "GET", "/v1/webhooks", {auth}, ""}, {"no key", "GET", "/v1/webhooks", {}, ""}}},
      {"GET /v1/webhooks/{id}",
       {{"found", "GET", hook, {auth}, ""},
        {"unknown id", "GET", no_hook, {auth}, ""},
        {"PATCH, a method it does not have", "PATCH", hook, {auth, as_json}, "{}"}}},
      {"DELETE /v1/webhooks/{id}",
       {{"deleted", "DELETE", doomed_hook, {auth}, ""}, {"unknown id", "DELETE", no_hook, {auth}, ""}}},
      {"GET /v1/webhooks/{id}/deliveries",
       {{"the log", "GET", hook + "/deliveries", {auth}, ""},
        {"unknown id", "GET", no_hook + "/deliveries", {auth}, ""},
        {"POST, a method it does not have", "POST", hook + "/deliveries", {auth, as_json}, "{}"}}},
      {"GET /healthz", {{"alive", "GET", "/healthz", {}, ""}}},
      {"GET /readyz", {{"ready", "GET", "/readyz", {}, ""}}},
      {"GET /metrics", {{"metrics", "GET", "/metrics", {}, ""}}},
  };
  // The first request of an operation: its own success case, or for an operation this
  // test has no cases for (the coverage check then fails it), a plain authorized request.
  auto first = [&](const std::string& key) {
    auto it = cases.find(key);
    if (it != cases.end()) return it->second.front();
    return Request{"(no case)", key.substr(0, key.find(' ')), PathOf(key, done), {auth}, ""};
  };
  const int port = PortOf(harness_->address);
  for (const auto& op : operations_) {
    const std::string key(op.key());
    const std::string method = key.substr(0, key.find(' ')), path = PathOf(key, done);
    if (auto it = cases.find(key); it != cases.end()) {
      for (const auto& c : it->second) Record(key, Send(base_, c), c.what);
    }
    // What the HTTP server refuses by itself, on every route.
    const std::string head = method + " " + path + " HTTP/1.1\r\nHost: x\r\n";
    const Reply malformed = ParseHttpReply(RawHttpExchange(port, head + "a header line without a colon\r\n\r\n"));
    EXPECT_EQ(malformed.status, 400) << key << ": " << malformed.body;
    Record(key, malformed, "malformed HTTP");
    const Reply big_body = ParseHttpReply(RawHttpExchange(port, head + "Content-Length: 1000000\r\n\r\n"));
    EXPECT_EQ(big_body.status, 413) << key << ": " << big_body.body;
    Record(key, big_body, "a body over max_request_bytes");
    const Reply big_head =
        ParseHttpReply(RawHttpExchange(port, head + "X-Big: " + std::string(70 * 1024, 'h') + "\r\n\r\n"));
    EXPECT_EQ(big_head.status, 431) << key << ": " << big_head.body;
    Record(key, big_head, "a request head over 64 KiB");
  }

  // Too many connections: a harness that takes one, with one held open (a request that
  // has not ended), refuses every other with a 503.
  {
    std::string config = Config();
    const std::string timeout = R"("read_timeout_seconds": 2)";
    ASSERT_NE(config.find(timeout), std::string::npos);
    config.replace(config.find(timeout), timeout.size(), R"("read_timeout_seconds": 120, "max_connections": 1)");
    HarnessProcess one(dir_.Sub("one.json"), config);
    ASSERT_FALSE(one.address.empty());
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(PortOf(one.address)));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string partial = "GET /healthz HTTP/1.1\r\n";
    ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL), static_cast<ssize_t>(partial.size()));
    for (const auto& op : operations_) {
      const std::string key(op.key());
      const Reply r = Send(one.url(), first(key));
      EXPECT_EQ(r.status, 503) << key << " with every connection taken: " << r.body;
      Record(key, r, "too many connections");
    }
    ::close(fd);
  }

  // The store down: every /v1 operation and /readyz are 503; liveness and metrics answer.
  store_->proc->Signal(SIGKILL);
  store_->proc->Wait();
  for (const auto& op : operations_) {
    const std::string key(op.key());
    const Reply r = Send(base_, first(key));
    if (key.find(" /v1/") != std::string::npos || key == "GET /readyz") {
      EXPECT_EQ(r.status, 503) << key << " with the store down: " << r.body;
    }
    Record(key, r, "the store down");
  }
  CheckAnswers(/*coverage=*/true);
}

// The quota refusals (docs/security.md) on a harness with tight quotas: each is a
// documented 429 with a Retry-After header and an Error body.
TEST_F(OpenApiTest, QuotaRefusalsAreDocumented429s) {
  std::string config = Config();
  config.insert(config.rfind('}'), R"(, "tenants": {"tenant-a": {"max_concurrent_sessions": 1},
      "tenant-b": {"requests_per_second": 0.001}})");
  HarnessProcess limited(dir_.Sub("limited.json"), config);
  ASSERT_FALSE(limited.address.empty());
  const std::string base = limited.url();
  const std::string sessions = "/v1/sessions", one = "/v1/sessions/{id}";
  auto busy = Api("POST", base + sessions, kKeyA, R"({"prompt": "wait", "model": "stuck"})");
  ASSERT_EQ(busy.status, 201) << busy.body;
  const std::string s = base + "/v1/sessions/" + std::string(busy.json.at("session").at("id").as_string());
  auto expect_429 = [&](const std::string& key, const Reply& r, const std::string& what) {
    EXPECT_EQ(r.status, 429) << what << ": " << r.body;
    Record(key, r, what);
  };
  expect_429("POST " + sessions, Api("POST", base + sessions, kKeyA, R"({"prompt": "more"})"),
             "max_concurrent_sessions");
  expect_429("POST " + one + "/fork", Api("POST", s + "/fork", kKeyA, R"({"at_seq": 1})"), "fork over the quota");
  // Tenant b: one request, then every operation is refused.
  ASSERT_EQ(Api("GET", base + sessions, kKeyB).status, 200);
  const std::string b_auth = "Authorization: Bearer " + std::string(kKeyB);
  expect_429("GET " + sessions, Api("GET", base + sessions, kKeyB), "list");
  expect_429("POST " + sessions, Api("POST", base + sessions, kKeyB, R"({"prompt": "x"})"), "create");
  expect_429("GET " + one, Api("GET", s, kKeyB), "get");
  expect_429("GET " + one + "/events", Api("GET", s + "/events", kKeyB), "events");
  expect_429("GET " + one + "/events/stream", Call("GET", s + "/events/stream", "", {b_auth}), "stream");
  expect_429("GET " + one + "/export", Call("GET", s + "/export", "", {b_auth}), "export");
  expect_429("POST " + one + "/messages", Api("POST", s + "/messages", kKeyB, R"({"text": "x"})"), "message");
  expect_429("POST " + one + "/cancel", Api("POST", s + "/cancel", kKeyB), "cancel");
  expect_429("POST " + sessions + "/import",
             Call("POST", base + sessions + "/import", "x\n", {b_auth, "Content-Type: application/x-ndjson"}),
             "import");
  CheckAnswers(/*coverage=*/false);
  EXPECT_EQ(Api("POST", s + "/cancel", kKeyA).status, 202);
}

// Every error code in the harness's and its HTTP server's sources is one the document's
// Error schema lists (a code no live case reaches included).
TEST_F(OpenApiTest, EveryErrorCodeTheServerEmitsIsInTheEnum) {
  std::string sources;
  for (const char* dir : {"/harness/src", "/common/src/http"}) {
    for (const auto& f : std::filesystem::directory_iterator(std::string(SINEW_SOURCE_ROOT) + dir)) {
      const std::string name = f.path().filename().string();
      if (f.path().extension() == ".cc" && name.find("_test") == std::string::npos) sources += " " + f.path().string();
    }
  }
  auto out = RunCheck(Doc(), "--error-codes-in" + sources);
  EXPECT_EQ(out.first, 0) << out.second;
}

// The check itself: an operation the document gains without a live case, and a status
// the document does not list, each fail it, naming what to fix.
TEST_F(OpenApiTest, TheCheckFailsARouteWithoutALiveCaseAndAnUndocumentedStatus) {
  std::ifstream in(Doc());
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  const std::string anchor = "\n  /healthz:\n";
  ASSERT_NE(doc.find(anchor), std::string::npos);
  doc.insert(doc.find(anchor) + 1, R"(  /v1/later:
    get:
      summary: A route added later.
      responses:
        '200': {description: ok}
)");
  const std::string changed = dir_.Sub("changed.yaml");
  WriteFile(changed, doc);
  Record("GET /healthz", Call("GET", base_ + "/healthz"), "alive");
  Reply undocumented;
  undocumented.status = 418;
  undocumented.body = R"({"error": {"code": "teapot", "message": "no"}})";
  Record("GET /healthz", undocumented, "a status the document lacks");
  const std::string answers = dir_.Sub("few.json");
  WriteFile(answers, json::serialize(answers_));
  auto out = RunCheck(changed, "--answers " + answers + " --coverage");
  EXPECT_NE(out.first, 0) << out.second;
  EXPECT_NE(out.second.find("GET /v1/later: no live success (2xx) was checked"), std::string::npos) << out.second;
  EXPECT_NE(out.second.find("GET /healthz answered 418 (a status the document lacks), which the document does not list"),
            std::string::npos)
      << out.second;
}

}  // namespace
}  // namespace sinew::harness::test
