// The Anthropic Messages API of the real sinew-model process with the real stories260K
// model, over loopback: plain, streamed, tools, count_tokens and every error answer.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>

#include "server_test_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;

constexpr char kWeatherTool[] = R"({"name":"get_weather","description":"Weather in a city",
  "input_schema":{"type":"object","properties":{"city":{"type":"string","maxLength":10},
  "unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"]}})";
constexpr char kTimeTool[] = R"({"name":"get_time","input_schema":{"type":"object",
  "properties":{"zone":{"type":"string","maxLength":6}},"required":["zone"]}})";

struct SseEvent {
  std::string name;
  json::object data;
};

// The events of a Messages stream (`event: x\ndata: {...}\n\n` each).
std::vector<SseEvent> Events(const std::string& body) {
  std::vector<SseEvent> events;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "an unterminated event: " << body.substr(at);
      break;
    }
    const std::string block = body.substr(at, end - at);
    at = end + 2;
    const size_t newline = block.find('\n');
    if (!block.starts_with("event: ") || newline == std::string::npos ||
        block.compare(newline + 1, 6, "data: ") != 0) {
      ADD_FAILURE() << "not an event: " << block;
      continue;
    }
    SseEvent event{block.substr(7, newline - 7),
                   json::parse(block.substr(newline + 7)).as_object()};
    EXPECT_EQ(event.data.at("type").as_string(), event.name);
    events.push_back(std::move(event));
  }
  return events;
}

// The message a client rebuilds from the events, checking Anthropic's order: message_start,
// then each block's start, deltas and stop (one block open at a time, numbered in
// order), message_delta, message_stop.
json::object Rebuild(const std::vector<SseEvent>& events) {
  std::vector<std::string> names;
  for (const SseEvent& e : events) names.push_back(e.name);
  if (events.size() < 3 || events.front().name != "message_start" ||
      events[events.size() - 2].name != "message_delta" || events.back().name != "message_stop") {
    ADD_FAILURE() << "event order: " << json::value_from(names);
    return {};
  }
  json::object message = events.front().data.at("message").as_object();
  EXPECT_TRUE(message.at("content").as_array().empty());
  EXPECT_TRUE(message.at("stop_reason").is_null());
  json::array& content = message["content"].as_array();
  int64_t open = -1;
  std::string input_json;
  for (size_t i = 1; i + 2 < events.size(); ++i) {
    const SseEvent& e = events[i];
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1) << "block " << e.data << " starts inside another";
      open = e.data.at("index").as_int64();
      EXPECT_EQ(open, static_cast<int64_t>(content.size()));
      content.push_back(e.data.at("content_block"));
      input_json.clear();
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data.at("index").as_int64(), open);
      if (open < 0 || open >= static_cast<int64_t>(content.size())) continue;
      json::object& block = content[open].as_object();
      const json::object& delta = e.data.at("delta").as_object();
      if (delta.at("type") == "text_delta") {
        block["text"] =
            std::string(block.at("text").as_string()) + std::string(delta.at("text").as_string());
      } else if (delta.at("type") == "thinking_delta") {
        block["thinking"] = std::string(block.at("thinking").as_string()) +
                            std::string(delta.at("thinking").as_string());
      } else if (delta.at("type") == "input_json_delta") {
        input_json += delta.at("partial_json").as_string();
        block["input_deltas"] =
            (block.contains("input_deltas") ? block.at("input_deltas").as_int64() : 0) + 1;
      } else {
        ADD_FAILURE() << "delta " << delta;
      }
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data.at("index").as_int64(), open);
      if (open >= 0 && content[open].at("type") == "tool_use" && !input_json.empty()) {
        content[open].as_object()["input"] = json::parse(input_json);
      }
      open = -1;
    } else if (e.name != "ping") {
      ADD_FAILURE() << "unexpected event " << e.name;
    }
  }
  EXPECT_EQ(open, -1) << "a block never stopped";
  const json::object& end = events[events.size() - 2].data;
  message["stop_reason"] = end.at("delta").at("stop_reason");
  message["stop_sequence"] = end.at("delta").at("stop_sequence");
  message["usage"].as_object()["output_tokens"] = end.at("usage").at("output_tokens");
  return message;
}

class ServerMessagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(testing::Sha256OfFile(testing::StoriesPath()), testing::kStoriesSha256);
    std::string error;
    server_ = ServerProcess::Start({}, &error).release();
    ASSERT_NE(server_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  void TearDown() override {
    ASSERT_TRUE(server_->Alive());
    EXPECT_EQ(HttpCall(server_->http_port(), "GET", "/health").status, 200);
  }

  static json::object Post(const std::string& path, const std::string& body) {
    testing::HttpResult r = HttpCall(server_->http_port(), "POST", path, body);
    EXPECT_EQ(r.status, 200) << body << " -> " << r.body << r.error;
    EXPECT_EQ(r.content_type, "application/json");
    if (r.status != 200) return {};
    return json::parse(r.body).as_object();
  }
  static json::object Stream(const std::string& body) {
    testing::HttpResult r = HttpCall(server_->http_port(), "POST", "/v1/messages", body);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_EQ(r.content_type, "text/event-stream");
    return Rebuild(Events(r.body));
  }
  // Checks the status and Anthropic's error shape; returns the error type.
  static std::string ExpectError(long status, const std::string& method, const std::string& path,
                                 const std::string& body,
                                 const std::string& content_type = "application/json") {
    testing::HttpResult r = HttpCall(server_->http_port(), method, path, body, content_type);
    EXPECT_EQ(r.status, status) << body.substr(0, 300) << " -> " << r.body << r.error;
    EXPECT_EQ(r.content_type, "application/json");
    boost::system::error_code ec;
    json::value parsed = json::parse(r.body, ec);
    if (ec || !parsed.is_object() || !parsed.as_object().contains("error")) {
      ADD_FAILURE() << "not an error body: " << r.body;
      return "";
    }
    EXPECT_EQ(parsed.at("type").as_string(), "error");
    EXPECT_FALSE(parsed.at("error").at("message").as_string().empty());
    return std::string(parsed.at("error").at("type").as_string());
  }

  static ServerProcess* server_;
};
ServerProcess* ServerMessagesTest::server_ = nullptr;

// One user turn of "Once upon a time", greedy.
std::string Greedy(int max_tokens, const std::string& extra = "") {
  return R"({"model":"stories260K","max_tokens":)" + std::to_string(max_tokens) +
         R"(,"temperature":0,"messages":[{"role":"user","content":"Once upon a time"}])" + extra +
         "}";
}

TEST_F(ServerMessagesTest, PlainMessageIsTheChatPathsTextAsATextBlock) {
  json::object message = Post("/v1/messages", Greedy(24));
  ASSERT_FALSE(message.empty());
  EXPECT_TRUE(message.at("id").as_string().starts_with("msg_")) << message;
  EXPECT_EQ(message.at("type").as_string(), "message");
  EXPECT_EQ(message.at("role").as_string(), "assistant");
  EXPECT_EQ(message.at("model").as_string(), "stories260K");
  ASSERT_EQ(message.at("content").as_array().size(), 1u) << message;
  EXPECT_EQ(message.at("content").at(0).at("type").as_string(), "text");
  const std::string text(message.at("content").at(0).at("text").as_string());
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(message.at("stop_reason").as_string(), "max_tokens");
  EXPECT_TRUE(message.at("stop_sequence").is_null());
  EXPECT_EQ(message.at("usage").at("output_tokens").as_int64(), 24);

  // The same conversation through /v1/chat/completions: one template and engine path.
  json::object chat = Post("/v1/chat/completions", R"({"max_tokens":24,"temperature":0,
      "messages":[{"role":"user","content":"Once upon a time"}]})");
  ASSERT_FALSE(chat.empty());
  EXPECT_EQ(chat.at("choices").at(0).at("message").at("content").as_string(), text);
  EXPECT_EQ(chat.at("usage").at("prompt_tokens"), message.at("usage").at("input_tokens"));

  // A system prompt (string or text blocks) is the chat path's system message.
  json::object with_system =
      Post("/v1/messages", Greedy(8, R"(,"system":[{"type":"text","text":"Be kind."}])"));
  json::object chat_system = Post("/v1/chat/completions", R"({"max_tokens":8,"temperature":0,
      "messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"Once upon a time"}]})");
  ASSERT_FALSE(with_system.empty());
  ASSERT_FALSE(chat_system.empty());
  EXPECT_EQ(with_system.at("content").at(0).at("text"),
            chat_system.at("choices").at(0).at("message").at("content"));
  EXPECT_EQ(with_system.at("usage").at("input_tokens"),
            chat_system.at("usage").at("prompt_tokens"));
}

