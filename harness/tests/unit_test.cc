// In-process tests of the harness's pure parts: config, vault, SSE parsing, task
// validation, the scripted model and the log state that wake() rebuilds.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include "async.h"
#include "model_clients.h"
#include "log_state.h"
#include "task_spec.h"
#include "sinew/harness/config.h"
#include "sinew/harness/vault.h"
#include "sinew/sandbox/tool_specs.h"
#include "test_util.h"
#include "tool_catalog.h"

namespace sinew::harness {
namespace {

const char* kMinimal = R"({"store": {"address": "127.0.0.1:1"}, "api_keys": {"k": "t"},
  "models": {"m": {"kind": "scripted", "script": "/dev/null"}}})";

TEST(ConfigTest, MinimalConfigGetsDefaults) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->default_model, "m");
  EXPECT_EQ(c->models.at("m").model, "m");
  EXPECT_EQ(c->lease_ttl_ms, 10000u);
  EXPECT_EQ(c->api_keys.at("k"), "t");
  EXPECT_EQ(c->models.at("m").stream, "auto");
}

TEST(ConfigTest, AdvertiseUrlIsAnHttpOrHttpsOriginWithoutPath) {
  auto with = [](const std::string& url) {
    return ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, "advertise_url": ")" + url + "\"}");
  };
  EXPECT_TRUE(with("https://10-0-0-7.sinew.pod.cluster.local:8080").ok());
  EXPECT_TRUE(with("http://127.0.0.1:8080").ok());
  for (const char* bad : {"10.0.0.7:8080", "ftp://h", "https://", "https://h/api", "https://h x"}) {
    auto r = with(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("config.advertise_url"), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, PlainHttpOnlyOnLoopbackUnlessInsecure) {
  auto with = [](const std::string& extra) {
    return ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, )" + extra + "}");
  };
  EXPECT_TRUE(with(R"("listen": "127.0.0.1:0")").ok());
  EXPECT_TRUE(with(R"("listen": "[::1]:0")").ok());
  auto open = with(R"("listen": "0.0.0.0:8080")");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.status().message().find("config.insecure"), std::string::npos) << open.status().message();
  EXPECT_TRUE(with(R"("listen": "0.0.0.0:8080", "insecure": true)").ok());
  EXPECT_TRUE(with(R"("listen": "0.0.0.0:8080", "tls": {"cert_file": "c.pem", "key_file": "k.pem"})").ok());
  EXPECT_FALSE(with(R"("listen": "0.0.0.0:8080", "tls": {"cert_file": "c.pem"})").ok());
}

TEST(ConfigTest, LogFormatIsTextOrJson) {
  auto with = [](const std::string& extra) {
    return ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "openai", "base_url": "http://h/v1"}})" + extra + "}");
  };
  auto plain = with("");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->log_format, "text");
  auto json_logs = with(R"(, "log_format": "json")");
  ASSERT_TRUE(json_logs.ok()) << json_logs.status().ToString();
  EXPECT_EQ(json_logs->log_format, "json");
  auto bad = with(R"(, "log_format": "yaml")");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("config.log_format"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(with(R"(, "log_format": 1)").ok());
}

// A minimal config whose "sandboxd" block is `sandboxd`.
Result<HarnessConfig> ConfigWithSandboxd(const std::string& sandboxd) {
  return ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, "sandboxd": )" + sandboxd + "}");
}

TEST(ConfigTest, SandboxdIsOneAddressOrAnEtcdOfHosts) {
  const auto with = ConfigWithSandboxd;
  auto etcd = with(R"({"etcd": "127.0.0.1:2379"})");
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  EXPECT_EQ(etcd->sandboxd_etcd, "127.0.0.1:2379");
  EXPECT_TRUE(etcd->sandboxd_address.empty());
  auto both = with(R"({"etcd": "127.0.0.1:2379", "address": "127.0.0.1:7702"})");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("not both"), std::string::npos) << both.status().message();
  auto no_port = with(R"({"etcd": "etcd.local"})");
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(no_port.status().message().find("config.sandboxd.etcd"), std::string::npos);
  EXPECT_FALSE(with(R"({"etcd": 5})").ok());
}

