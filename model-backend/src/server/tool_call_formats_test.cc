// Tool-call formats of the main families parsed back into OpenAI calls. The text comes
// from the real templates in shared/models/templates: an assistant turn with a call,
// rendered by the model's own template, is exactly what the model was trained to
// write after the generation prompt; parsing it must give back the same call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sinew/model/chat_template.h"
#include "openai_response.h"
#include "forced_tool_call.h"
#include "tool_call_parser.h"
#include "tool_call_stream.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectCalls(const ParsedToolOutput& parsed, const std::vector<ToolCallOut>& expected,
                 const std::string& what) {
  ASSERT_EQ(parsed.calls.size(), expected.size()) << what << " content: " << parsed.content;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(parsed.calls[i].name, expected[i].name) << what;
    EXPECT_EQ(json::parse(parsed.calls[i].arguments), json::parse(expected[i].arguments)) << what;
  }
}

// What follows the generation prompt in a rendered assistant turn, without the turn's
// end tokens (generation stops at those).
std::string AssistantText(std::string suffix) {
  for (std::string_view end : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<｜end▁of▁sentence｜>",
                               "<|END_OF_TURN_TOKEN|>", "<|end_of_text|>", "<end_of_turn>"}) {
    const size_t at = suffix.rfind(end);
    if (at != std::string::npos) suffix.erase(at);
  }
  return suffix;
}

void ExpectStreamMatchesParse(const std::string& text, ToolCallFormat format,
                              const ToolCallFrame* forced, bool incremental,
                              const std::string& what, int* checked);

TEST(ToolCallFormats, RealTemplatesAssistantTurnsParseBack) {
  const std::vector<ChatTool> tools = {
      {"get_weather", "Weather now",
       R"({"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string"}}})"}};
  const ToolCallOut call{"get_weather", R"({"location":"Paris","unit":"celsius"})"};
  const std::vector<ChatMessage> prompt = {{"user", "Weather in Paris?"}};
  std::vector<ChatMessage> with_call = prompt;
  with_call.push_back({"assistant", "", {{call.name, call.arguments, "call12345"}}, "", "", true});

  std::map<ToolCallFormat, int> checked;
  int templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SINEW_TEMPLATES_DIR)) {
    if (entry.path().extension() != ".jinja") continue;
    ++templates;
    const std::string name = entry.path().filename().string();
    const std::string source = ReadFile(entry.path());
    if (source.find("tool_call") == std::string::npos) {
      std::printf("%s: the template has no tool calls\n", name.c_str());
      continue;
    }
    Result<ChatTemplate> tmpl = ChatTemplate::FromJinja(source, {"<|begin_of_text|>", "<|end_of_text|>"});
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.status().ToString();
    Result<std::string> before = tmpl->Render(prompt, tools, true);
    Result<std::string> after = tmpl->Render(with_call, tools, false);
    // DeepSeek R1's generation prompt opens the reasoning, which history turns drop.
    if (before.ok() && after.ok() && !after->starts_with(*before) && before->ends_with("<think>\n")) {
      before->resize(before->size() - 8);
    }
    if (!before.ok() || !after.ok() || !after->starts_with(*before)) {
      std::printf("%s (%s): no assistant tool-call turn to compare (%s)\n", name.c_str(),
                  std::string(ToolCallFormatName(tmpl->tool_format())).c_str(),
                  !before.ok() ? before.status().message().c_str()
                  : !after.ok() ? after.status().message().c_str() : "the turn rewrites the prompt");
      continue;
    }
    const std::string text = AssistantText(after->substr(before->size()));
    SCOPED_TRACE(name + ": " + text);
    ExpectCalls(ParseToolCallsOf(text, tmpl->tool_format()), {call}, name);
    // Streamed in every chunking: the same call, the arguments in pieces.
    int chunkings = 0;
    ExpectStreamMatchesParse(text, tmpl->tool_format(), nullptr, true, name, &chunkings);
    ++checked[tmpl->tool_format()];
  }
  int total = 0;
  for (const auto& [format, n] : checked) {
    std::printf("tool-call format %s: %d template(s) parsed back\n", std::string(ToolCallFormatName(format)).c_str(), n);
    total += n;
  }
  std::printf("tool-call round trips: %d of %d templates\n", total, templates);
  EXPECT_EQ(checked.size(), 8u) << "every family has a template whose tool-call turn parses back";
}