TEST_F(ServerMessagesTest, StreamedMessageSendsAnthropicsEventsInOrder) {
  json::object whole = Post("/v1/messages", Greedy(24));
  json::object streamed = Stream(Greedy(24, R"(,"stream":true)"));
  ASSERT_FALSE(whole.empty());
  ASSERT_FALSE(streamed.empty());
  EXPECT_EQ(streamed.at("content"), whole.at("content"));
  EXPECT_EQ(streamed.at("stop_reason").as_string(), "max_tokens");
  EXPECT_EQ(streamed.at("usage").at("input_tokens"), whole.at("usage").at("input_tokens"));
  EXPECT_EQ(streamed.at("usage").at("output_tokens").as_int64(), 24);
}

TEST_F(ServerMessagesTest, StopSequenceEndsTheTextAndIsNamed) {
  json::object whole = Post("/v1/messages", Greedy(40));
  ASSERT_FALSE(whole.empty());
  const std::string text(whole.at("content").at(0).at("text").as_string());
  // A word from the middle of the greedy text stops it there.
  const size_t space = text.find(' ', text.size() / 2);
  ASSERT_NE(space, std::string::npos) << text;
  const std::string stop = text.substr(space, 4);
  const std::string expected = text.substr(0, text.find(stop));
  const std::string body = Greedy(40, R"(,"stop_sequences":[")" + stop + R"("])");
  for (json::object message : {Post("/v1/messages", body),
                               Stream(body.substr(0, body.size() - 1) + R"(,"stream":true})")}) {
    ASSERT_FALSE(message.empty());
    EXPECT_EQ(message.at("stop_reason").as_string(), "stop_sequence") << message;
    EXPECT_EQ(message.at("stop_sequence").as_string(), stop);
    const json::array& content = message.at("content").as_array();
    EXPECT_EQ(content.empty() ? "" : std::string(content.at(0).at("text").as_string()), expected);
  }
}

TEST_F(ServerMessagesTest, ForcedToolChoiceAnswersWithAToolUseBlock) {
  const std::string tools = std::string(R"(,"tools":[)") + kWeatherTool + "," + kTimeTool + "]";
  const std::string ask =
      R"({"model":"stories260K","max_tokens":120,"messages":[{"role":"user","content":"Weather in Oslo?"}])";
  json::object named =
      Post("/v1/messages", ask + tools + R"(,"tool_choice":{"type":"tool","name":"get_weather"}})");
  ASSERT_FALSE(named.empty());
  EXPECT_EQ(named.at("stop_reason").as_string(), "tool_use") << named;
  ASSERT_EQ(named.at("content").as_array().size(), 1u) << named;
  const json::object& use = named.at("content").at(0).as_object();
  EXPECT_EQ(use.at("type").as_string(), "tool_use");
  EXPECT_TRUE(use.at("id").as_string().starts_with("toolu_"));
  EXPECT_EQ(use.at("name").as_string(), "get_weather");
  ASSERT_TRUE(use.at("input").is_object()) << "input is the parsed object, not a string";
  EXPECT_TRUE(use.at("input").at("city").is_string());
  const std::string unit(use.at("input").at("unit").as_string());
  EXPECT_TRUE(unit == "celsius" || unit == "fahrenheit") << unit;

  // any, streamed: the block starts with the name, then the input arrives in pieces.
  json::object any = Stream(ask + tools + R"(,"tool_choice":{"type":"any"},"stream":true})");
  ASSERT_FALSE(any.empty());
  EXPECT_EQ(any.at("stop_reason").as_string(), "tool_use");
  ASSERT_EQ(any.at("content").as_array().size(), 1u) << any;
  const json::object& streamed = any.at("content").at(0).as_object();
  EXPECT_EQ(streamed.at("type").as_string(), "tool_use");
  EXPECT_TRUE(streamed.at("name") == "get_weather" || streamed.at("name") == "get_time")
      << streamed;
  ASSERT_TRUE(streamed.at("input").is_object());
  EXPECT_FALSE(streamed.at("input").as_object().empty());
  EXPECT_GT(streamed.at("input_deltas").as_int64(), 1) << "the input arrives as it is generated";

  // The result goes back as a tool_result answering that tool_use id.
  const std::string id(use.at("id").as_string());
  const std::string turn = R"({"model":"stories260K","max_tokens":8,"messages":[
      {"role":"user","content":"Weather in Oslo?"},
      {"role":"assistant","content":[{"type":"tool_use","id":")" +
                           id + R"(","name":"get_weather","input":)" +
                           json::serialize(use.at("input")) + R"(}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":")" +
                           id + R"(","content":"5 C"}]}])" + tools + "}";
  json::object answered = Post("/v1/messages", turn);
  ASSERT_FALSE(answered.empty());
  EXPECT_GT(answered.at("usage").at("input_tokens").as_int64(),
            named.at("usage").at("input_tokens").as_int64());

  // none: the tools are not offered (the prompt is as without them).
  json::object none =
      Post("/v1/messages/count_tokens", ask + tools + R"(,"tool_choice":{"type":"none"}})");
  json::object bare = Post("/v1/messages/count_tokens", ask + "}");
  EXPECT_EQ(none.at("input_tokens"), bare.at("input_tokens"));
}