TEST(ConfigTest, SandboxProvisionTimeoutDefaultsToTenMinutesAndIsChecked) {
  const auto with = ConfigWithSandboxd;
  auto plain = with(R"({"address": "127.0.0.1:7702"})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->sandbox_provision_timeout_seconds, 600u);
  auto set = with(R"({"address": "127.0.0.1:7702", "provision_timeout_seconds": 90})");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->sandbox_provision_timeout_seconds, 90u);
  for (const char* bad : {"0", "86401", "-1", "\"60\""}) {
    auto r = with(std::string(R"({"address": "127.0.0.1:7702", "provision_timeout_seconds": )") + bad + "}");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("provision_timeout_seconds"), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, ModelStreamModeIsAutoOnOrOff) {
  for (const char* mode : {"auto", "on", "off"}) {
    auto c = ParseConfig(std::string(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"m": {"kind": "openai", "base_url": "http://h/v1", "stream": ")") + mode + R"("}}})");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->models.at("m").stream, mode);
  }
  auto bad = ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
    "models": {"m": {"kind": "openai", "base_url": "http://h/v1", "stream": true}}})");
  EXPECT_NE(bad.status().message().find("config.models.m.stream must be a string"), std::string::npos)
      << bad.status().message();
  auto unknown = ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
    "models": {"m": {"kind": "openai", "base_url": "http://h/v1", "stream": "sometimes"}}})");
  EXPECT_NE(unknown.status().message().find("config.models.m.stream must be \"auto\", \"on\" or \"off\""),
            std::string::npos)
      << unknown.status().message();
}

TEST(ConfigTest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* needle;
  } cases[] = {
      {"[]", "must be a JSON object"},
      {R"({"bogus": 1})", "unknown field 'bogus'"},
      {R"({"api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}})", "config.store"},
      {R"({"store": {"address": "a", "dir": "d"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}})",
       "exactly one"},
      {R"({"store": {"address": "a"}, "models": {"m": {"kind": "scripted", "script": "x"}}})", "api_keys"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "gpt"}}})", "kind"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "openai"}}})", "base_url"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x", "api_key_secret": "nope"}}})",
       "unknown secret 'nope'"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "default_model": "z"})",
       "default_model"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "workers": -1})",
       "config.workers"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "workers": 10001})",
       "config.workers must be from 1 to 10000"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "api_threads": 0})",
       "config.api_threads must be from 1 to 4096"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "api_threads": 4097})",
       "config.api_threads must be from 1 to 4096"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "max_sessions_driven": 0})",
       "config.max_sessions_driven must be from 1 to 1000000"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "max_sessions_driven": 1000001})",
       "config.max_sessions_driven must be from 1 to 1000000"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "secrets": {"s": {"env": "SINEW_SURELY_UNSET_VAR"}}})",
       "SINEW_SURELY_UNSET_VAR"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "http_request": {"allow": [{"host": "a"}, {"host": 7}]}})",
       "config.http_request.allow[1].host must be a string"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "http_request": {"allow": [5]}})",
       "config.http_request.allow[0] must be an object"},
      {R"({"store": {"address": "a"}, "api_keys": {"k": "t"}, "models": {"m": {"kind": "scripted", "script": "x"}}, "limits": []})",
       "config.limits must be an object"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseConfig(c.json);
    ASSERT_FALSE(parsed.ok()) << c.json;
    EXPECT_NE(parsed.status().message().find(c.needle), std::string::npos)
        << c.json << " -> " << parsed.status().message();
  }
}

TEST(ConfigTest, SecretsComeFromValuesAndEnvironment) {
  setenv("SINEW_TEST_SECRET", "from-env-123", 1);
  auto c = ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
    "models": {"m": {"kind": "scripted", "script": "x"}},
    "secrets": {"a": {"value": "inline-1"}, "b": {"env": "SINEW_TEST_SECRET"}},
    "http_request": {"allow": [{"host": "API.example:443", "secret": "b"}]}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->secrets.at("a"), "inline-1");
  EXPECT_EQ(c->secrets.at("b"), "from-env-123");
  EXPECT_EQ(c->http_allow.at(0).host, "api.example:443");
}

