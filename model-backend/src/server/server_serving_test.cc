// The real sinew-model process (stories260K) under concurrent load, with tools,
// tool_choice and response_format, and when overloaded.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <thread>

#include "server_test_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;
using testing::SseData;

std::unique_ptr<ServerProcess> StartServer(const std::vector<std::string>& args) {
  std::string error;
  auto server = ServerProcess::Start(args, &error);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

std::string CompletionBody(const std::string& prompt, bool stream) {
  json::object body{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0},
                    {"stream", stream}};
  return json::serialize(body);
}

// The value of metric `key` in a /metrics text; -1 if it is missing.
double MetricValue(const std::string& metrics, const std::string& key) {
  const size_t pos = metrics.find("\n" + key + " ");
  return pos == std::string::npos ? -1.0 : std::stod(metrics.substr(pos + key.size() + 2));
}

// The text of a non-streamed completion answer; empty if it failed.
std::string CompletionText(const testing::HttpResult& r) {
  if (r.status != 200) return "";
  return std::string(json::parse(r.body).at("choices").at(0).at("text").as_string());
}

// A KV cache of one context (8 blocks of 16 positions) and eight generations of
// about 60 positions at once: the server must preempt, and with a swap space
// it swaps their KV out and back. Every text is the one a lone request gets,
// and in the end no block and no swap slot is held.
TEST(ServerServing, PreemptedGenerationsSwapAndKeepTheirText) {
  auto server = StartServer({"--ctx", "128", "--kv-blocks", "8", "--swap-space", "4"});
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->http_port();
  std::vector<std::string> prompts;
  for (const char* start :
       {"Once upon a time", "Tom had a dog", "The sun was hot and", "One day a bird",
        "Lily and Ben", "The little cat", "Mom said", "A big red ball"}) {
    prompts.push_back(start);
  }
  auto body = [](const std::string& prompt) {
    return json::serialize(json::object{
        {"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}, {"ignore_eos", true}});
  };
  std::vector<std::string> expected;
  for (const std::string& p : prompts) {
    expected.push_back(CompletionText(HttpCall(port, "POST", "/v1/completions", body(p))));
    ASSERT_FALSE(expected.back().empty()) << p;
  }
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      got[i] = CompletionText(HttpCall(port, "POST", "/v1/completions", body(prompts[i])));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, expected);
  const std::string metrics = HttpCall(port, "GET", "/metrics").body;
  EXPECT_GT(MetricValue(metrics, "sinew_model_kv_swap_outs_total"), 0) << metrics;
  EXPECT_GT(MetricValue(metrics, "sinew_model_kv_swap_in_tokens_total"), 0) << metrics;
  EXPECT_GT(MetricValue(metrics, "sinew_model_kv_swap_slots"), 0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "sinew_model_kv_swap_slots_used"), 0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "sinew_model_kv_blocks_used"), 0) << metrics;
  EXPECT_EQ(MetricValue(metrics, "sinew_model_kv_blocks"), 8) << metrics;
}

// --draft-model through the real server: stories260K drafting for itself gives the
// text of a server without speculation, and /metrics counts its drafts.
TEST(ServerServing, DraftModelKeepsTheTextAndShowsInMetrics) {
  auto plain = StartServer({"--spec-draft", "0"});
  auto drafted = StartServer({"--draft-model", testing::StoriesPath(), "--draft-always"});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(drafted, nullptr);
  for (const char* prompt : {"Once upon a time", "Tom had a dog", "The sun was hot and"}) {
    testing::HttpResult want =
        HttpCall(plain->http_port(), "POST", "/v1/completions", CompletionBody(prompt, false));
    testing::HttpResult got =
        HttpCall(drafted->http_port(), "POST", "/v1/completions", CompletionBody(prompt, true));
    ASSERT_EQ(want.status, 200) << want.body;
    ASSERT_EQ(got.status, 200) << got.body;
    std::string streamed;
    for (const std::string& e : SseData(got.body)) {
      if (e != "[DONE]") streamed += std::string(json::parse(e).at("choices").at(0).at("text").as_string());
    }
    EXPECT_EQ(streamed, std::string(json::parse(want.body).at("choices").at(0).at("text").as_string()))
        << prompt;
  }
  const std::string metrics = HttpCall(drafted->http_port(), "GET", "/metrics").body;
  auto value = [&metrics](const std::string& key) { return MetricValue(metrics, key); };
  EXPECT_GT(value("sinew_model_spec_model_draft_tokens_total"), 0) << metrics;
  EXPECT_GT(value("sinew_model_spec_model_accepted_tokens_total"), 0) << metrics;
  EXPECT_LE(value("sinew_model_spec_model_accepted_tokens_total"),
            value("sinew_model_spec_model_draft_tokens_total"));
}