struct Sample {
  ToolCallFormat format;
  std::string text;
  std::vector<ToolCallOut> calls;
  std::string content;
  // The arguments stream as they are written (not: given before the name, as a JSON
  // string, or in Llama's name.call(...) form; those come whole).
  bool incremental = true;
};

// Samples in each family's documented output syntax (several calls, text around them).
std::vector<Sample> FamilySamples() {
  const ToolCallOut a{"get_weather", R"({"location":"Paris"})"};
  const ToolCallOut b{"search", R"({"q":"x y","n":3})"};
  return {
      {ToolCallFormat::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x y\", \"n\": 3}}\n</tool_call>",
       {a, b}, "Let me check."},
      {ToolCallFormat::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}", {a}, ""},
      {ToolCallFormat::kLlama3Json, "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x y\", \"n\": 3}}", {b}, ""},
      {ToolCallFormat::kLlama3Json, "<|python_tag|>search.call(q=\"x y\", n=3)", {b}, "", false},
      {ToolCallFormat::kLlama3Json, "Just text.", {}, "Just text."},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, \"id\": \"abcdefghi\"}, "
       "{\"name\": \"search\", \"arguments\": {\"q\": \"x y\", \"n\": 3}}]",
       {a, b}, ""},
      {ToolCallFormat::kFunctionaryV31,
       "Sure. <function=get_weather>{\"location\": \"Paris\"}</function><function=search>{\"q\": \"x y\", \"n\": 3}</function>",
       {a, b}, "Sure."},
      {ToolCallFormat::kFunctionaryV32, "all\nOne moment.>>>get_weather\n{\"location\": \"Paris\"}>>>search\n{\"q\": \"x y\", \"n\": 3}",
       {a, b}, "One moment."},
      {ToolCallFormat::kFunctionaryV32, "all\nHello there", {}, "Hello there"},
      {ToolCallFormat::kFirefunction,
       " functools[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, {\"name\": \"search\", \"arguments\": {\"q\": \"x y\", \"n\": 3}}]",
       {a, b}, ""},
      {ToolCallFormat::kCommandR7B,
       "<|START_THINKING|>I need the weather.<|END_THINKING|><|START_ACTION|>[\n"
       "    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}\n]<|END_ACTION|>",
       {a}, ""},
      {ToolCallFormat::kCommandR7B, "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", {}, "It is sunny."},
      {ToolCallFormat::kDeepSeekR1,
       "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```"
       "<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{\"q\": \"x y\", \"n\": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {a, b}, "Checking."},
      // Harder JSON: braces and escapes in strings, nesting, arguments before the name,
      // arguments given as a JSON string.
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"arguments\": {\"q\": \"a \\\"b\\\" }{ ]\", \"list\": [1, 2.50, {\"x\": null}]}, \"name\": \"search\"}\n</tool_call>",
       {{"search", R"({"q":"a \"b\" }{ ]","list":[1,2.50,{"x":null}]})"}}, "", false},
      {ToolCallFormat::kHermes,
       "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": \\\"x y\\\", \\\"n\\\": 3}\"}</tool_call>",
       {b}, "", false},
      {ToolCallFormat::kLlama3Json, "\n{\"name\": \"search\", \"parameters\": {\"q\": \"x y\",\n  \"n\": 3}}", {b}, ""},
      // Content before, between and after the calls.
      {ToolCallFormat::kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n"
       "and\n<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"x y\", \"n\": 3}}</tool_call>\nDone.",
       {a, b}, "Let me check.\n\nand\n\nDone."},
      {ToolCallFormat::kFunctionaryV31,
       "Sure. <function=get_weather>{\"location\": \"Paris\"}</function> Then <function=search>{\"q\": \"x y\", \"n\": 3}</function> ok",
       {a, b}, "Sure.  Then  ok"},
  };
}