TEST(VaultTest, RedactsEveryOccurrenceAndNamesTheSecret) {
  auto vault = Vault::Create({{"gh", "ghp_abc"}, {"empty", ""}});
  EXPECT_EQ(vault->Redact("a ghp_abc b ghp_abc"), "a [REDACTED:gh] b [REDACTED:gh]");
  EXPECT_TRUE(vault->Contains("xxghp_abcxx"));
  EXPECT_FALSE(vault->Contains("ghp_ab"));
  EXPECT_EQ(*vault->Get("gh"), "ghp_abc");
  EXPECT_FALSE(vault->Get("empty").has_value());
}

TEST(TaskTest, ValidatesEveryField) {
  auto config = ParseConfig(kMinimal);
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(ParseTaskRequest(R"({"prompt": "x"})", *config).ok());
  // null counts as absent (sinew/json_fields.h).
  EXPECT_TRUE(ParseTaskRequest(R"({"prompt": "x", "title": null, "limits": null, "tools": null})", *config).ok());
  struct Case {
    const char* body;
    const char* needle;
  } cases[] = {
      {"{", "not valid JSON"},
      {R"({})", "prompt is required"},
      {R"({"prompt": ""})", "must not be empty"},
      {R"({"prompt": 5})", "body.prompt must be a string"},
      {R"({"prompt": "x", "model": "zzz"})", "not configured"},
      {R"({"prompt": "x", "tools": ["rm_rf"]})", "unknown tool 'rm_rf'"},
      {R"({"prompt": "x", "tools": "bash"})", "array of tool names"},
      {R"({"prompt": "x", "limits": {"max_turns": 0}})", "at least 1"},
      {R"({"prompt": "x", "limits": {"max_turns": -3}})", "non-negative integer"},
      {R"({"prompt": "x", "sandbox": {"cpu": 1}})", "unknown field 'cpu'"},
      {R"({"prompt": "x", "sandbox": {"attach": "sb-1"}})", "body.sandbox.attach must be an object"},
      {R"({"prompt": "x", "sandbox": {"attach": {"id": "sb-1"}}})", "needs a sandbox id and its endpoint"},
      {R"({"prompt": "x", "sandbox": {"attach": {"id": "a", "endpoint": "unix:///x", "z": 1}}})", "unknown field 'z'"},
      {R"({"prompt": "x", "metadata": {"a": 1}})", "body.metadata.a must be a string"},
      {R"({"prompt": "x", "extra": 1})", "unknown field 'extra'"},
      {R"({"prompt": null})", "body.prompt is required"},
      {R"({"prompt": "x", "limits": {"max_turns": 1e3}})", "body.limits.max_turns must be a non-negative integer"},
      {R"({"prompt": "x", "sandbox": {"attach": null}})", "body.sandbox.attach must be an object"},
  };
  for (const auto& c : cases) {
    auto t = ParseTaskRequest(c.body, *config);
    ASSERT_FALSE(t.ok()) << c.body;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos) << c.body << " -> " << t.status().message();
  }
  auto full = ParseTaskRequest(
      R"({"prompt": "p", "tools": ["bash"], "limits": {"max_turns": 3}, "sandbox": {"cpu_millis": 500}})", *config);
  ASSERT_TRUE(full.ok());
  auto back = TaskFromJson(TaskToJson(*full), *config);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->prompt, "p");
  EXPECT_EQ(back->max_turns, 3u);
  EXPECT_EQ(back->tools, std::vector<std::string>{"bash"});
  EXPECT_NE(back->sandbox_json.find("500"), std::string::npos);
  EXPECT_FALSE(AttachesSandbox(back->sandbox_json));
  auto attached = ParseTaskRequest(
      R"({"prompt": "p", "sandbox": {"attach": {"id": "sb-1", "endpoint": "unix:///run/x/agent.sock"}}})", *config);
  ASSERT_TRUE(attached.ok()) << attached.status().message();
  EXPECT_TRUE(AttachesSandbox(attached->sandbox_json));
}