TEST(ServerServing, ConcurrentStreamsAllCompleteWithTheSingleRequestText) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->http_port();
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i) {
    // Long enough for full KV blocks (16 positions), so that the reruns hit the cache.
    prompts.push_back(std::string(i % 2 ? "Once upon a time, there was a little girl named Lily. "
                                        : "The little dog went to the park with his friend. ") +
                      "She loved to play outside in the sun" + (i % 4 < 2 ? " and" : " but") +
                      std::string(i / 4, '!'));
  }
  std::vector<std::string> expected;
  for (const std::string& p : prompts) {
    testing::HttpResult r = HttpCall(port, "POST", "/v1/completions", CompletionBody(p, false));
    ASSERT_EQ(r.status, 200) << r.body;
    expected.push_back(std::string(
        json::parse(r.body).at("choices").at(0).at("text").as_string()));
  }
  std::vector<std::string> streamed(prompts.size());
  std::vector<std::string> finish(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      testing::HttpResult r =
          HttpCall(port, "POST", "/v1/completions", CompletionBody(prompts[i], true));
      if (r.status != 200) return;
      std::vector<std::string> events = SseData(r.body);
      if (events.empty() || events.back() != "[DONE]") return;
      events.pop_back();
      for (const std::string& e : events) {
        const json::value chunk = json::parse(e);
        const json::value& choice = chunk.at("choices").at(0);
        streamed[i] += std::string(choice.at("text").as_string());
        if (!choice.at("finish_reason").is_null()) {
          finish[i] = std::string(choice.at("finish_reason").as_string());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(streamed[i], expected[i]) << "stream " << i;
    EXPECT_FALSE(finish[i].empty()) << "stream " << i << " did not finish";
  }
  testing::HttpResult metrics = HttpCall(port, "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* name :
       {"sinew_model_prefix_cache_hit_tokens_total", "sinew_model_prefix_cache_miss_tokens_total",
        "sinew_model_batch_steps_total", "sinew_model_kv_blocks_available",
        "sinew_model_host_sampled_tokens_total", "sinew_model_overlapped_steps_total",
        "sinew_model_overlap_dropped_rows_total"}) {
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name;
  }
  // The streams asked for no penalties: the backend sampled their tokens.
  EXPECT_NE(metrics.body.find("sinew_model_backend_sampled_tokens_total "), std::string::npos);
  EXPECT_EQ(metrics.body.find("sinew_model_backend_sampled_tokens_total 0\n"), std::string::npos);
  // Every prompt ran twice: the second time its full blocks came from the cache.
  EXPECT_EQ(metrics.body.find("sinew_model_prefix_cache_hit_tokens_total 0\n"), std::string::npos);
}

const char* kWeatherTool = R"({"type":"function","function":{"name":"get_weather",
  "description":"Weather in a city","parameters":{"type":"object","properties":{
  "city":{"type":"string","maxLength":10},"unit":{"enum":["celsius","fahrenheit"]},
  "days":{"type":"integer"}},"required":["city","unit"]}}})";
const char* kTimeTool = R"({"type":"function","function":{"name":"get_time",
  "parameters":{"type":"object","properties":{"zone":{"type":"string","maxLength":6}},
  "required":["zone"]}}})";

json::object Chat(uint16_t port, const std::string& extra, long want_status = 200) {
  const std::string body = R"({"messages":[{"role":"user","content":"Weather in Oslo?"}],
    "max_tokens":120,"temperature":0.8,"seed":5)" + extra + "}";
  testing::HttpResult r = HttpCall(port, "POST", "/v1/chat/completions", body);
  EXPECT_EQ(r.status, want_status) << r.body;
  return json::parse(r.body).as_object();
}

