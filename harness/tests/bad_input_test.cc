// The defects found by sending the harness bad input (issue 13), each as a test against a
// real sinew-harness and sinew-store: a clear 4xx and no trace, never a 500, a hang or a
// dropped connection.

#include "api_fixture.h"
#include "sinew/session_store/session_store.h"

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
        RawHttpExchange(PortOf(harness_->address), "GET " + path + how + "Host: x\r\n" + auth + "Connection: close\r\n\r\n");
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

// Every numeric query parameter of the API takes digits and nothing else: a value that
// only starts with a number ("5%00" once listed 5 sessions) is a 400 naming the parameter.
TEST_F(BadInputTest, NumbersInQueryStringsAreParsedStrictly) {
  const std::string id = Submit(R"({"prompt": "hello"})");
  ASSERT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
  const std::string s = base_ + "/v1/sessions/" + id;
  struct Param {
    std::string url_before, name;  // the URL up to the query, the parameter
  };
  const std::vector<Param> params = {{base_ + "/v1/sessions?", "limit"},
                                     {s + "/events?", "after"},
                                     {s + "/events?", "limit"},
                                     {s + "/events/stream?", "after"}};
  for (const auto& p : params) {
    for (const std::string bad : {"5%00", "5%00x", "5%20", "%205", "+5", "5x", "0x5", "5.0", "5e0", "", "-0"}) {
      const std::string url = p.url_before + p.name + "=" + bad;
      auto r = Call("GET", url, "", {"Authorization: Bearer " + std::string(kKeyA)});
      EXPECT_EQ(r.status, 400) << url << " -> " << r.body;
      EXPECT_EQ(ErrorCode(r), "invalid_argument") << url;
      EXPECT_NE(r.body.find("query parameter " + p.name), std::string::npos) << url << " -> " << r.body;
    }
    // The plain number is fine (the stream of a finished session ends).
    auto ok = Call("GET", p.url_before + p.name + "=5", "", {"Authorization: Bearer " + std::string(kKeyA)});
    EXPECT_EQ(ok.status, 200) << p.url_before << p.name << "=5 -> " << ok.body;
  }
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

// An imported session is a record (docs/harness.md, "Imported sessions are records"):
// importing, exporting, forking from it leave it as it was, queued and undriven, over
// scans of the store; a follow-up message is what makes it work.
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
  const std::string s = base_ + "/v1/sessions/" + id;
  // Reading and forking it leave its log as it was (their records go to the tenant's audit
  // log, docs/security.md).
  ASSERT_EQ(Call("GET", s + "/export", "", {"Authorization: Bearer " + std::string(kKeyA)}).status, 200);
  auto fork = Api("POST", s + "/fork", kKeyA, R"({"at_seq": 1})");
  ASSERT_EQ(fork.status, 201) << fork.body;
  // The fork is work of its own: it runs.
  EXPECT_EQ(WaitForStatus(base_, kKeyA, std::string(fork.json.at("session").at("id").as_string()), "completed"),
            "completed");
  const size_t logged = AllEvents(base_, kKeyA, id).size();
  EXPECT_EQ(logged, queued.size()) << "the import's, the export's and the fork's records belong in the audit log";
  // Two scans of the store's queued sessions pass over it: each of them wakes a queued
  // session written to the store behind every harness's back, which then runs to its end.
  auto store = store::ConnectSessionStore(store_->address);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int scan = 0; scan < 2; ++scan) {
    v1::CreateSessionRequest req;
    req.set_tenant("tenant-a");
    req.set_title("woken by a scan");
    req.set_task_json(std::string(events.front().at("session_created").at("task_json").as_string()));
    req.set_initial_status(v1::SESSION_STATUS_QUEUED);
    auto control = (*store)->CreateSession(req);
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    ASSERT_EQ(WaitForStatus(base_, kKeyA, control->id(), "completed"), "completed") << "scan " << scan;
  }
  auto meta = (*store)->GetSession(id);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->status(), v1::SESSION_STATUS_QUEUED);
  EXPECT_EQ(meta->lease_epoch(), 0u) << "something took its lease, which marks it as driven";
  EXPECT_EQ(AllEvents(base_, kKeyA, id).size(), logged) << "a harness drove the imported record";
  // A follow-up message makes it work: it runs to its end.
  auto m = Api("POST", s + "/messages", kKeyA, R"({"text": "go on"})");
  ASSERT_EQ(m.status, 202) << m.body;
  EXPECT_EQ(WaitForStatus(base_, kKeyA, id, "completed"), "completed");
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
    const std::string reply = RawHttpExchange(port, raw);
    EXPECT_EQ(reply.rfind("HTTP/1.1 4", 0), 0u) << what << ": got \"" << reply << "\"";
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << what << ": " << reply;
  }
  EXPECT_EQ(Call("GET", base_ + "/healthz").status, 200);
}

}  // namespace
}  // namespace sinew::harness::test