// A conversation that stays open (docs/harness.md, "Conversations that stay open").
TEST(TaskTest, KeepOpenAndItsIdleLimitAreValidatedAndKept) {
  auto config = ParseConfig(kMinimal);
  ASSERT_TRUE(config.ok());
  auto plain = ParseTaskRequest(R"({"prompt": "x"})", *config);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->keep_open);
  EXPECT_EQ(TaskToJson(*plain).find("keep_open"), std::string::npos);  // old tasks' JSON unchanged
  auto open = ParseTaskRequest(R"({"prompt": "x", "keep_open": true})", *config);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->keep_open);
  EXPECT_EQ(open->idle_close_seconds, 3600u);
  auto back = TaskFromJson(TaskToJson(*open), *config);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->keep_open);
  EXPECT_EQ(back->idle_close_seconds, 3600u);
  auto set = ParseTaskRequest(R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 2})", *config);
  ASSERT_TRUE(set.ok());
  back = TaskFromJson(TaskToJson(*set), *config);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->idle_close_seconds, 2u);
  struct Case {
    const char* body;
    const char* needle;
  } cases[] = {
      {R"({"prompt": "x", "keep_open": "yes"})", "body.keep_open must be a boolean"},
      {R"({"prompt": "x", "idle_close_seconds": 5})", "only to a session with keep_open"},
      {R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 0})", "at least 1"},
      {R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 2592001})", "body.idle_close_seconds"},
      {R"({"prompt": "x", "keep_open": true, "idle_close_seconds": 1.5})", "body.idle_close_seconds"},
  };
  for (const auto& c : cases) {
    auto t = ParseTaskRequest(c.body, *config);
    ASSERT_FALSE(t.ok()) << c.body;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos) << c.body << " -> " << t.status().message();
  }
}

TEST(ScriptedModelTest, AScriptErrorNamesTheResponse) {
  testing::TempDir dir;
  ModelEndpointConfig m;
  m.kind = "scripted";
  m.script =
      test::WriteFile(dir.Sub("s.json"), R"({"responses": [{"text": "a"}, {"tool_calls": 5}]})");
  auto model = MakeModelClient(m, "");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "scripted model file " + m.script + ": responses[1].tool_calls must be an array");
  m.script = test::WriteFile(dir.Sub("t.json"), R"({"responses": {}})");
  EXPECT_NE(MakeModelClient(m, "").status().message().find("needs a \"responses\" array"),
            std::string::npos);
}