TEST_F(ServerMessagesTest, CountTokensCountsThePromptTheMessageWouldGet) {
  json::object message = Post("/v1/messages", Greedy(4));
  json::object counted =
      Post("/v1/messages/count_tokens",
           R"({"model":"stories260K","messages":[{"role":"user","content":"Once upon a time"}]})");
  ASSERT_FALSE(message.empty());
  ASSERT_FALSE(counted.empty());
  EXPECT_EQ(counted.size(), 1u) << counted;
  EXPECT_EQ(counted.at("input_tokens"), message.at("usage").at("input_tokens"));
  // Claude Code adds ?beta=true to its requests.
  json::object beta = Post("/v1/messages/count_tokens?beta=true",
                           R"({"model":"stories260K","messages":[{"role":"user","content":"Once upon a time"}]})");
  EXPECT_EQ(beta, counted);
  json::object with_tools = Post(
      "/v1/messages/count_tokens",
      std::string(
          R"({"model":"stories260K","messages":[{"role":"user","content":"Once upon a time"}],"tools":[)") +
          kWeatherTool + "]}");
  EXPECT_GT(with_tools.at("input_tokens").as_int64(), counted.at("input_tokens").as_int64());
}

TEST_F(ServerMessagesTest, EveryBadRequestGetsAnthropicsErrorAnd4xx) {
  const std::string user = R"({"role":"user","content":"hi"})";
  auto body = [&](const std::string& fields) {
    return R"({"model":"stories260K","max_tokens":8,"messages":[)" + user + "]" + fields + "}";
  };
  struct Case {
    long status;
    std::string type;
    std::string path;
    std::string body;
  };
  const std::string call =
      R"({"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]})";
  const std::vector<Case> cases = {
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","messages":[)" + user + "]}"},
      {400, "invalid_request_error", "/v1/messages", body(R"(,"max_tokens":0)")},
      {400, "invalid_request_error", "/v1/messages", R"({"model":"stories260K","max_tokens":8})"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"max_tokens":8,"messages":[)" + user + "]}"},
      {404, "not_found_error", "/v1/messages",
       R"({"model":"claude-x","max_tokens":8,"messages":[)" + user + "]}"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[{"role":"system","content":"x"}]})"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text"}]}]})"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9"}]}]})"},
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[)" + user + "," + call +
           R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2"}]}]})"},
      {400, "invalid_request_error", "/v1/messages", body(R"(,"tools":[{"name":"f"}])")},
      {400, "invalid_request_error", "/v1/messages",
       body(std::string(R"(,"tools":[)") + kWeatherTool +
            R"(],"tool_choice":{"type":"tool","name":"nope"})")},
      {400, "invalid_request_error", "/v1/messages", body(R"(,"temperature":3)")},
      {400, "invalid_request_error", "/v1/messages", body(R"(,"stop_sequences":[1])")},
      {400, "invalid_request_error", "/v1/messages", "{\"model\":"},
      {400, "invalid_request_error", "/v1/messages", "[1,2]"},
      // A prompt the context cannot hold.
      {400, "invalid_request_error", "/v1/messages",
       R"({"model":"stories260K","max_tokens":8,"messages":[{"role":"user","content":")" +
           std::string(20000, 'a') + R"("}]})"},
      {400, "invalid_request_error", "/v1/messages/count_tokens", R"({"model":"stories260K"})"},
      {404, "not_found_error", "/v1/messages/count_tokens",
       R"({"model":"x","messages":[)" + user + "]}"},
      {404, "not_found_error", "/v1/messages/batches", body("")},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ExpectError(c.status, "POST", c.path, c.body), c.type) << c.body.substr(0, 200);
  }
  EXPECT_EQ(ExpectError(400, "POST", "/v1/messages", body(""), "text/plain"),
            "invalid_request_error");
  EXPECT_EQ(ExpectError(405, "GET", "/v1/messages", ""), "invalid_request_error");
  // A stream refused before it starts is a plain error answer, not an event stream.
  EXPECT_EQ(ExpectError(400, "POST", "/v1/messages",
                        R"({"model":"stories260K","stream":true,"messages":[)" + user + "]}"),
            "invalid_request_error");
}

