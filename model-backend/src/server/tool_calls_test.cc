// Tool-call parsing, the streaming filter and tool rendering per family.
#include "tool_calls.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

TEST(ToolCalls, ParsesChatMlBlocksAndLlama3Objects) {
  const ChatTemplate chatml(ChatTemplateKind::kChatMl), llama3(ChatTemplateKind::kLlama3);
  auto p = ParseToolCalls(
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"b\\\":true}\"}</tool_call>",
      chatml, false);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(p.calls[1].arguments, R"({"b":true})");
  EXPECT_EQ(p.content, "Sure.");
  auto broken = ParseToolCalls("<tool_call>{\"name\": 3}</tool_call>", chatml, false);
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": 3}</tool_call>");
  auto l = ParseToolCalls(" {\"name\": \"f\", \"parameters\": {}}", llama3, false);
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(l.calls[0].arguments, "{}");
  EXPECT_TRUE(ParseToolCalls("Hello there", llama3, false).calls.empty());
}

TEST(ToolCalls, StreamFilterHoldsBackCallText) {
  const ChatTemplate chatml(ChatTemplateKind::kChatMl);
  ToolCallStreamFilter filter(chatml, false);
  std::string streamed = filter.Push("Let me check. <tool");
  streamed += filter.Push("_call>\n{\"name\": \"f\", ");
  streamed += filter.Push("\"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(streamed, "Let me check. ");
  std::string held;
  auto parsed = filter.Finish(&held);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(held, "");
  ToolCallStreamFilter text_only(chatml, false);
  EXPECT_EQ(text_only.Push("a <to"), "a ");
  EXPECT_TRUE(text_only.Finish(&held).calls.empty());
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

TEST(ToolCalls, ForcedCallSchemaNamesTheTools) {
  GenerationRequest request;
  request.tools = {{"f", "", boost::json::object{{"type", "object"}}},
                   {"g", "", boost::json::object{{"type", "object"}}}};
  request.tool_choice = ToolChoice::kRequired;
  EXPECT_EQ(ToolCallSchema(request, "arguments").at("anyOf").as_array().size(), 2u);
  request.tool_choice = ToolChoice::kNamed;
  request.tool_choice_name = "g";
  const boost::json::value one = ToolCallSchema(request, "parameters");
  EXPECT_EQ(one.at("properties").at("name").at("const"), "g");
  EXPECT_TRUE(one.at("properties").as_object().contains("parameters"));
}

}  // namespace
}  // namespace sinew::model