TEST(ScriptedModelTest, ReplaysResponseNumberTurnWithTemplates) {
  testing::TempDir dir;
  ModelEndpointConfig m;
  m.kind = "scripted";
  m.script = test::WriteFile(dir.Sub("s.json"), R"({"responses": [
    {"text": "one two", "tool_calls": [{"name": "http_request", "input": {"url": "http://h/{{session_id}}/{{call_id}}"}}]},
    {"text": "done"}]})");
  auto model = MakeModelClient(m, "");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ModelCall call;
  call.session_id = "S";
  std::string streamed;
  auto r0 = (*model)->Complete(call, [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(streamed, "one two");
  ASSERT_EQ(r0->tool_calls.size(), 1u);
  EXPECT_EQ(r0->tool_calls[0].id, "call_0_0");
  EXPECT_EQ(r0->tool_calls[0].input_json, R"({"url":"http://h/S/call_0_0"})");
  EXPECT_EQ(r0->stop_reason, "tool_use");
  call.turn = 1;
  EXPECT_EQ((*model)->Complete(call, nullptr)->text, "done");
  call.turn = 7;
  EXPECT_EQ((*model)->Complete(call, nullptr)->text, "(script finished)");
  m.script = dir.Sub("missing.json");
  EXPECT_EQ(MakeModelClient(m, "").status().code(), StatusCode::kNotFound);
}

TEST(ToolCatalogTest, IdempotencyFollowsTheToolAndTheMethod) {
  const ToolInfo* http = FindTool("http_request");
  ASSERT_NE(http, nullptr);
  EXPECT_TRUE(CallIsIdempotent(*http, R"({"url": "x"})"));
  EXPECT_TRUE(CallIsIdempotent(*http, R"({"url": "x", "method": "HEAD"})"));
  EXPECT_FALSE(CallIsIdempotent(*http, R"({"url": "x", "method": "POST"})"));
  EXPECT_FALSE(CallIsIdempotent(*FindTool("bash"), "{}"));
  EXPECT_TRUE(CallIsIdempotent(*FindTool("write_file"), "{}"));
  EXPECT_EQ(ToolDefinitions({"bash"}).size(), 1u);
}

TEST(ToolCatalogTest, OffersTheSandboxAgentsToolsWordForWordHttpRequestAndDelegate) {
  const auto& catalog = ToolCatalog();
  ASSERT_EQ(catalog.size(), sandbox::kSandboxToolSpecs.size() + 2);
  for (size_t i = 0; i < sandbox::kSandboxToolSpecs.size(); ++i) {
    const auto& spec = sandbox::kSandboxToolSpecs[i];
    EXPECT_EQ(catalog[i].name, spec.name);
    EXPECT_EQ(catalog[i].description, spec.description) << spec.name;
    EXPECT_EQ(catalog[i].input_schema_json, spec.input_schema_json) << spec.name;
    EXPECT_EQ(catalog[i].idempotent, spec.idempotent) << spec.name;
    EXPECT_TRUE(catalog[i].needs_sandbox) << spec.name;
  }
  const ToolInfo& http = catalog[catalog.size() - 2];
  EXPECT_EQ(http.name, "http_request");
  EXPECT_FALSE(http.needs_sandbox);
  // Runs in the harness; a resumed call finds its child again (docs/harness.md, "Sub-agents").
  EXPECT_EQ(catalog.back().name, "delegate");
  EXPECT_FALSE(catalog.back().needs_sandbox);
  EXPECT_TRUE(catalog.back().idempotent);
}

TEST(LogStateTest, FindsPendingCallsAndTheLiveSandbox) {
  std::vector<v1::Event> log(6);
  log[0].mutable_session_created();
  log[1].mutable_user_message()->set_text("go");
  auto* r = log[2].mutable_model_response();
  r->add_tool_calls()->set_call_id("a");
  r->add_tool_calls()->set_call_id("b");
  r->mutable_usage()->set_completion_tokens(7);
  log[3].mutable_sandbox_provisioned()->set_sandbox_id("box1");
  log[4].mutable_tool_call()->set_call_id("a");
  log[5].mutable_tool_call()->set_call_id("b");
  LogState s = ReadLogState(log);
  EXPECT_EQ(s.turns, 1u);
  EXPECT_EQ(s.output_tokens, 7u);
  EXPECT_EQ(s.last_response, 2);
  EXPECT_EQ(s.last_user, 1);
  EXPECT_EQ(s.sandbox_id, "box1");
  EXPECT_TRUE(s.started.count("b"));
  EXPECT_FALSE(s.finished.count("a"));
  v1::Event lost;
  lost.mutable_sandbox_lost()->set_sandbox_id("box1");
  ApplyEvent(lost, 6, &s);
  EXPECT_EQ(s.sandbox_id, "");
}

}  // namespace
}  // namespace sinew::harness

namespace sinew::harness {
namespace {

TEST(BuiltinAgentsTest, EveryConfigOffersOracleAndNopAndReservesTheirNames) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->models.at(kOracleModel).kind, kBuiltinOracleKind);
  EXPECT_EQ(c->models.at(kNopModel).kind, kBuiltinNopKind);
  EXPECT_EQ(c->default_model, "m");  // a built-in is never the default by accident
  EXPECT_TRUE(AddBuiltinAgents(&*c).ok());  // again: harmless
  for (const char* name : {"oracle", "nop"}) {
    auto bad = ParseConfig(std::string(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {")") + name + R"(": {"kind": "scripted", "script": "/dev/null"}}})");
    ASSERT_FALSE(bad.ok()) << name;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(std::string("config.models.") + name + ": the name is reserved"),
              std::string::npos)
        << bad.status().message();
  }
  // The built-in kinds are not configurable.
  auto kind = ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"},
      "models": {"o": {"kind": "builtin-oracle"}}})");
  EXPECT_FALSE(kind.ok());
}