// Mutated copies of valid Messages requests (bytes flipped, inserted, dropped,
// truncated): each answer is a 200 message or a 400/404 in Anthropic's error shape.
TEST_F(ServerMessagesTest, MutatedBodiesGetAMessageOrAnError) {
  const std::vector<std::string> seeds = {
      R"({"model":"stories260K","max_tokens":3,"system":[{"type":"text","text":"S"}],"temperature":0.5,
          "stop_sequences":["x"],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]})",
      R"({"model":"stories260K","max_tokens":3,"tools":[{"name":"f","input_schema":{"type":"object"}}],
          "tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"Hi"},
          {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":false,"content":"ok"}]}]})",
  };
  std::mt19937 rng(11);
  using namespace std::string_literals;
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsenull\\\x00\xff\xc3"s;
  for (int round = 0; round < 150; ++round) {
    std::string body = seeds[round % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int edit = 0; edit < edits && !body.empty(); ++edit) {
      const size_t pos = rng() % body.size();
      switch (rng() % 4) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          body.erase(pos, 1 + rng() % 8);
          break;
        default:
          body.resize(pos);
          break;
      }
    }
    testing::HttpResult r = HttpCall(server_->http_port(), "POST", "/v1/messages", body);
    ASSERT_TRUE(r.status == 200 || r.status == 400 || r.status == 404)
        << body << " -> " << r.status << r.body;
    boost::system::error_code ec;
    json::value parsed = json::parse(r.body, ec);
    ASSERT_FALSE(ec) << body << " -> " << r.body;
    EXPECT_EQ(parsed.at("type").as_string(), r.status == 200 ? "message" : "error") << r.body;
  }
}

// DeepSeek R1's template ends the prompt in "<think>\n": the output starts inside the
// reasoning, which the Messages API answers as a thinking block (the chat path's
// reasoning_content), streamed as thinking_delta events.
TEST(ServerMessagesThinking, AReasoningTemplatesOutputIsAThinkingBlock) {
  std::string templates = testing::StoriesPath();
  templates.resize(templates.rfind('/'));
  std::string error;
  auto server = ServerProcess::Start(
      {"--chat-template", templates + "/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"},
      &error);
  ASSERT_NE(server, nullptr) << error;
  const std::string body = Greedy(12);
  testing::HttpResult whole = HttpCall(server->http_port(), "POST", "/v1/messages", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json::object message = json::parse(whole.body).as_object();
  const json::array& content = message.at("content").as_array();
  ASSERT_FALSE(content.empty()) << message;
  EXPECT_EQ(content.at(0).at("type").as_string(), "thinking") << message;
  EXPECT_EQ(content.at(0).at("signature").as_string(), "");

  testing::HttpResult chat = HttpCall(
      server->http_port(), "POST", "/v1/chat/completions",
      R"({"max_tokens":12,"temperature":0,"messages":[{"role":"user","content":"Once upon a time"}]})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(content.at(0).at("thinking"),
            json::parse(chat.body).at("choices").at(0).at("message").at("reasoning_content"));

  testing::HttpResult streamed = HttpCall(server->http_port(), "POST", "/v1/messages",
                                          body.substr(0, body.size() - 1) + R"(,"stream":true})");
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_NE(streamed.body.find(R"("type":"thinking_delta")"), std::string::npos) << streamed.body;
  const json::object rebuilt = Rebuild(Events(streamed.body));
  ASSERT_FALSE(rebuilt.empty());
  EXPECT_EQ(rebuilt.at("content"), message.at("content"));
}

TEST(ServerMessagesOverload, AFullQueueAnswers529OverloadedError) {
  std::string error;
  auto server = ServerProcess::Start({"--queue", "0"}, &error);  // every generation refused
  ASSERT_NE(server, nullptr) << error;
  testing::HttpResult r = HttpCall(server->http_port(), "POST", "/v1/messages", Greedy(4));
  EXPECT_EQ(r.status, 529) << r.body;
  EXPECT_NE(r.headers.find("retry-after: 1"), std::string::npos) << r.headers;
  EXPECT_EQ(json::parse(r.body).at("error").at("type").as_string(), "overloaded_error") << r.body;
  EXPECT_TRUE(server->Alive());
}

}  // namespace
}  // namespace sinew::model
