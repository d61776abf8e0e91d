#include "sinew/reasoning_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sinew {
namespace {

// `pieces` streamed through one splitter: {reasoning, content}.
ReasoningSplitter::Parts Stream(const std::vector<std::string>& pieces, bool opened_by_prompt = false) {
  ReasoningSplitter splitter(opened_by_prompt);
  ReasoningSplitter::Parts all;
  for (const auto& piece : pieces) {
    auto parts = splitter.Push(piece);
    all.reasoning += parts.reasoning;
    all.content += parts.content;
  }
  auto tail = splitter.Finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  return all;
}

TEST(ReasoningSplitterTest, ThinkIsReasoningContentNotContent) {
  auto split = SplitReasoning("<think>\nLet me think.\n</think>\n\nThe answer is 4.", false);
  EXPECT_EQ(split.reasoning, "Let me think.");
  EXPECT_EQ(split.content, "The answer is 4.");
  split = SplitReasoning("Reasoning opened by the prompt.</think>Answer.", true);
  EXPECT_EQ(split.reasoning, "Reasoning opened by the prompt.");
  EXPECT_EQ(split.content, "Answer.");
  split = SplitReasoning("No thinking here <think> is just text.", false);
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "No thinking here <think> is just text.");
}

TEST(ReasoningSplitterTest, StreamedOneByteAtATimeNoTagTextLeaks) {
  const std::string text = "  <think>a</thi b</think>\n\ncontent</think>";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  auto split = Stream(bytes);
  EXPECT_EQ(split.reasoning, "a</thi b");
  EXPECT_EQ(split.content, "content</think>");
}

TEST(ReasoningSplitterTest, TagsCutAcrossPiecesAndUnfinishedEnds) {
  auto split = Stream({"<think>a</think>b"});
  EXPECT_EQ(split.reasoning, "a");
  EXPECT_EQ(split.content, "b");
  split = Stream({"<", "t", "hink", ">x", "<", "/think", ">", "\n", "\ny"});
  EXPECT_EQ(split.reasoning, "x");
  EXPECT_EQ(split.content, "y");
  split = Stream({"<think>never closed"});
  EXPECT_EQ(split.reasoning, "never closed");
  EXPECT_EQ(split.content, "");
  split = Stream({"Use <think> tags like <think>this</think>."});
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "Use <think> tags like <think>this</think>.");
  EXPECT_EQ(Stream({"plain ", "<thi"}).content, "plain <thi");
  split = Stream({"<th"});  // a tag that never completed is content
  EXPECT_EQ(split.content, "<th");
  EXPECT_EQ(split.reasoning, "");
}

}  // namespace
}  // namespace sinew