// The markup of every family: none of it may reach streamed content.
const char* const kMarkup[] = {"<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]",
                               "<function=", "</function>", ">>>", "functools", "<|START_ACTION|>",
                               "<|END_ACTION|>", "<|START_THINKING|>", "<|START_RESPONSE|>",
                               "tool▁", "{\""};

struct Streamed {
  std::string content;
  std::vector<ToolCallOut> calls;  // names from the first deltas, arguments concatenated
  std::vector<size_t> argument_deltas;  // per call: deltas carrying argument text
  ParsedToolOutput final;
  std::string error;
};

// Streams `chunks` through a filter as the server does, and rebuilds what a client sees.
Streamed StreamThrough(const std::vector<std::string>& chunks, ToolCallFormat format,
                       const ToolCallFrame* forced) {
  Streamed out;
  ToolCallStreamFilter filter(format, forced);
  std::vector<ToolCallDelta> deltas;
  for (const std::string& chunk : chunks) out.content += filter.Push(chunk, &deltas);
  std::string held;
  out.final = filter.Finish(&held, &deltas);
  out.content += held;
  for (const ToolCallDelta& d : deltas) {
    if (d.first) {
      if (d.index != out.calls.size()) out.error += "call " + std::to_string(d.index) + " announced out of order; ";
      out.calls.push_back({d.name, ""});
      out.argument_deltas.push_back(0);
    } else if (d.index >= out.calls.size()) {
      out.error += "arguments before the call was announced; ";
      continue;
    }
    out.calls[d.index].arguments += d.arguments;
    if (!d.arguments.empty()) ++out.argument_deltas[d.index];
  }
  return out;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Every way of cutting `text`: at each byte boundary into two chunks, and into chunks of
// every size from one byte up (UTF-8 characters cut too: the filter works on bytes).
std::vector<std::vector<std::string>> Chunkings(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (size_t cut = 0; cut <= text.size(); ++cut) out.push_back({text.substr(0, cut), text.substr(cut)});
  for (size_t size = 1; size <= text.size(); ++size) {
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size(); i += size) chunks.push_back(text.substr(i, size));
    out.push_back(std::move(chunks));
  }
  return out;
}

void ExpectStreamMatchesParse(const std::string& text, ToolCallFormat format,
                              const ToolCallFrame* forced, bool incremental,
                              const std::string& what, int* checked) {
  const ParsedToolOutput whole = ParseToolCalls(text, format, forced);
  for (const std::vector<std::string>& chunks : Chunkings(text)) {
    const Streamed s = StreamThrough(chunks, format, forced);
    const std::string how = what + " in " + std::to_string(chunks.size()) + " chunks of " +
                            std::to_string(chunks.front().size());
    ASSERT_EQ(s.error, "") << how;
    ASSERT_EQ(s.calls.size(), whole.calls.size()) << how;
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      ASSERT_EQ(s.calls[i].name, whole.calls[i].name) << how;
      ASSERT_EQ(s.calls[i].arguments, whole.calls[i].arguments) << how << " call " << i;
    }
    ASSERT_EQ(std::string(TrimSpace(s.content)), whole.content) << how;
    for (const char* markup : kMarkup) {
      ASSERT_EQ(s.content.find(markup), std::string::npos) << how << ": " << markup << " in content";
    }
    ++*checked;
  }
  // One byte at a time: every call's arguments come in several deltas (not one at the
  // end): at least one per two bytes of compact arguments.
  if (!incremental) return;
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  const Streamed s = StreamThrough(bytes, format, forced);
  for (size_t i = 0; i < s.calls.size(); ++i) {
    EXPECT_GE(s.argument_deltas[i], s.calls[i].arguments.size() / 2) << what << " call " << i;
  }
}

TEST(ToolCallStreaming, EveryChunkingGivesTheCallsOfTheWholeParse) {
  int checked = 0;
  std::set<ToolCallFormat> families;
  for (const Sample& sample : FamilySamples()) {
    SCOPED_TRACE(sample.text);
    ExpectStreamMatchesParse(sample.text, sample.format, nullptr, sample.incremental,
                             std::string(ToolCallFormatName(sample.format)), &checked);
    if (!sample.calls.empty()) families.insert(sample.format);
  }
  std::printf("%d chunkings of %zu samples streamed; %zu families with calls\n", checked,
              FamilySamples().size(), families.size());
  EXPECT_EQ(families.size(), 8u);
}

