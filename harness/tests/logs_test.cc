// Structured logs across processes (docs/logging.md): real sinew-store, sinew-harness and
// sinew-model processes with --log-format=json; one session's trace id appears in the
// harness's lines about it and in the model server's lines about its calls; a harness
// that takes over a killed one's session says so at info, naming the session.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <set>
#include <thread>

#include "sinew/trace.h"
#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;
constexpr const char* kKey = "logs-key";

bool MsgHas(const json::object& o, const std::string& needle) {
  return Str(o, "msg").find(needle) != std::string::npos;
}

TEST(LogsTest, OneTraceFollowsASessionFromHarnessToModelServer) {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  const std::string gguf = std::string(source != nullptr ? source : ".") + "/../shared/models/stories260K.gguf";
  if (access(gguf.c_str(), R_OK) != 0) GTEST_SKIP() << "no model file at " << gguf;
  testing::TempDir dir;
  // The store logs each session RPC at debug level, with the caller's trace.
  testing::Subprocess store({testing::BinaryPath("sinew-store"), "--db", dir.Sub("db"), "--listen", "127.0.0.1:0",
                             "--log-format", "json", "--log-level", "debug"});
  auto store_line = store.WaitForLine("listening on", std::chrono::seconds(30));
  ASSERT_TRUE(store_line.has_value());
  const std::string store_address = store_line->substr(store_line->rfind(' ') + 1);
  testing::Subprocess model({testing::BinaryPath("sinew-model"), "--model", gguf, "--port", "0", "--grpc-port",
                             "-1", "--threads", "1", "--log-format", "json"});
  auto listening = model.WaitForLine("http listening on", std::chrono::seconds(60));
  ASSERT_TRUE(listening.has_value());
  const std::string model_url = "http://" + listening->substr(listening->rfind(' ') + 1) + "/v1";
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0", "log_format": "json",
    "store": {"address": ")" + store_address + R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"real": {"kind": "openai", "base_url": ")" + model_url + R"(", "model": "stories260K",
                        "tools": false, "context_tokens": 256, "max_output_tokens": 8}}})");
  ASSERT_FALSE(harness.address.empty());
  auto r = Api("POST", harness.url() + "/v1/sessions", kKey, R"({"prompt": "Once upon a time", "model": "real"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
  const std::string trace = TraceIdForSession(id);

  const auto harness_lines = ReadJsonLines(harness.proc.get(), std::chrono::milliseconds(1000));
  int about_session = 0;
  bool woken = false, completed = false;
  for (const auto& line : harness_lines) {
    EXPECT_EQ(Str(line, "component"), "sinew-harness") << json::serialize(line);
    if (Str(line, "session") != id) continue;
    ++about_session;
    EXPECT_EQ(Str(line, "trace_id"), trace) << json::serialize(line);
    // Lines of the agent loop name the event they are at; API request lines do not.
    if (!MsgHas(line, "api ")) {
      EXPECT_TRUE(line.contains("seq")) << json::serialize(line);
    }
    woken = woken || MsgHas(line, "woken");
    completed = completed || (MsgHas(line, "completed") && Str(line, "level") == "info");
  }
  EXPECT_TRUE(woken) << "an info line says the session was woken";
  EXPECT_TRUE(completed) << "an info line says the session completed";

  const auto model_lines = ReadJsonLines(&model, std::chrono::milliseconds(1000));
  int started = 0, ended = 0;
  std::set<std::string> spans;
  for (const auto& line : model_lines) {
    EXPECT_EQ(Str(line, "component"), "sinew-model") << json::serialize(line);
    if (MsgHas(line, "request ended")) std::printf("model server line: %s\n", json::serialize(line).c_str());
    if (Str(line, "trace_id") != trace) continue;
    spans.insert(Str(line, "span_id"));
    EXPECT_EQ(Str(line, "parent_span_id").size(), 16u) << "the harness's span of the call: " << json::serialize(line);
    started += MsgHas(line, "request started") ? 1 : 0;
    ended += MsgHas(line, "request ended") ? 1 : 0;
  }
  EXPECT_GE(started, 1) << "the model server logs the harness's call with the session's trace";
  EXPECT_EQ(started, ended);
  EXPECT_EQ(spans.size(), static_cast<size_t>(started)) << "a span of its own per request";

  int appends = 0;
  const auto store_lines = ReadJsonLines(&store, std::chrono::milliseconds(500));
  for (const auto& line : store_lines) {
    EXPECT_EQ(Str(line, "component"), "sinew-store") << json::serialize(line);
    if (Str(line, "session") == id && MsgHas(line, "store Append started")) {
      ++appends;
      EXPECT_EQ(Str(line, "trace_id"), trace) << "the harness's appends carry the session's trace";
      EXPECT_EQ(Str(line, "level"), "debug");
    }
  }
  EXPECT_GE(appends, 1);
  std::printf("logs test: %zu harness lines (%d about the session), %zu model server lines, %zu store lines "
              "(%d appends of the session), trace %s\n",
              harness_lines.size(), about_session, model_lines.size(), store_lines.size(), appends, trace.c_str());
}

