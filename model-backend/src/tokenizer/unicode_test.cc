#include "sinew/model/unicode.h"

#include <gtest/gtest.h>

namespace sinew::model::unicode {
namespace {

TEST(Unicode, Categories) {
  EXPECT_TRUE(FlagsOf(U'a').IsLetter());
  EXPECT_TRUE(FlagsOf(U'a').cased_letter);
  EXPECT_TRUE(FlagsOf(U'我').IsLetter());
  EXPECT_FALSE(FlagsOf(U'我').cased_letter);
  EXPECT_TRUE(FlagsOf(U'7').IsNumber());
  EXPECT_TRUE(FlagsOf(U'½').IsNumber());
  EXPECT_TRUE(FlagsOf(U'!').IsPunctuation());
  EXPECT_EQ(FlagsOf(U'$').group, CategoryGroup::kSymbol);
  EXPECT_EQ(FlagsOf(0x301).group, CategoryGroup::kMark);
  EXPECT_TRUE(FlagsOf(U' ').whitespace);
  EXPECT_TRUE(FlagsOf(0x3000).whitespace);
  EXPECT_FALSE(FlagsOf(U'x').whitespace);
  EXPECT_EQ(FlagsOf(0x10FFFF + 5).group, CategoryGroup::kOther);
}

TEST(Unicode, DecodeNeverFails) {
  auto cps = DecodeUtf8("a\xC3\xA9\xFF\xE2\x82");
  ASSERT_EQ(cps.size(), 5u);
  EXPECT_EQ(cps[1].value, 0xE9u);
  EXPECT_EQ(cps[1].length, 2u);
  EXPECT_EQ(cps[2].value, 0xFFFDu);
  EXPECT_EQ(cps[3].value, 0xFFFDu);
  EXPECT_EQ(cps[4].value, 0xFFFDu);
  EXPECT_TRUE(DecodeUtf8("\xC0\x80").front().value == 0xFFFD) << "overlong";
  EXPECT_TRUE(DecodeUtf8("\xED\xA0\x80").front().value == 0xFFFD) << "surrogate";
}

TEST(Unicode, CompletePrefix) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\xA6"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("\x80\x80\x80\x80"), 4u);
}

TEST(Unicode, ByteLevelMappingIsABijection) {
  for (int byte = 0; byte < 256; ++byte) {
    char32_t cp = ByteToPrintable(static_cast<uint8_t>(byte));
    EXPECT_EQ(PrintableToByte(cp), byte);
  }
  EXPECT_EQ(ByteToPrintable(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(ByteLevelEncode(" a"),
            "\xC4\xA0"
            "a");
  EXPECT_EQ(PrintableToByte(U'Ā' + 200), -1);
}

TEST(Unicode, NormalizeNfcComposesAndKeepsInvalidBytes) {
  EXPECT_EQ(NormalizeNfc("plain ascii"), "plain ascii");
  EXPECT_EQ(NormalizeNfc("e\u0301"), "\u00e9");                 // e + acute -> é
  EXPECT_EQ(NormalizeNfc("\u212b"), "\u00c5");                   // Angstrom sign -> Å
  EXPECT_EQ(NormalizeNfc("\u1100\u1161\u11a8"), "\uac01");       // conjoining jamo -> 각
  EXPECT_EQ(NormalizeNfc("q\u0307\u0323"), "q\u0323\u0307");     // marks reordered
  EXPECT_EQ(NormalizeNfc("\ufb01"), "\ufb01");                   // NFC keeps the ligature (NFKC would not)
  EXPECT_EQ(NormalizeNfc("\u00e9"), "\u00e9");                   // already NFC
  // An invalid byte is kept and nothing combines across it.
  EXPECT_EQ(NormalizeNfc("e\xff\u0301"), "e\xff\u0301");
  EXPECT_EQ(NormalizeNfc("e\u0301\xc3"), "\u00e9\xc3");
  EXPECT_EQ(NormalizeNfc(""), "");
}

}  // namespace
}  // namespace sinew::model::unicode