TEST(BuiltinAgentsTest, AnOracleTaskNeedsASandboxdAndTheBashTool) {
  auto without = ParseConfig(kMinimal);
  ASSERT_TRUE(without.ok());
  auto t = ParseTaskRequest(R"({"prompt": "true", "model": "oracle"})", *without);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("no sandboxd"), std::string::npos) << t.status().message();
  EXPECT_TRUE(ParseTaskRequest(R"({"prompt": "x", "model": "nop"})", *without).ok());  // needs nothing

  auto with = ParseConfig(R"({"store": {"dir": "/tmp/x"}, "api_keys": {"k": "t"}, "sandboxd": {"address": "127.0.0.1:1"},
      "models": {"m": {"kind": "scripted", "script": "/dev/null"}}})");
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_TRUE(ParseTaskRequest(R"({"prompt": "true", "model": "oracle"})", *with).ok());
  EXPECT_TRUE(ParseTaskRequest(R"({"prompt": "true", "model": "oracle", "tools": ["bash", "read_file"]})", *with).ok());
  auto no_bash = ParseTaskRequest(R"({"prompt": "true", "model": "oracle", "tools": ["read_file"]})", *with);
  ASSERT_FALSE(no_bash.ok());
  EXPECT_NE(no_bash.status().message().find("body.tools must include bash"), std::string::npos)
      << no_bash.status().message();
}

TEST(BuiltinAgentsTest, TheOracleCallsBashWithThePromptOnceThenEnds) {
  auto c = ParseConfig(kMinimal);
  ASSERT_TRUE(c.ok());
  auto oracle = MakeModelClient(c->models.at(kOracleModel), "");
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  ModelCall call;
  call.max_wall_seconds = 42;
  ChatMessage task;
  task.text = "bash /solution/solve.sh";
  call.messages.push_back(task);
  auto first = (*oracle)->Complete(call, nullptr);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->tool_calls.size(), 1u);
  EXPECT_EQ(first->tool_calls[0].name, "bash");
  EXPECT_EQ(boost::json::parse(first->tool_calls[0].input_json),
            boost::json::parse(R"({"command": "bash /solution/solve.sh", "timeout": 42})"));
  EXPECT_EQ(first->stop_reason, "tool_use");
  call.turn = 1;
  auto second = (*oracle)->Complete(call, nullptr);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->tool_calls.empty());
  EXPECT_EQ(second->stop_reason, "end_turn");

  auto nop = MakeModelClient(c->models.at(kNopModel), "");
  ASSERT_TRUE(nop.ok());
  auto none = (*nop)->Complete(call, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tool_calls.empty());
  EXPECT_EQ(none->stop_reason, "end_turn");
  EXPECT_FALSE(c->models.at(kNopModel).tools);  // nop is offered no tools
}

// The agent loop's plumbing (async.h): a blocking call runs on the pool under the
// coroutine's log fields, its result or exception comes back, and the coroutine has its
// fields again after each wait.
TEST(AsyncTest, OnPoolCarriesTheLogFieldsAcrossAndBringsBackResultsAndExceptions) {
  asio::io_context io;
  asio::thread_pool pool(2);
  auto body = [&]() -> Task<std::string> {
    LogFields fields;
    fields.session = "s-async";
    ReplaceLogFields(fields);
    const auto io_thread = std::this_thread::get_id();
    std::thread::id pool_thread;
    std::string seen = co_await OnPool(pool, [&] {
      pool_thread = std::this_thread::get_id();
      return CurrentLogFields().session;
    });
    EXPECT_NE(pool_thread, io_thread);
    EXPECT_EQ(std::this_thread::get_id(), io_thread);  // resumed on its own executor
    EXPECT_EQ(CurrentLogFields().session, "s-async");
    bool thrown = false;
    try {
      (void)co_await OnPool(pool, []() -> int { throw std::runtime_error("from the pool"); });
    } catch (const std::runtime_error& e) {
      thrown = std::string(e.what()) == "from the pool";
    }
    EXPECT_TRUE(thrown);
    ReplaceLogFields({});
    co_await SleepFor(std::chrono::milliseconds(1));
    EXPECT_EQ(CurrentLogFields().session, "");
    co_return seen;
  };
  auto result = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  EXPECT_EQ(result.get(), "s-async");
  pool.join();
}