TEST(ToolCallFormats, EachFamilySyntax) {
  const std::vector<Sample> samples = FamilySamples();
  for (const Sample& sample : samples) {
    const std::string what = std::string(ToolCallFormatName(sample.format)) + ": " + sample.text;
    const ParsedToolOutput parsed = ParseToolCallsOf(sample.text, sample.format);
    ExpectCalls(parsed, sample.calls, what);
    EXPECT_EQ(parsed.content, sample.content) << what;
  }
  EXPECT_EQ(ParseToolCallsOf("<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>ok<|END_RESPONSE|>",
                             ToolCallFormat::kCommandR7B).reasoning, "plan");
}

// A forced call (tool_choice named or required) in each family's own syntax: whatever
// the constraint lets the model write after the family's opening text parses back, with
// the family's own parser, into the forced tool; and streams the same.
TEST(ToolCallFormats, ForcedCallInEachFamilySyntaxParsesBack) {
  GenerationRequest request;
  request.tools = {{"get_weather", "", json::parse(R"({"type":"object","properties":{"location":{"type":"string"}}})")},
                   {"search", "", json::parse(R"({"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}}})")}};
  const std::string args = R"({"q":"x y","n":3})";
  int families = 0, checked = 0;
  for (ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral,
        ToolCallFormat::kFunctionaryV31, ToolCallFormat::kFunctionaryV32, ToolCallFormat::kFirefunction,
        ToolCallFormat::kCommandR7B, ToolCallFormat::kDeepSeekR1}) {
    const std::string family(ToolCallFormatName(format));
    request.tool_choice = ToolChoice::kNamed;
    request.tool_choice_name = "search";
    const ForcedToolCall named = PlanForcedToolCall(request, format);
    ASSERT_EQ(named.alternatives.size(), 1u) << family;
    request.tool_choice = ToolChoice::kRequired;
    const ForcedToolCall required = PlanForcedToolCall(request, format);
    ASSERT_EQ(required.alternatives.size(), 2u) << family;
    EXPECT_EQ(required.frame.open, named.frame.open) << family;
    for (const ForcedToolCall* plan : {&named, &required}) {
      const FramedJson& alt = plan->alternatives.back();  // "search"
      const std::string output = alt.lead + args + alt.trail;
      SCOPED_TRACE(family + ": " + plan->frame.open + output + plan->frame.close);
      const ParsedToolOutput parsed = ParseToolCalls(output, format, &plan->frame);
      ExpectCalls(parsed, {{"search", args}}, family);
      EXPECT_EQ(parsed.content, "") << family;
      // The family's own text: its parser finds the call in the whole turn.
      ExpectCalls(ParseToolCallsOf(plan->frame.open + output + plan->frame.close, format),
                  {{"search", args}}, family);
      ExpectStreamMatchesParse(output, format, &plan->frame, true, family + " forced", &checked);
    }
    ++families;
  }
  EXPECT_EQ(families, 8);
}

TEST(ToolCallFormats, DetectedFromTheTemplates) {
  const std::map<std::string, ToolCallFormat> expected = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolCallFormat::kLlama3Json},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral},
      {"meetkai-functionary-medium-v3.1.jinja", ToolCallFormat::kFunctionaryV31},
      {"meetkai-functionary-medium-v3.2.jinja", ToolCallFormat::kFunctionaryV32},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", ToolCallFormat::kFirefunction},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallFormat::kCommandR7B},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::kDeepSeekR1},
      {"llama-cpp-deepseek-r1.jinja", ToolCallFormat::kDeepSeekR1},
  };
  for (const auto& [file, format] : expected) {
    const std::string source = ReadFile(std::filesystem::path(SINEW_TEMPLATES_DIR) / file);
    ASSERT_FALSE(source.empty()) << file;
    EXPECT_EQ(ToolCallFormatName(DetectToolCallFormat(source)), ToolCallFormatName(format)) << file;
  }
}

}  // namespace
}  // namespace sinew::model