TEST(LogsTest, TakeoverAfterAKillIsLoggedWithTheSession) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  // The first answer takes long enough for the kill to land while the call is under way.
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "slow", "delay_ms": 1500}]})");
  const std::string config = R"({"listen": "127.0.0.1:0", "log_format": "json",
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"scripted": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("}},
    "lease_ttl_ms": 600, "scan_interval_ms": 200})";
  HarnessProcess first(dir.Sub("first.json"), config);
  ASSERT_FALSE(first.address.empty());
  auto r = Api("POST", first.url() + "/v1/sessions", kKey, R"({"prompt": "p"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id(r.json.at("session").at("id").as_string());
  // Kill it once the model call is written ahead.
  bool requested = false;
  for (int i = 0; i < 100 && !requested; ++i) {
    for (const auto& e : AllEvents(first.url(), kKey, id)) requested = requested || e.contains("model_request");
    if (!requested) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(requested);
  first.proc->Signal(SIGKILL);
  first.proc->Wait();

  HarnessProcess second(dir.Sub("second.json"), config);
  ASSERT_FALSE(second.address.empty());
  ASSERT_EQ(WaitForStatus(second.url(), kKey, id, "completed,failed"), "completed");
  bool takeover = false, interrupted = false, completed = false;
  for (const auto& line : ReadJsonLines(second.proc.get(), std::chrono::milliseconds(1000))) {
    EXPECT_FALSE(line.contains("not_json")) << json::serialize(line);
    if (Str(line, "session") != id) continue;
    EXPECT_EQ(Str(line, "trace_id"), TraceIdForSession(id)) << "the same trace after the takeover";
    if (Str(line, "level") != "info") continue;
    if (MsgHas(line, "resumed by") && MsgHas(line, "taken over from")) {
      takeover = true;
      std::printf("takeover line: %s\n", json::serialize(line).c_str());
      EXPECT_TRUE(MsgHas(line, first.url())) << "names the previous owner's address: " << Str(line, "msg");
      EXPECT_TRUE(MsgHas(line, "after seq")) << Str(line, "msg");
    }
    interrupted = interrupted || MsgHas(line, "was under way");
    completed = completed || MsgHas(line, "completed");
  }
  EXPECT_TRUE(takeover) << "an info line says who took the session over, from whom";
  EXPECT_TRUE(interrupted) << "an info line names the model call the killed harness left";
  EXPECT_TRUE(completed);
}

// The REST API continues the caller's trace (W3C traceparent), or joins the session's
// trace when the caller sends none or an invalid one; every answered request that changes
// something is one info line naming the session.
TEST(LogsTest, ApiRequestsContinueTheCallersTraceOrJoinTheSessions) {
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  WriteFile(dir.Sub("script.json"), R"({"responses": [{"text": "done"}], "loop": true})");
  HarnessProcess harness(dir.Sub("harness.json"), R"({"listen": "127.0.0.1:0", "log_format": "json",
    "store": {"address": ")" + store.address + R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"scripted": {"kind": "scripted", "script": ")" + dir.Sub("script.json") + R"("}}})");
  ASSERT_FALSE(harness.address.empty());
  const std::string caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string caller_span = "00f067aa0ba902b7";
  const std::string traceparent = "traceparent: 00-" + caller_trace + "-" + caller_span + "-01";
  const std::vector<std::string> json_auth = {"Authorization: Bearer " + std::string(kKey),
                                              "Content-Type: application/json"};
  auto with = [](std::vector<std::string> headers, const std::string& extra) {
    headers.push_back(extra);
    return headers;
  };
  auto created = Call("POST", harness.url() + "/v1/sessions", R"({"prompt": "p"})", with(json_auth, traceparent));
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
  // No traceparent, then one the spec says to ignore (upper-case hex): the session's trace.
  auto plain = Call("POST", harness.url() + "/v1/sessions/" + id + "/messages", R"({"text": "again"})", json_auth);
  ASSERT_EQ(plain.status, 202) << plain.body;
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");
  auto invalid = Call("POST", harness.url() + "/v1/sessions/" + id + "/cancel", "",
                      with(json_auth, "traceparent: 00-" + std::string(32, 'A') + "-" + caller_span + "-01"));
  // A request that names no session keeps the caller's trace too, refused or not.
  auto refused = Call("POST", harness.url() + "/v1/sessions", R"({"prompt": ""})", with(json_auth, traceparent));
  ASSERT_EQ(refused.status, 400) << refused.body;

  std::map<std::string, json::object> by_request;  // "api POST <path> -> <status>" -> its line
  for (const auto& line : ReadJsonLines(harness.proc.get(), std::chrono::milliseconds(1000))) {
    EXPECT_FALSE(line.contains("not_json")) << json::serialize(line);
    const std::string msg = Str(line, "msg");
    if (msg.rfind("api ", 0) == 0) by_request[msg.substr(0, msg.find(" in "))] = line;
  }
  for (const auto& [request, line] : by_request) {
    std::printf("%s: %s\n", request.c_str(), json::serialize(line).c_str());
  }
  const std::string create_key = "api POST /v1/sessions -> 201";
  ASSERT_TRUE(by_request.count(create_key)) << "one info line per answered request";
  const json::object& create = by_request[create_key];
  EXPECT_EQ(Str(create, "level"), "info");
  EXPECT_EQ(Str(create, "trace_id"), caller_trace);
  EXPECT_EQ(Str(create, "parent_span_id"), caller_span);
  EXPECT_EQ(Str(create, "session"), id) << "the created session is named";
  EXPECT_EQ(Str(create, "span_id").size(), 16u);
  EXPECT_NE(Str(create, "span_id"), caller_span) << "a span of its own";

  const std::string message_key = "api POST /v1/sessions/" + id + "/messages -> 202";
  ASSERT_TRUE(by_request.count(message_key));
  EXPECT_EQ(Str(by_request[message_key], "trace_id"), TraceIdForSession(id));
  EXPECT_EQ(Str(by_request[message_key], "session"), id);
  EXPECT_FALSE(by_request[message_key].contains("parent_span_id"));

  const std::string cancel_key = "api POST /v1/sessions/" + id + "/cancel -> " + std::to_string(invalid.status);
  ASSERT_TRUE(by_request.count(cancel_key));
  EXPECT_EQ(Str(by_request[cancel_key], "trace_id"), TraceIdForSession(id)) << "an invalid traceparent is ignored";
  EXPECT_FALSE(by_request[cancel_key].contains("parent_span_id"));

  const std::string refused_key = "api POST /v1/sessions -> 400";
  ASSERT_TRUE(by_request.count(refused_key));
  EXPECT_EQ(Str(by_request[refused_key], "trace_id"), caller_trace);
  EXPECT_FALSE(by_request[refused_key].contains("session"));
}

}  // namespace
}  // namespace sinew::harness::test
