#include "sinew/sse_parser.h"

#include <gtest/gtest.h>

#include <vector>

namespace sinew {
namespace {

TEST(SseParserTest, HandlesAnyChunkingCommentsAndMultilineData) {
  std::vector<SseEvent> got;
  SseParser parser([&](const SseEvent& e) {
    got.push_back(e);
    return true;
  });
  const std::string stream =
      ": keepalive\n\nid: 7\nevent: tool_call\ndata: {\"a\":1}\n\n"
      "id: 8\r\ndata: line1\r\ndata: line2\r\n\r\n";
  for (char c : stream) EXPECT_TRUE(parser.Feed(std::string_view(&c, 1)));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, "7");
  EXPECT_EQ(got[0].event, "tool_call");
  EXPECT_EQ(got[0].data, "{\"a\":1}");
  EXPECT_EQ(got[1].id, "8");
  EXPECT_EQ(got[1].event, "message");
  EXPECT_EQ(got[1].data, "line1\nline2");
}

TEST(SseParserTest, StopsWhenTheCallbackSaysSo) {
  int calls = 0;
  SseParser parser([&](const SseEvent&) { return ++calls < 2; });
  EXPECT_FALSE(parser.Feed("data: a\n\ndata: b\n\ndata: c\n\n"));
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(parser.Feed("data: d\n\n"));
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace sinew