namespace sinew::model {
namespace {

std::unique_ptr<Tokenizer> TinyTokenizer() {
  Vocab vocab;
  vocab.tokens = {"<unk>", "<s>", "</s>", "a"};
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  return std::move(Tokenizer::Create(vocab)).value();
}

// The reasoning_content and content of a stream's events, in order.
std::pair<std::string, std::string> Collect(const std::string& events) {
  std::string reasoning, content;
  size_t pos = 0;
  while ((pos = events.find("data: {", pos)) != std::string::npos) {
    const size_t end = events.find("\n\n", pos);
    json::value event = json::parse(events.substr(pos + 6, end - pos - 6));
    for (const auto& choice : event.at("choices").as_array()) {
      const json::object& delta = choice.at("delta").as_object();
      if (auto* r = delta.if_contains("reasoning_content")) reasoning += r->as_string();
      if (auto* c = delta.if_contains("content")) content += c->as_string();
    }
    pos = end;
  }
  return {reasoning, content};
}

TEST(OpenAiResponderReasoning, StreamedSeparatelyAndKeptOutOfContent) {
  auto tokenizer = TinyTokenizer();
  OpenAiRequest request;
  request.generation.chat = true;
  request.stream = true;
  const ChatTemplate hermes(ChatTemplateKind::kChatMl);
  for (bool opened : {false, true}) {
    OpenAiResponder responder(request, *tokenizer, "m", "id", 0);
    responder.SetReasoningOpenedByPrompt(opened);
    responder.EnableTools(hermes, false);
    std::string events;
    const std::string text = std::string(opened ? "" : "<think>") +
                             "Weather needed.</think>\n\nSure.<tool_call>{\"name\": \"get_weather\", "
                             "\"arguments\": {\"location\": \"Paris\"}}</tool_call>";
    for (size_t i = 0; i < text.size(); i += 5) events += responder.StreamChunk({text.substr(i, 5), {}});
    GenerationOutcome outcome;
    outcome.finish_reason = "stop";
    events += responder.StreamEnd(outcome);
    auto [reasoning, content] = Collect(events);
    EXPECT_EQ(reasoning, "Weather needed.");
    EXPECT_EQ(content, "Sure.");
    EXPECT_NE(events.find("\"tool_calls\""), std::string::npos) << events;
    EXPECT_NE(events.find("\"finish_reason\":\"tool_calls\""), std::string::npos) << events;

    OpenAiRequest plain = request;
    plain.stream = false;
    OpenAiResponder body_responder(plain, *tokenizer, "m", "id", 0);
    body_responder.SetReasoningOpenedByPrompt(opened);
    body_responder.Accumulate({text, {}});
    json::value body = json::parse(body_responder.Body(outcome));
    const json::object& message = body.at("choices").at(0).at("message").as_object();
    EXPECT_EQ(message.at("reasoning_content"), "Weather needed.");
    EXPECT_EQ(message.at("content").as_string().find("think"), std::string::npos);
  }
}

// The SSE wire shape in auto mode, every family (its real template): a call's first
// tool_calls delta carries index, id, type and name; the later ones only index and more
// arguments text; the pieces concatenate to the non-streamed body's arguments, and the
// streamed content equals its content.
TEST(OpenAiResponderToolCalls, AutoModeStreamsArgumentsInEveryFamily) {
  const std::map<ToolCallFormat, std::string> templates = {
      {ToolCallFormat::kHermes, "Qwen-Qwen2.5-7B-Instruct.jinja"},
      {ToolCallFormat::kLlama3Json, "meta-llama-Llama-3.1-8B-Instruct.jinja"},
      {ToolCallFormat::kMistral, "mistralai-Mistral-Nemo-Instruct-2407.jinja"},
      {ToolCallFormat::kFunctionaryV31, "meetkai-functionary-medium-v3.1.jinja"},
      {ToolCallFormat::kFunctionaryV32, "meetkai-functionary-medium-v3.2.jinja"},
      {ToolCallFormat::kFirefunction, "fireworks-ai-llama-3-firefunction-v2.jinja"},
      {ToolCallFormat::kCommandR7B, "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"},
      {ToolCallFormat::kDeepSeekR1, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"},
  };
  auto tokenizer = TinyTokenizer();
  OpenAiRequest request;
  request.generation.chat = true;
  request.generation.tools = {{"get_weather", "", json::object{{"type", "object"}}},
                              {"search", "", json::object{{"type", "object"}}}};
  std::set<ToolCallFormat> families;
  for (const Sample& sample : FamilySamples()) {
    if (sample.calls.empty()) continue;
    const std::string file = templates.at(sample.format);
    Result<ChatTemplate> tmpl = ChatTemplate::FromJinja(
        ReadFile(std::filesystem::path(SINEW_TEMPLATES_DIR) / file), {"<s>", "</s>"});
    ASSERT_TRUE(tmpl.ok()) << file;
    ASSERT_EQ(tmpl->tool_format(), sample.format) << file;
    SCOPED_TRACE(file + ": " + sample.text);
    GenerationOutcome outcome;
    outcome.finish_reason = "stop";

    OpenAiRequest whole_request = request;
    OpenAiResponder whole(whole_request, *tokenizer, "m", "id", 0);
    whole.EnableTools(*tmpl, false);
    whole.Accumulate({sample.text, {}});
    const json::value body = json::parse(whole.Body(outcome));
    const json::object& message = body.at("choices").at(0).at("message").as_object();
    const json::array& body_calls = message.at("tool_calls").as_array();

    OpenAiRequest stream_request = request;
    stream_request.stream = true;
    OpenAiResponder responder(stream_request, *tokenizer, "m", "id", 0);
    responder.EnableTools(*tmpl, false);
    std::string events;
    for (size_t i = 0; i < sample.text.size(); i += 3) {
      events += responder.StreamChunk({sample.text.substr(i, 3), {}});
    }
    events += responder.StreamEnd(outcome);
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
    std::string content, finish;
    size_t pos = 0;
    while ((pos = events.find("data: {", pos)) != std::string::npos) {
      const size_t end = events.find("\n\n", pos);
      const json::value event = json::parse(events.substr(pos + 6, end - pos - 6));
      pos = end;
      const json::object& choice = event.at("choices").at(0).as_object();
      if (!choice.at("finish_reason").is_null()) finish = choice.at("finish_reason").as_string();
      const json::object& delta = choice.at("delta").as_object();
      if (auto* c = delta.if_contains("content")) content += c->as_string();
      const json::value* tc = delta.if_contains("tool_calls");
      if (tc == nullptr) continue;
      for (const json::value& d : tc->as_array()) {
        const json::object& o = d.as_object();
        const size_t index = static_cast<size_t>(o.at("index").as_int64());
        const json::object& fn = o.at("function").as_object();
        if (o.contains("id")) {
          ASSERT_EQ(index, calls.size()) << "announced in order";
          EXPECT_EQ(o.at("type"), "function");
          EXPECT_EQ(o.at("id"), body_calls.at(index).at("id"));
          calls.push_back({std::string(fn.at("name").as_string()), ""});
        } else {
          ASSERT_LT(index, calls.size()) << "arguments after the call's first delta";
          EXPECT_FALSE(fn.contains("name"));
          EXPECT_FALSE(o.contains("type"));
        }
        calls[index].second += fn.at("arguments").as_string();
      }
    }
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(calls.size(), body_calls.size()) << events;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].first, body_calls.at(i).at("function").at("name").as_string());
      EXPECT_EQ(calls[i].second, body_calls.at(i).at("function").at("arguments").as_string());
    }
    const std::string body_content =
        message.at("content").is_null() ? "" : std::string(message.at("content").as_string());
    EXPECT_EQ(std::string(TrimSpace(content)), body_content);
    families.insert(sample.format);
  }
  EXPECT_EQ(families.size(), 8u);
}

}  // namespace
}  // namespace sinew::model
