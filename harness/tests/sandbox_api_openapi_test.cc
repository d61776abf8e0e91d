// The sandbox routes against docs/harness-openapi.yaml, live, with a real sinew-sandboxd:
// every /v1/sandboxes operation's success and refusals checked by
// scripts/check-openapi.py (the rest of the document: OpenApiTest in harness_api_test,
// whose harness has no sandboxd).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "openapi-sandbox-key";
constexpr const char* kOtherKey = "openapi-sandbox-other";

std::pair<int, std::string> RunCheck(const std::string& args) {
  const std::string command = std::string(SINEW_PYTHON3) + " " + SINEW_SOURCE_ROOT +
                              "/scripts/check-openapi.py " + SINEW_SOURCE_ROOT +
                              "/docs/harness-openapi.yaml " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(SandboxApiOpenApiTest, EverySandboxOperationAnswersAsDocumented) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  SandboxdProcess sandboxd;
  ASSERT_FALSE(sandboxd.address.empty())
      << "sinew-sandboxd did not start (root, runc and the image needed)";
  const std::string script =
      WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "done"}]})");
  HarnessProcess harness(dir.Sub("h.json"), R"({"listen": "127.0.0.1:0", "store": {"address": ")" +
                                                store.address + R"("}, "sandboxd": {"address": ")" +
                                                sandboxd.address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "t", ")" +
                                                kOtherKey + R"(": "u"},
      "tenants": {"u": {"max_api_sandboxes": 1, "sandbox_creations_per_minute": 1}},
      "models": {"scripted": {"kind": "scripted", "script": ")" +
                                                script + R"("}}})");
  ASSERT_FALSE(harness.address.empty());
  const std::string base = harness.url();
  const std::string auth = "Authorization: Bearer " + std::string(kKey),
                    as_json = "Content-Type: application/json";
  const std::string other = "Authorization: Bearer " + std::string(kOtherKey);

  json::array answers;
  auto record = [&](const std::string& key, const Reply& reply, const std::string& what) {
    ASSERT_NE(reply.status, 0) << key << " (" << what << "): no answer";
    json::object headers;
    for (const auto& [name, value] : reply.headers) headers[name] = value;
    const size_t space = key.find(' ');
    answers.push_back(json::object{{"method", key.substr(0, space)},
                                   {"route", key.substr(space + 1)},
                                   {"status", reply.status},
                                   {"content_type", reply.Header("content-type")},
                                   {"headers", std::move(headers)},
                                   {"body", reply.body},
                                   {"what", what}});
  };
  auto send = [&](const std::string& key, const std::string& what, const std::string& method,
                  const std::string& path, std::vector<std::string> headers,
                  const std::string& body) {
    Reply r = Call(method, base + path, body, std::move(headers));
    record(key, r, what);
    return r;
  };

  const std::string missing(32, 'f');
  Reply created = send("POST /v1/sandboxes", "created", "POST", "/v1/sandboxes", {auth, as_json},
                       R"({"cpu_millis": 500})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("sandbox").at("id").as_string());
  const std::string s = "/v1/sandboxes/" + id, m = "/v1/sandboxes/" + missing;
  send("POST /v1/sandboxes", "an image that is not built", "POST", "/v1/sandboxes", {auth, as_json},
       R"({"image": "nope"})");
  send("POST /v1/sandboxes", "no key", "POST", "/v1/sandboxes", {as_json}, "{}");
  send("POST /v1/sandboxes", "no media type", "POST", "/v1/sandboxes", {auth}, "{}");
  send("POST /v1/sandboxes", "PUT, a method it does not have", "PUT", "/v1/sandboxes",
       {auth, as_json}, "{}");
  // Tenant u: one sandbox, then both quotas refuse.
  Reply u_first =
      send("POST /v1/sandboxes", "tenant u's one", "POST", "/v1/sandboxes", {other, as_json}, "{}");
  ASSERT_EQ(u_first.status, 201) << u_first.body;
  EXPECT_EQ(send("POST /v1/sandboxes", "over max_api_sandboxes", "POST", "/v1/sandboxes",
                 {other, as_json}, "{}")
                .status,
            429);

  send("GET /v1/sandboxes", "listed", "GET", "/v1/sandboxes?limit=5", {auth}, "");
  send("GET /v1/sandboxes", "limit=0", "GET", "/v1/sandboxes?limit=0", {auth}, "");
  send("GET /v1/sandboxes", "no key", "GET", "/v1/sandboxes", {}, "");

  send("GET /v1/sandboxes/{id}", "shown", "GET", s, {auth}, "");
  send("GET /v1/sandboxes/{id}", "another tenant's", "GET", s, {other}, "");
  send("GET /v1/sandboxes/{id}", "POST, a method it does not have", "POST", s, {auth, as_json},
       "{}");

  const std::string bash =
      R"({"name": "bash", "input": {"command": "echo hi > f"}, "call_id": "c1"})";
  send("POST /v1/sandboxes/{id}/execute", "ran", "POST", s + "/execute", {auth, as_json}, bash);
  send("POST /v1/sandboxes/{id}/execute", "the same call id, another call", "POST", s + "/execute",
       {auth, as_json}, R"({"name": "bash", "input": {"command": "ls"}, "call_id": "c1"})");
  const std::string events = "Accept: text/event-stream";
  Reply streamed = send("POST /v1/sandboxes/{id}/execute", "ran, as events", "POST", s + "/execute",
                        {auth, as_json, events}, R"({"name": "bash", "input": {"command": "echo out; echo err >&2"}})");
  EXPECT_NE(streamed.body.find("event: result"), std::string::npos) << streamed.body;
  send("POST /v1/sandboxes/{id}/execute", "the same call id, another call, as events", "POST", s + "/execute",
       {auth, as_json, events}, R"({"name": "bash", "input": {"command": "ls"}, "call_id": "c1"})");
  send("POST /v1/sandboxes/{id}/execute", "an unknown tool", "POST", s + "/execute",
       {auth, as_json}, R"({"name": "nope"})");
  send("POST /v1/sandboxes/{id}/execute", "unknown id", "POST", m + "/execute", {auth, as_json},
       bash);
  send("POST /v1/sandboxes/{id}/execute", "no media type", "POST", s + "/execute", {auth}, bash);
  send("POST /v1/sandboxes/{id}/execute", "GET, a method it does not have", "GET", s + "/execute",
       {auth}, "");

  const std::string octets = "Content-Type: application/octet-stream";
  const std::string put_files = "PUT /v1/sandboxes/{id}/files", get_files = "GET /v1/sandboxes/{id}/files";
  EXPECT_EQ(send(put_files, "uploaded", "PUT", s + "/files?path=up/a.txt", {auth, octets}, "uploaded\n").status,
            201);
  send(put_files, "a path out of the workspace", "PUT", s + "/files?path=../../etc/passwd", {auth, octets}, "x");
  send(put_files, "no path", "PUT", s + "/files", {auth, octets}, "x");
  send(put_files, "unknown id", "PUT", m + "/files?path=a", {auth, octets}, "x");
  send(put_files, "JSON, not a file", "PUT", s + "/files?path=a", {auth, as_json}, "{}");
  send(put_files, "POST, a method it does not have", "POST", s + "/files?path=a", {auth, octets}, "x");
  EXPECT_EQ(send(get_files, "downloaded", "GET", s + "/files?path=f", {auth}, "").body, "hi\n");
  send(get_files, "a path out of the workspace", "GET", s + "/files?path=/etc/passwd", {auth}, "");
  send(get_files, "a file that does not exist", "GET", s + "/files?path=nope", {auth}, "");
  send(get_files, "another tenant's", "GET", s + "/files?path=f", {other}, "");

  Reply taken = send("POST /v1/sandboxes/{id}/snapshot", "taken", "POST", s + "/snapshot", {auth}, "");
  ASSERT_EQ(taken.status, 201) << taken.body;
  send("POST /v1/sandboxes/{id}/snapshot", "unknown id", "POST", m + "/snapshot", {auth}, "");

  const std::string snaps = "/v1/sandboxes/snapshots", snap_key = "DELETE /v1/sandboxes/snapshots/{snapshot_id}";
  const std::string snap = snaps + "/" + std::string(taken.json.at("snapshot").at("id").as_string());
  EXPECT_EQ(send("GET /v1/sandboxes/snapshots", "listed", "GET", snaps, {auth}, "").status, 200);
  send("GET /v1/sandboxes/snapshots", "no key", "GET", snaps, {}, "");
  send("GET /v1/sandboxes/snapshots", "POST, a method it does not have", "POST", snaps, {auth, as_json}, "{}");
  send(snap_key, "another tenant's", "DELETE", snap, {other}, "");
  send(snap_key, "GET, a method it does not have", "GET", snap, {auth}, "");
  EXPECT_EQ(send(snap_key, "deleted", "DELETE", snap, {auth}, "").status, 200);
  send(snap_key, "deleted already", "DELETE", snap, {auth}, "");
  send(snap_key, "a malformed id", "DELETE", snaps + "/snap-nope", {auth}, "");

  Reply forked = send("POST /v1/sandboxes/{id}/fork", "forked", "POST", s + "/fork",
                      {auth, as_json}, R"({"n": 1})");
  EXPECT_EQ(forked.status, 201) << forked.body;
  send("POST /v1/sandboxes/{id}/fork", "n=17", "POST", s + "/fork", {auth, as_json},
       R"({"n": 17})");
  send("POST /v1/sandboxes/{id}/fork", "no media type", "POST", s + "/fork", {auth}, R"({"n": 1})");
  const std::string u_id(u_first.json.at("sandbox").at("id").as_string());
  send("POST /v1/sandboxes/{id}/fork", "over max_api_sandboxes", "POST",
       "/v1/sandboxes/" + u_id + "/fork", {other, as_json}, "{}");

  send("POST /v1/sandboxes/{id}/pause", "paused", "POST", s + "/pause", {auth}, "");
  send("POST /v1/sandboxes/{id}/execute", "while paused", "POST", s + "/execute", {auth, as_json},
       bash);
  send("POST /v1/sandboxes/{id}/snapshot", "while paused", "POST", s + "/snapshot", {auth}, "");
  send(put_files, "while paused", "PUT", s + "/files?path=a", {auth, octets}, "x");
  send(get_files, "while paused", "GET", s + "/files?path=f", {auth}, "");
  send("POST /v1/sandboxes/{id}/pause", "unknown id", "POST", m + "/pause", {auth}, "");
  send("POST /v1/sandboxes/{id}/resume", "resumed", "POST", s + "/resume", {auth}, "");
  send("POST /v1/sandboxes/{id}/resume", "unknown id", "POST", m + "/resume", {auth}, "");

  send("DELETE /v1/sandboxes/{id}", "deleted", "DELETE", s, {auth}, "");
  send("DELETE /v1/sandboxes/{id}", "unknown id", "DELETE", m, {auth}, "");
  send("POST /v1/sandboxes/{id}/pause", "deleted", "POST", s + "/pause", {auth}, "");
  // Tenant u deletes its one and creates again within the minute.
  send("DELETE /v1/sandboxes/{id}", "tenant u's", "DELETE", "/v1/sandboxes/" + u_id, {other}, "");
  EXPECT_EQ(send("POST /v1/sandboxes", "over sandbox_creations_per_minute", "POST", "/v1/sandboxes",
                 {other, as_json}, "{}")
                .status,
            429);
  send("GET /v1/sandboxes", "with the ended ones", "GET", "/v1/sandboxes?include_ended=true",
       {auth}, "");
  Reply audit = Call("GET", base + "/v1/audit?limit=1000", "", {auth});
  ASSERT_EQ(audit.status, 200) << audit.body;
  record("GET /v1/audit", audit, "the sandbox records");
  // The forked sandbox goes too.
  for (const auto& child : forked.json.at("sandboxes").as_array()) {
    Call("DELETE", base + "/v1/sandboxes/" + std::string(child.at("id").as_string()), "", {auth});
  }

  const std::string path = dir.Sub("answers.json");
  WriteFile(path, json::serialize(answers));
  auto out = RunCheck("--answers " + path + " --coverage-only=/v1/sandboxes");
  EXPECT_EQ(out.first, 0) << answers.size()
                          << " answers checked; the document and the server disagree:\n"
                          << out.second;
}

}  // namespace
}  // namespace sinew::harness::test
