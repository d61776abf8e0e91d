#include "sinew/model/chat_template.h"

#include <gtest/gtest.h>

namespace sinew::model {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Story?"}};

TEST(ChatTemplate, DetectsFamiliesBySignature) {
  EXPECT_EQ(ChatTemplate::Detect("").kind(), ChatTemplateKind::kPlain);
  EXPECT_EQ(ChatTemplate::Detect("{% for m in messages %}<|im_start|>{{m.role}}...").kind(),
            ChatTemplateKind::kChatMl);
  EXPECT_EQ(ChatTemplate::Detect("{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"
                                 "{{ content }}<|eot_id|>")
                .kind(),
            ChatTemplateKind::kLlama3);
  EXPECT_EQ(ChatTemplate::Detect("{{ '[INST] ' + content }}").kind(), ChatTemplateKind::kPlain);
}

TEST(ChatTemplate, RendersChatMl) {
  auto text = ChatTemplate(ChatTemplateKind::kChatMl).Render(kConversation);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nStory?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, RendersLlama3) {
  auto text =
      ChatTemplate(ChatTemplateKind::kLlama3).Render(std::vector<ChatMessage>{{"user", " Hi\n"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RendersPlainFallback) {
  auto text = ChatTemplate(ChatTemplateKind::kPlain).Render(kConversation);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Story?\nAssistant:");
  EXPECT_EQ(ChatTemplate(ChatTemplateKind::kPlain).StopStrings(),
            std::vector<std::string>{"\nUser:"});
}

TEST(ChatTemplate, RejectsBadMessages) {
  ChatTemplate plain(ChatTemplateKind::kPlain);
  EXPECT_EQ(plain.Render({}).status().code(), StatusCode::kInvalidArgument);
  auto bad = plain.Render(std::vector<ChatMessage>{{"robot", "x", {}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tool"), std::string::npos);
}

}  // namespace
}  // namespace sinew::model