void ExpectWeatherArguments(const json::value& call) {
  EXPECT_EQ(call.at("type").as_string(), "function");
  EXPECT_EQ(call.at("function").at("name").as_string(), "get_weather");
  const json::value args = json::parse(call.at("function").at("arguments").as_string());
  ASSERT_TRUE(args.is_object());
  ASSERT_TRUE(args.as_object().contains("city") && args.as_object().contains("unit"));
  EXPECT_TRUE(args.at("city").is_string());
  EXPECT_LE(args.at("city").as_string().size(), 10u);
  const std::string unit(args.at("unit").as_string());
  EXPECT_TRUE(unit == "celsius" || unit == "fahrenheit") << unit;
  if (args.as_object().contains("days")) {
    EXPECT_TRUE(args.at("days").is_int64());
  }
}

TEST(ServerServing, ToolChoiceAndResponseFormat) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->http_port();
  const std::string tools = std::string(R"(,"tools":[)") + kWeatherTool + "," + kTimeTool + "]";

  // A named function: always a valid call of it, whatever the tiny model thinks.
  for (int seed = 0; seed < 3; ++seed) {
    json::object named = Chat(port, tools + R"(,"seed":)" + std::to_string(seed) +
                                        R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})");
    const json::value& choice = named.at("choices").at(0);
    EXPECT_EQ(choice.at("finish_reason").as_string(), "tool_calls");
    EXPECT_TRUE(choice.at("message").at("content").is_null());
    ASSERT_EQ(choice.at("message").at("tool_calls").as_array().size(), 1u);
    ExpectWeatherArguments(choice.at("message").at("tool_calls").at(0));
  }

  // required, streamed: the call is announced, then its arguments arrive in pieces.
  const std::string body = R"({"messages":[{"role":"user","content":"Time?"}],"max_tokens":120,
    "stream":true,"seed":2,"tool_choice":"required")" + tools + "}";
  testing::HttpResult r = HttpCall(port, "POST", "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const testing::StreamedChat streamed = testing::CollectChatStream(r.body);
  EXPECT_TRUE(streamed.done);
  EXPECT_EQ(streamed.error, "");
  ASSERT_EQ(streamed.calls.size(), 1u);
  const auto& call = streamed.calls[0];
  EXPECT_TRUE(call.name == "get_weather" || call.name == "get_time") << call.name;
  EXPECT_EQ(call.type, "function");
  EXPECT_TRUE(json::parse(call.arguments).is_object()) << call.arguments;
  EXPECT_GT(call.argument_deltas, 1) << "the arguments arrive as they are generated";
  EXPECT_EQ(streamed.content, "");
  EXPECT_EQ(streamed.finish_reason, "tool_calls");

  // auto: the tools are offered (a longer prompt); stories260K answers in text.
  json::object with_tools = Chat(port, tools);
  json::object without = Chat(port, "");
  EXPECT_GT(with_tools.at("usage").at("prompt_tokens").as_int64(),
            without.at("usage").at("prompt_tokens").as_int64() + 50);
  json::object none = Chat(port, tools + R"(,"tool_choice":"none")");
  EXPECT_EQ(none.at("usage").at("prompt_tokens"), without.at("usage").at("prompt_tokens"));

  // response_format: the content is JSON that validates.
  json::object formatted = Chat(port, R"(,"response_format":{"type":"json_schema","json_schema":
    {"name":"answer","schema":{"type":"object","properties":{"ok":{"type":"boolean"},
    "items":{"type":"array","items":{"type":"integer"},"maxItems":3}},"required":["ok","items"]}}})");
  const json::value content =
      json::parse(formatted.at("choices").at(0).at("message").at("content").as_string());
  EXPECT_TRUE(content.at("ok").is_bool());
  EXPECT_LE(content.at("items").as_array().size(), 3u);

  // Errors.
  Chat(port, tools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})", 400);
  Chat(port, R"(,"response_format":{"type":"json_object"})", 400);
  Chat(port, R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#"}}})",
       400);
  Chat(port, R"(,"tools":[{"type":"function","function":{"name":"bad name"}}])", 400);
}

TEST(ServerServing, OverloadAnswers503WithRetryAfter) {
  auto server = StartServer({"--queue", "0"});  // nothing may wait: every generation refused
  ASSERT_NE(server, nullptr);
  testing::HttpResult r =
      HttpCall(server->http_port(), "POST", "/v1/completions", CompletionBody("Once", false));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.headers.find("retry-after: 1"), std::string::npos) << r.headers;
  EXPECT_NE(r.body.find("server_busy"), std::string::npos) << r.body;
  EXPECT_TRUE(server->Alive());
}

}  // namespace
}  // namespace sinew::model
