#include "sinew/utf8.h"

#include <gtest/gtest.h>

namespace sinew {
namespace {

TEST(Utf8Prefix, NeverSplitsACharacter) {
  EXPECT_EQ(Utf8Prefix("hello", 80), "hello");
  EXPECT_EQ(Utf8Prefix("hello", 3), "hel");
  EXPECT_EQ(Utf8Prefix("x\xC3\xA9", 2), "x");             // é would be cut in half
  EXPECT_EQ(Utf8Prefix("x\xC3\xA9", 3), "x\xC3\xA9");
  EXPECT_EQ(Utf8Prefix("\xE2\x82\xAC\xE2\x82\xAC", 4), "\xE2\x82\xAC");  // €€
  EXPECT_EQ(Utf8Prefix("\xE2\x82\xAC\xE2\x82\xAC", 5), "\xE2\x82\xAC");
  EXPECT_EQ(Utf8Prefix("\xF0\x9F\xA6\x99z", 3), "");       // 🦙
  EXPECT_EQ(Utf8Prefix("\xF0\x9F\xA6\x99z", 4), "\xF0\x9F\xA6\x99");
  // Bytes that are not UTF-8 are characters of their own.
  EXPECT_EQ(Utf8Prefix("a\xFF\xFF\xFF", 2), "a\xFF");
  EXPECT_EQ(Utf8Prefix("a\x80\x80\x80\x80\x80", 4), "a\x80\x80\x80");
}

TEST(SanitizeUtf8Test, ReplacesEveryInvalidByteAndKeepsValidText) {
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9llo \xF0\x9F\xA6\x99"), "h\xC3\xA9llo \xF0\x9F\xA6\x99");
  EXPECT_EQ(SanitizeUtf8("/v\xFF\xFE" "1"), "/v\xEF\xBF\xBD\xEF\xBF\xBD" "1");  // harness_request_fuzz
  EXPECT_EQ(SanitizeUtf8("\xC3"), "\xEF\xBF\xBD");                          // cut off
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");              // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // past U+10FFFF
  EXPECT_EQ(SanitizeUtf8(std::string_view("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(SanitizeUtf8("a\xEF\xBF\xBD" "b"), "a\xEF\xBF\xBD" "b");  // U+FFFD itself is valid
}

}  // namespace
}  // namespace sinew
