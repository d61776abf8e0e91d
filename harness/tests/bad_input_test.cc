// The defects found by sending the harness bad input (issue 13), each as a test against a
// real sinew-harness and sinew-store: a clear 4xx and no trace, never a 500, a hang or a
// dropped connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
using namespace std::string_literals;
using BadInputTest = ApiFixture;

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Sends `raw` on a fresh connection and reads until the server closes it (or 30 s pass,
// a bound for the test only: a stream that never ends is the defect). Returns what came back ("" if nothing did).
std::string RawExchange(int port, const std::string& raw) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  (void)::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string out;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

size_t SessionCount(const std::string& base) {
  auto r = Api("GET", base + "/v1/sessions?limit=100", kKeyA);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json.is_object() ? r.json.at("sessions").as_array().size() : 0;
}

TEST_F(BadInputTest, ANonAsciiPromptLongerThanTheTitleGetsAWholeCharacterTitle) {
  std::string prompt = "x";  // then "é" * 70: the 80-byte cut falls inside one
  for (int i = 0; i < 70; ++i) prompt += "\xC3\xA9";
  auto r = Api("POST", base_ + "/v1/sessions", kKeyA, json::serialize(json::object{{"prompt", prompt}}));
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string title(r.json.at("session").at("title").as_string());
  EXPECT_FALSE(title.empty());
  EXPECT_TRUE(ValidUtf8(title)) << title;
  EXPECT_EQ(title.size(), 79u);
  EXPECT_EQ(prompt.rfind(title, 0), 0u);
}

TEST_F(BadInputTest, AnUndecodablePageTokenIs400) {
  for (const char* token : {"%ff", "%00", "zzzz", "%C3%28"}) {
    auto r = Api("GET", base_ + "/v1/sessions?page_token=" + token, kKeyA);
    EXPECT_EQ(r.status, 400) << token << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument") << token;
  }
}

TEST_F(BadInputTest, AFinishedSessionsStreamEndsForAClientAlreadyAtTheLastEvent) {
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const size_t last = AllEvents(base_, kKeyA, id).size();
  const std::string path = "/v1/sessions/" + id + "/events/stream";
  const std::string auth = "Authorization: Bearer " + std::string(kKeyA) + "\r\n";
  for (const std::string& how : {"?after=" + std::to_string(last) + " HTTP/1.1\r\n",
                                 std::string(" HTTP/1.1\r\nLast-Event-ID: ") + std::to_string(last) + "\r\n"}) {
    const std::string reply =
        RawExchange(PortOf(harness_->address), "GET " + path + how + "Host: x\r\n" + auth + "Connection: close\r\n\r\n");
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
    // The response is complete: a chunked body's last chunk arrived (the server ended it).
    EXPECT_NE(reply.find("\r\n0\r\n\r\n"), std::string::npos) << how << ": " << reply;
    EXPECT_EQ(reply.find("id: "), std::string::npos) << "nothing more to send: " << reply;
  }
}

TEST_F(BadInputTest, AnOutOfRangeResumePointIs400OnTheStreamAsOnTheEventList) {
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const size_t last = AllEvents(base_, kKeyA, id).size();
  const std::string s = base_ + "/v1/sessions/" + id;
  // Past uint64 (it once wrapped to 0 and replayed from event 1), and past the API's range.
  for (const std::string bad : {"18446744073709551616", "99999999999999999999999", "9223372036854775808"}) {
    EXPECT_EQ(Api("GET", s + "/events?after=" + bad, kKeyA).status, 400) << bad;
    auto stream = Api("GET", s + "/events/stream?after=" + bad, kKeyA);
    EXPECT_EQ(stream.status, 400) << bad << " -> " << stream.body;
    EXPECT_EQ(ErrorCode(stream), "invalid_argument");
    auto resume = Call("GET", s + "/events/stream", "",
                       {"Authorization: Bearer " + std::string(kKeyA), "Last-Event-ID: " + bad});
    EXPECT_EQ(resume.status, 400) << bad << " -> " << resume.body;
    EXPECT_EQ(ErrorCode(resume), "invalid_argument");
  }
  // Past the end is a valid point with nothing after it, on both.
  const std::string beyond = std::to_string(last + 5);
  auto list = Api("GET", s + "/events?after=" + beyond, kKeyA);
  EXPECT_EQ(list.status, 200);
  EXPECT_TRUE(list.json.at("events").as_array().empty());
  EXPECT_TRUE(ReadStream(s + "/events/stream?after=" + beyond, kKeyA, "", 10, 30000).empty());
}

class ImportTest : public ApiFixture {
 protected:
  // The export of a completed session, one JSON event per line, as objects.
  std::vector<json::object> Exported() {
    const std::string id = Submit(R"({"prompt": "to be exported"})");
    EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
    return AllEvents(base_, kKeyA, id);
  }
  Reply Import(const std::string& body) {
    return Call("POST", base_ + "/v1/sessions/import", body,
                {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/x-ndjson"});
  }
  static std::string Lines(const std::vector<json::object>& events) {
    std::string out;
    for (const auto& e : events) out += json::serialize(e) + "\n";
    return out;
  }
  static void SetSession(std::vector<json::object>& events, const std::string& id) {
    for (auto& e : events) e["session_id"] = id;
  }
};

TEST_F(ImportTest, ARefusedImportChangesNothing) {
  std::vector<json::object> events = Exported();
  ASSERT_GT(events.size(), 2u);
  const size_t before = SessionCount(base_);
  struct Case {
    std::string what;
    std::vector<json::object> events;
  };
  std::vector<Case> cases;
  {
    auto e = events;
    SetSession(e, "");
    cases.push_back({"an empty session id", e});
  }
  {
    auto e = events;
    SetSession(e, "../../etc");
    cases.push_back({"a malformed session id", e});
  }
  {
    auto e = events;
    SetSession(e, std::string(32, 'b'));
    e[0]["session_created"].as_object()["task_json"] = "{not json";
    cases.push_back({"a task_json that is not JSON", e});
  }
  {
    auto e = events;
    SetSession(e, std::string(32, 'c'));
    e[1]["seq"] = "7";
    cases.push_back({"a seq gap", e});
  }
  for (const auto& c : cases) {
    auto r = Import(Lines(c.events));
    EXPECT_EQ(r.status, 400) << c.what << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument") << c.what;
  }
  EXPECT_EQ(SessionCount(base_), before) << "a refused import left a session behind";
}

TEST_F(ImportTest, AnImportedQueuedSessionIsARecordNotWork) {
  std::vector<json::object> events = Exported();
  ASSERT_GT(events.size(), 2u);
  // Event 1 only: a session exported before any harness ran it.
  std::vector<json::object> queued = {events.front()};
  const std::string id(32, 'd');
  SetSession(queued, id);
  auto r = Import(Lines(queued));
  ASSERT_EQ(r.status, 201) << r.body;
  ASSERT_EQ(r.json.at("session").at("status").as_string(), "queued");
  // Scans run every 500 ms here; a woken session would be driven within a few.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto s = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
  EXPECT_EQ(s.json.at("session").at("status").as_string(), "queued") << s.body;
  // Nothing was driven: the log is the import (its record is in the tenant audit log).
  EXPECT_EQ(AllEvents(base_, kKeyA, id).size(), queued.size());
}

TEST_F(BadInputTest, MalformedHttpIsAnswered400) {
  const int port = PortOf(harness_->address);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a bad request line", "GARBAGE\r\n\r\n"},
      {"HTTP/9.9", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"},
      {"a bad Content-Length", "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"},
      {"a huge Content-Length",
       "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"},
      {"bad chunked encoding",
       "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
      {"a NUL in a header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"s},
  };
  for (const auto& [what, raw] : cases) {
    const std::string reply = RawExchange(port, raw);
    EXPECT_EQ(reply.rfind("HTTP/1.1 4", 0), 0u) << what << ": got \"" << reply << "\"";
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << what << ": " << reply;
  }
  EXPECT_EQ(Call("GET", base_ + "/healthz").status, 200);
}

}  // namespace
}  // namespace sinew::harness::test

namespace sinew::harness::test {
namespace {

// The OpenAPI document is well formed (scripts/check-openapi.py) and every status the live
// server answers, on each documented operation, is one the document lists for it.
class OpenApiTest : public ApiFixture {
 protected:
  void SetUp() override {
    ApiFixture::SetUp();
    const std::string command = std::string(SINEW_PYTHON3) + " " + SINEW_SOURCE_ROOT +
                                "/scripts/check-openapi.py " + SINEW_SOURCE_ROOT + "/docs/harness-openapi.yaml 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    ASSERT_EQ(pclose(pipe), 0) << "the OpenAPI document is not valid:\n" << out;
    documented_ = json::parse(out).as_object();
  }
  // Checks that `status` is documented for `method` on `route` (a template like /v1/sessions/{id}).
  void Expect(const std::string& method, const std::string& route, long status, const std::string& what) {
    ++checked_;
    const std::string key = method + " " + route;
    auto it = documented_.find(key);
    ASSERT_NE(it, documented_.end()) << key << " is not in the document";
    bool listed = false;
    for (const auto& code : it->value().as_array()) listed |= code.as_string() == std::to_string(status);
    EXPECT_TRUE(listed) << key << " answered " << status << " (" << what << "), which the document does not list";
  }
  json::object documented_;
  int checked_ = 0;
};

TEST_F(OpenApiTest, EveryLiveStatusIsDocumented) {
  const std::string auth = "Authorization: Bearer " + std::string(kKeyA);
  const std::string sessions = "/v1/sessions", one = "/v1/sessions/{id}";
  // Creating and listing.
  Expect("POST", sessions, Api("POST", base_ + sessions, kKeyA, R"({"prompt":"hi"})").status, "created");
  Expect("POST", sessions, Api("POST", base_ + sessions, kKeyA, "{oops").status, "bad JSON");
  Expect("POST", sessions, Api("POST", base_ + sessions, "wrong", R"({"prompt":"hi"})").status, "bad key");
  Expect("POST", sessions, Call("POST", base_ + sessions, R"({"prompt":"x"})", {auth}).status, "no media type");
  Expect("POST", sessions,
         Api("POST", base_ + sessions, kKeyA, R"({"prompt":")" + std::string(100000, 'x') + R"("})").status,
         "oversized");
  Expect("GET", sessions, Api("GET", base_ + sessions, kKeyA).status, "listed");
  Expect("GET", sessions, Api("GET", base_ + sessions + "?limit=0", kKeyA).status, "bad limit");
  Expect("GET", sessions, Api("GET", base_ + sessions + "?page_token=%ff", kKeyA).status, "bad token");
  Expect("GET", sessions, Api("GET", base_ + sessions, "").status, "no key");
  // One session and its log.
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const std::string s = base_ + "/v1/sessions/" + id, missing = base_ + "/v1/sessions/" + std::string(32, 'f');
  Expect("GET", one, Api("GET", s, kKeyA).status, "shown");
  Expect("GET", one, Api("GET", missing, kKeyA).status, "unknown");
  Expect("GET", one, Api("GET", s, kKeyB).status, "another tenant's");
  Expect("GET", one, Api("GET", s, "wrong").status, "bad key");
  Expect("GET", one + "/events", Api("GET", s + "/events", kKeyA).status, "events");
  Expect("GET", one + "/events", Api("GET", s + "/events?after=-1", kKeyA).status, "bad after");
  Expect("GET", one + "/events", Api("GET", missing + "/events", kKeyA).status, "unknown");
  Expect("GET", one + "/events/stream", Call("GET", s + "/events/stream", "", {auth}).status, "stream");
  Expect("GET", one + "/events/stream", Call("GET", s + "/events/stream?after=x", "", {auth}).status, "bad after");
  Expect("GET", one + "/events/stream", Call("GET", missing + "/events/stream", "", {auth}).status, "unknown");
  // Steering.
  Expect("POST", one + "/cancel", Api("POST", s + "/cancel", kKeyA).status, "finished");
  Expect("POST", one + "/cancel", Api("POST", missing + "/cancel", kKeyA).status, "unknown");
  Expect("POST", one + "/messages", Api("POST", s + "/messages", kKeyA, R"({"text":""})").status, "empty");
  Expect("POST", one + "/messages", Call("POST", s + "/messages", R"({"text":"x"})", {auth}).status, "no media type");
  Expect("POST", one + "/messages", Api("POST", s + "/messages", kKeyA, R"({"text":"more"})").status, "accepted");
  Expect("POST", one + "/fork", Api("POST", s + "/fork", kKeyA, R"({})").status, "no at_seq");
  Expect("POST", one + "/fork", Api("POST", s + "/fork", kKeyA, R"({"at_seq": 2})").status, "forked");
  Expect("POST", one + "/fork", Api("POST", missing + "/fork", kKeyA, R"({"at_seq": 2})").status, "unknown");
  // Import.
  const std::vector<std::string> ndjson = {auth, "Content-Type: application/x-ndjson"};
  Expect("POST", sessions + "/import", Call("POST", base_ + sessions + "/import", "not json\n", ndjson).status,
         "bad line");
  Expect("POST", sessions + "/import", Api("POST", base_ + sessions + "/import", kKeyA, "{}").status,
         "wrong media type");
  std::string exported;
  for (const auto& e : AllEvents(base_, kKeyA, id)) exported += json::serialize(e) + "\n";
  Expect("POST", sessions + "/import", Call("POST", base_ + sessions + "/import", exported, ndjson).status,
         "existing id");
  // Export.
  Expect("GET", one + "/export", Call("GET", s + "/export", "", {auth}).status, "exported");
  Expect("GET", one + "/export", Call("GET", missing + "/export", "", {auth}).status, "unknown");
  Expect("GET", one + "/export", Call("GET", s + "/export").status, "no key");
  // Probes.
  Expect("GET", "/healthz", Call("GET", base_ + "/healthz").status, "health");
  Expect("GET", "/readyz", Call("GET", base_ + "/readyz").status, "ready");
  Expect("GET", "/metrics", Call("GET", base_ + "/metrics").status, "metrics");
}

// The quota refusals (docs/security.md) on a harness with tight quotas: each is a
// documented 429 with a Retry-After header.
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
  auto expect_429 = [&](const std::string& method, const std::string& route, const Reply& r, const std::string& what) {
    EXPECT_EQ(r.status, 429) << what << ": " << r.body;
    EXPECT_FALSE(r.Header("retry-after").empty()) << what;
    Expect(method, route, r.status, what);
  };
  expect_429("POST", sessions, Api("POST", base + sessions, kKeyA, R"({"prompt": "more"})"), "max_concurrent_sessions");
  expect_429("POST", one + "/fork", Api("POST", s + "/fork", kKeyA, R"({"at_seq": 1})"), "fork over the quota");
  // Tenant b: one request, then every operation is refused.
  ASSERT_EQ(Api("GET", base + sessions, kKeyB).status, 200);
  const std::string b_auth = "Authorization: Bearer " + std::string(kKeyB);
  expect_429("GET", sessions, Api("GET", base + sessions, kKeyB), "list");
  expect_429("POST", sessions, Api("POST", base + sessions, kKeyB, R"({"prompt": "x"})"), "create");
  expect_429("GET", one, Api("GET", s, kKeyB), "get");
  expect_429("GET", one + "/events", Api("GET", s + "/events", kKeyB), "events");
  expect_429("GET", one + "/events/stream", Call("GET", s + "/events/stream", "", {b_auth}), "stream");
  expect_429("GET", one + "/export", Call("GET", s + "/export", "", {b_auth}), "export");
  expect_429("POST", one + "/messages", Api("POST", s + "/messages", kKeyB, R"({"text": "x"})"), "message");
  expect_429("POST", one + "/cancel", Api("POST", s + "/cancel", kKeyB), "cancel");
  expect_429("POST", sessions + "/import",
             Call("POST", base + sessions + "/import", "x\n", {b_auth, "Content-Type: application/x-ndjson"}),
             "import");
  EXPECT_EQ(Api("POST", s + "/cancel", kKeyA).status, 202);
}

}  // namespace
}  // namespace sinew::harness::test
