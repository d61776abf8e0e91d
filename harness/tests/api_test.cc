// Every error path of the REST API, authentication and tenant isolation, against a real
// sinew-harness and sinew-store.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"

namespace sinew::harness::test {
namespace {

using ApiErrorTest = ApiFixture;

TEST_F(ApiErrorTest, HealthReadinessAndMetricsNeedNoKey) {
  auto h = Call("GET", base_ + "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json.at("status").as_string(), "ok");
  EXPECT_EQ(Call("GET", base_ + "/readyz").status, 200);
  auto m = Call("GET", base_ + "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("sinew_harness_sessions{status=\"queued\"}"), std::string::npos) << m.body;
  EXPECT_EQ(ErrorCode(Call("POST", base_ + "/healthz")), "method_not_allowed");
}

TEST_F(ApiErrorTest, AuthenticationFailuresAre401) {
  for (const auto& headers : std::vector<std::vector<std::string>>{
           {}, {"Authorization: Basic abc"}, {"Authorization: Bearer nope"}, {"Authorization: Bearer "}}) {
    auto r = Call("GET", base_ + "/v1/sessions", "", headers);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(ErrorCode(r), "unauthenticated");
    EXPECT_FALSE(std::string(r.json.at("error").at("message").as_string()).empty());
  }
}

TEST_F(ApiErrorTest, RoutesMethodsAndMediaTypes) {
  EXPECT_EQ(ErrorCode(Api("GET", base_ + "/v2/things", kKeyA)), "not_found");
  EXPECT_EQ(Api("GET", base_ + "/v2/things", kKeyA).status, 404);
  EXPECT_EQ(ErrorCode(Api("GET", base_ + "/v1/sessions/" + std::string(32, 'a') + "/nothing", kKeyA)), "not_found");
  auto del = Api("DELETE", base_ + "/v1/sessions", kKeyA);
  EXPECT_EQ(del.status, 405);
  EXPECT_EQ(ErrorCode(del), "method_not_allowed");
  EXPECT_EQ(Api("GET", base_ + "/v1/sessions/" + std::string(32, 'a') + "/cancel", kKeyA).status, 405);
  EXPECT_EQ(Api("POST", base_ + "/v1/sessions/" + std::string(32, 'a') + "/events/stream", kKeyA).status, 405);
  auto no_type = Call("POST", base_ + "/v1/sessions", R"({"prompt":"x"})", {"Authorization: Bearer " + std::string(kKeyA)});
  EXPECT_EQ(no_type.status, 415);
  EXPECT_EQ(ErrorCode(no_type), "unsupported_media_type");
  auto import_json = Api("POST", base_ + "/v1/sessions/import", kKeyA, "{}");
  EXPECT_EQ(import_json.status, 415);
}

TEST_F(ApiErrorTest, OversizedBodiesAre413) {
  const std::string body = R"({"prompt": ")" + std::string(100000, 'x') + R"("})";
  auto r = Api("POST", base_ + "/v1/sessions", kKeyA, body);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(ErrorCode(r), "payload_too_large");
  // The server is still fine afterwards.
  EXPECT_EQ(Call("GET", base_ + "/healthz").status, 200);
}

TEST_F(ApiErrorTest, InvalidBodiesAndQueriesAre400WithTheField) {
  struct Case {
    std::string method, path, body, needle;
  } cases[] = {
      {"POST", "/v1/sessions", "{oops", "not valid JSON"},
      {"POST", "/v1/sessions", "[]", "must be a JSON object"},
      {"POST", "/v1/sessions", "{}", "prompt is required"},
      {"POST", "/v1/sessions", R"({"prompt": "x", "model": "gpt-9"})", "not configured"},
      {"POST", "/v1/sessions", R"({"prompt": "x", "tools": ["nuke"]})", "unknown tool"},
      {"POST", "/v1/sessions", R"({"prompt": "x", "limits": {"max_turns": "3"}})", "max_turns"},
      {"GET", "/v1/sessions?status=sleeping", "", "status must be one of"},
      {"GET", "/v1/sessions?limit=0", "", "limit"},
      {"GET", "/v1/sessions?limit=abc", "", "limit"},
  };
  for (const auto& c : cases) {
    auto r = Api(c.method, base_ + c.path, kKeyA, c.body);
    EXPECT_EQ(r.status, 400) << c.path << " " << c.body << " -> " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument");
    if (r.json.is_object()) {
      EXPECT_NE(std::string(r.json.at("error").at("message").as_string()).find(c.needle), std::string::npos)
          << r.body;
    }
  }
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_FALSE(id.empty());
  const std::string s = base_ + "/v1/sessions/" + id;
  EXPECT_EQ(Api("GET", s + "/events?after=-1", kKeyA).status, 400);
  EXPECT_EQ(Api("GET", s + "/events?limit=5000", kKeyA).status, 400);
  EXPECT_EQ(Api("POST", s + "/messages", kKeyA, R"({"text": ""})").status, 400);
  EXPECT_EQ(Api("POST", s + "/messages", kKeyA, R"({"txt": "hi"})").status, 400);
  EXPECT_EQ(Api("POST", s + "/fork", kKeyA, R"({})").status, 400);
  EXPECT_EQ(Api("POST", s + "/fork", kKeyA, R"({"at_seq": 99999})").status, 400);
  auto bad_resume = Call("GET", s + "/events/stream", "", {"Authorization: Bearer " + std::string(kKeyA), "Last-Event-ID: x1"});
  EXPECT_EQ(bad_resume.status, 400);
  EXPECT_EQ(Api("POST", base_ + "/v1/sessions/import", kKeyA, "").status, 415);
  auto bad_import = Call("POST", base_ + "/v1/sessions/import", "not json\n",
                         {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/x-ndjson"});
  EXPECT_EQ(bad_import.status, 400);
  EXPECT_EQ(ErrorCode(bad_import), "invalid_argument");
}

TEST_F(ApiErrorTest, UnknownAndMalformedSessionsAre404) {
  for (const std::string& id : {std::string(32, 'f'), std::string("nope"), std::string(32, 'Z')}) {
    auto r = Api("GET", base_ + "/v1/sessions/" + id, kKeyA);
    EXPECT_EQ(r.status, 404) << id;
    EXPECT_EQ(ErrorCode(r), "not_found");
    EXPECT_EQ(Api("GET", base_ + "/v1/sessions/" + id + "/events", kKeyA).status, 404);
    EXPECT_EQ(Api("POST", base_ + "/v1/sessions/" + id + "/cancel", kKeyA).status, 404);
  }
}

TEST_F(ApiErrorTest, AnotherTenantsSessionIsInvisible) {
  const std::string id = Submit(R"({"prompt": "tenant a's work", "metadata": {"owner": "a"}})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const std::string s = base_ + "/v1/sessions/" + id;
  for (const auto& [method, path, body] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", s, ""},
           {"GET", s + "/events", ""},
           {"GET", s + "/events/stream", ""},
           {"POST", s + "/messages", R"({"text": "hi"})"},
           {"POST", s + "/cancel", ""},
           {"POST", s + "/fork", R"({"at_seq": 1})"}}) {
    auto r = Api(method, path, kKeyB, body);
    EXPECT_EQ(r.status, 404) << method << " " << path << " " << r.body;
    EXPECT_EQ(ErrorCode(r), "not_found");
  }
  auto mine = Api("GET", base_ + "/v1/sessions", kKeyA);
  auto theirs = Api("GET", base_ + "/v1/sessions", kKeyB);
  EXPECT_EQ(mine.json.at("sessions").as_array().size(), 1u);
  EXPECT_EQ(mine.json.at("sessions").at(0).at("metadata").at("owner").as_string(), "a");
  EXPECT_EQ(theirs.json.at("sessions").as_array().size(), 0u);
  // Tenant B cannot import a copy of A's session either.
  std::string ndjson;
  for (const auto& e : AllEvents(base_, kKeyA, id)) ndjson += boost::json::serialize(e) + "\n";
  auto imported = Call("POST", base_ + "/v1/sessions/import", ndjson,
                       {"Authorization: Bearer " + std::string(kKeyB), "Content-Type: application/x-ndjson"});
  EXPECT_EQ(imported.status, 400) << imported.body;
}

TEST_F(ApiErrorTest, ASilentConnectionIsClosedAfterTheReadTimeout) {
  const int port = std::stoi(harness_->address.substr(harness_->address.rfind(':') + 1));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string partial = "GET /healthz HTTP/1.1\r\nHost: x\r\n";  // never finished
  ASSERT_EQ(::send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
  timeval tv{30, 0};  // a bound for the test only; the server's timeout is 2 s
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  EXPECT_EQ(n, 0) << "the server should close a connection that stops sending";
  ::close(fd);
}

}  // namespace
}  // namespace sinew::harness::test

namespace sinew::harness::test {
namespace {

// The built-in agents through the API of a harness without sandboxd: nop runs, oracle
// (which needs a sandbox) is refused with a 400 and creates nothing.
TEST_F(ApiErrorTest, BuiltinNopRunsAndOracleWithoutASandboxdIs400) {
  auto before = Api("GET", base_ + "/v1/sessions", kKeyA);
  ASSERT_EQ(before.status, 200);
  auto r = Api("POST", base_ + "/v1/sessions", kKeyA, R"({"prompt": "echo hi", "model": "oracle"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorCode(r), "invalid_argument");
  EXPECT_NE(r.body.find("no sandboxd"), std::string::npos) << r.body;
  auto after = Api("GET", base_ + "/v1/sessions", kKeyA);
  EXPECT_EQ(after.json.at("sessions").as_array().size(), before.json.at("sessions").as_array().size());

  const std::string id = Submit(R"({"prompt": "do nothing", "model": "nop"})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  auto events = Api("GET", base_ + "/v1/sessions/" + id + "/events", kKeyA);
  ASSERT_EQ(events.status, 200);
  std::vector<std::string> types;
  for (const auto& e : events.json.at("events").as_array()) types.emplace_back(e.at("type").as_string());
  EXPECT_EQ(types, (std::vector<std::string>{"session_created", "user_message", "status_change", "model_request",
                                             "model_response", "status_change"}));
}

}  // namespace
}  // namespace sinew::harness::test
