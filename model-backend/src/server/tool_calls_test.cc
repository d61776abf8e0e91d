// Tool-call parsing, the streaming filter and tool rendering per family.
#include "forced_tool_call.h"
#include "tool_call_parser.h"
#include "tool_call_stream.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

TEST(ToolCalls, ParsesChatMlBlocksAndLlama3Objects) {
  auto p = ParseToolCalls(
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"b\\\":true}\"}</tool_call>",
      ToolCallFormat::kHermes, nullptr);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(p.calls[1].arguments, R"({"b":true})");
  EXPECT_EQ(p.content, "Sure.");
  auto broken = ParseToolCalls("<tool_call>{\"name\": 3}</tool_call>", ToolCallFormat::kHermes, nullptr);
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": 3}</tool_call>");
  auto l = ParseToolCalls(" {\"name\": \"f\", \"parameters\": {}}", ToolCallFormat::kLlama3Json, nullptr);
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(l.calls[0].arguments, "{}");
  EXPECT_TRUE(ParseToolCalls("Hello there", ToolCallFormat::kLlama3Json, nullptr).calls.empty());
}

TEST(ToolCalls, StreamFilterHoldsBackCallTextAndStreamsArguments) {
  ToolCallStreamFilter filter(ToolCallFormat::kHermes, nullptr);
  std::vector<ToolCallDelta> deltas;
  std::string streamed = filter.Push("Let me check. <tool", &deltas);
  streamed += filter.Push("_call>\n{\"name\": \"f", &deltas);
  EXPECT_TRUE(deltas.empty()) << "no call before its name is complete";
  streamed += filter.Push("\", ", &deltas);
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_TRUE(deltas[0].first);
  EXPECT_EQ(deltas[0].name, "f");
  EXPECT_EQ(deltas[0].arguments, "");
  streamed += filter.Push("\"arguments\": {\"a\": ", &deltas);
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[1].arguments, "{\"a\":");
  streamed += filter.Push("1}}\n</tool_call>", &deltas);
  ASSERT_EQ(deltas.size(), 3u);
  EXPECT_FALSE(deltas[2].first);
  EXPECT_EQ(deltas[2].arguments, "1}");
  EXPECT_EQ(streamed, "Let me check. ");
  std::string held;
  auto parsed = filter.Finish(&held, &deltas);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(deltas.size(), 3u) << "nothing left for the end";
  EXPECT_EQ(held, "");
  ToolCallStreamFilter text_only(ToolCallFormat::kHermes, nullptr);
  EXPECT_EQ(text_only.Push("a <to", &deltas), "a ");
  EXPECT_TRUE(text_only.Finish(&held, &deltas).calls.empty());
  EXPECT_EQ(held, "<to");
}

TEST(ToolCalls, ToolsAreRenderedPerFamily) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"},
                                             {"assistant", "", {{"f", R"({"a":1})"}}},
                                             {"tool", "42"}};
  const std::vector<ChatTool> tools = {{"f", "does f", R"({"type":"object"})"}};
  auto chatml = ChatTemplate(ChatTemplateKind::kChatMl).Render(messages, tools);
  ASSERT_TRUE(chatml.ok());
  EXPECT_NE(chatml->find("<|im_start|>system\n# Tools"), std::string::npos);
  EXPECT_NE(chatml->find(R"(<tools>
{"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object"}}}
</tools>)"),
            std::string::npos);
  EXPECT_NE(chatml->find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
                         "{\"a\":1}}\n</tool_call><|im_end|>"),
            std::string::npos);
  EXPECT_NE(chatml->find("<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>"),
            std::string::npos);
  auto llama = ChatTemplate(ChatTemplateKind::kLlama3).Render(messages, tools);
  ASSERT_TRUE(llama.ok());
  EXPECT_NE(llama->find("<|start_header_id|>user<|end_header_id|>\n\nGiven the following "
                        "functions"),
            std::string::npos);
  EXPECT_NE(llama->find("{\"name\": \"f\", \"parameters\": {\"a\":1}}<|eot_id|>"),
            std::string::npos);
  EXPECT_NE(llama->find("<|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|>"),
            std::string::npos);
}

TEST(ToolCalls, ForcedCallPlanNamesTheTools) {
  GenerationRequest request;
  request.tools = {{"f", "", boost::json::object{{"type", "object"}}},
                   {"g", "", boost::json::object{{"type", "object"}}}};
  request.tool_choice = ToolChoice::kRequired;
  const ForcedToolCall both = PlanForcedToolCall(request, ToolCallFormat::kHermes);
  ASSERT_EQ(both.alternatives.size(), 2u);
  EXPECT_EQ(both.frame.open, "<tool_call>\n");
  EXPECT_EQ(both.alternatives[0].lead, "{\"name\":\"f\",\"arguments\":");
  request.tool_choice = ToolChoice::kNamed;
  request.tool_choice_name = "g";
  const ForcedToolCall one = PlanForcedToolCall(request, ToolCallFormat::kLlama3Json);
  ASSERT_EQ(one.alternatives.size(), 1u);
  EXPECT_EQ(one.alternatives[0].lead, "{\"name\":\"g\",\"parameters\":");
  EXPECT_EQ(one.alternatives[0].schema, request.tools[1].parameters);
}

}  // namespace
}  // namespace sinew::model