// The scripted model's asynchronous form: same answer as Complete; a call waiting on its
// gate file ends as cancelled when its cancel flag is set.
// AwaitCallback resumes the coroutine on its own executor whether the callback comes at
// once (inside start) or later from another thread; WaitForCallback gives up at its
// timeout and a late call does no harm.
TEST(AsyncTest, CallbacksResumeTheCoroutineFromAnyThreadAndTimeOut) {
  asio::io_context io;
  std::thread late_caller;
  std::function<void(int)> late_done;
  auto body = [&]() -> Task<void> {
    LogFields fields;
    fields.session = "s-callback";
    ReplaceLogFields(fields);
    const auto io_thread = std::this_thread::get_id();
    const int now = co_await AwaitCallback<int>([](std::function<void(int)> done) { done(7); });
    EXPECT_EQ(now, 7);
    std::thread::id caller;
    const std::string later = co_await AwaitCallback<std::string>([&](std::function<void(std::string)> done) {
      late_caller = std::thread([&caller, done] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        caller = std::this_thread::get_id();
        done("from another thread");
      });
    });
    EXPECT_EQ(later, "from another thread");
    EXPECT_NE(caller, io_thread);
    EXPECT_EQ(std::this_thread::get_id(), io_thread);
    EXPECT_EQ(CurrentLogFields().session, "s-callback");
    // Never called in time: nullopt; the call that comes later changes nothing.
    std::optional<int> missed = co_await WaitForCallback<int>(
        [&](std::function<void(int)> done) { late_done = std::move(done); }, std::chrono::milliseconds(20));
    EXPECT_FALSE(missed.has_value());
    late_done(1);
    std::optional<int> called = co_await WaitForCallback<int>(
        [](std::function<void(int)> done) { done(2); }, std::chrono::seconds(30));
    EXPECT_EQ(called, 2);
    EXPECT_EQ(CurrentLogFields().session, "s-callback");
    ReplaceLogFields({});
  };
  auto done = asio::co_spawn(asio::make_strand(io), body(), asio::use_future);
  io.run();
  late_caller.join();
  done.get();
}

TEST(AsyncTest, ScriptedModelAnswersAsynchronouslyAndAGatedCallCanBeCancelled) {
  testing::TempDir dir("sinew-async");
  test::WriteFile(dir.Sub("s.json"), R"({"responses": [{"text": "one two", "delay_ms": 20},
    {"text": "never", "wait_for_file": ")" + dir.Sub("gate") + R"("}]})");
  ModelEndpointConfig config;
  config.kind = "scripted";
  config.script = dir.Sub("s.json");
  auto model = NewScriptedModel(config);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  asio::io_context io;
  asio::thread_pool pool(1);
  std::atomic<bool> cancel{false};
  // (co_spawn needs a default-constructible result: the answers go out through these.)
  std::optional<Result<ModelReply>> answered, gated;
  auto body = [&]() -> Task<void> {
    ModelCall first;
    first.turn = 0;
    answered.emplace(co_await (*model)->CompleteAsync(first, nullptr, pool));
    ModelCall second;
    second.turn = 1;
    second.cancelled = &cancel;
    gated.emplace(co_await (*model)->CompleteAsync(second, nullptr, pool));
  };
  auto done = asio::co_spawn(io, body(), asio::use_future);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  io.run();
  canceller.join();
  done.get();
  ASSERT_TRUE(answered && gated);
  const Result<ModelReply>& a = *answered;
  const Result<ModelReply>& b = *gated;
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->text, "one two");
  EXPECT_EQ(a->completion_tokens, 2u);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kCancelled);
  pool.join();
}

}  // namespace
}  // namespace sinew::harness
