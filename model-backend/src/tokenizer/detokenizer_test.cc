// Streaming detokenization never splits a UTF-8 character.
#include <gtest/gtest.h>

#include <cstdlib>

#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"
#include "sinew/model/unicode.h"
#include "sinew/utf8.h"

namespace sinew::model {
namespace {

std::unique_ptr<Tokenizer> LoadStories() {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  auto file =
      GgufFile::Open(std::string(source ? source : ".") + "/../shared/models/stories260K.gguf");
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(**file);
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

TEST(StreamingDetokenizer, HoldsBackPartialCharacters) {
  std::unique_ptr<Tokenizer> tokenizer = LoadStories();
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = "ok 🦙 é done";
  std::vector<int32_t> ids = tokenizer->Encode(text, {.add_special = false});
  StreamingDetokenizer detokenizer(*tokenizer, /*at_start=*/true);
  std::string streamed;
  for (int32_t id : ids) {
    std::string chunk = detokenizer.Push(id);
    EXPECT_EQ(SanitizeUtf8(chunk), chunk) << "chunk is valid UTF-8";
    EXPECT_EQ(unicode::CompleteUtf8Prefix(chunk), chunk.size());
    streamed += chunk;
  }
  streamed += detokenizer.Flush();
  EXPECT_EQ(streamed, text);
}

TEST(StreamingDetokenizer, FlushReplacesAnUnfinishedCharacter) {
  std::unique_ptr<Tokenizer> tokenizer = LoadStories();
  ASSERT_NE(tokenizer, nullptr);
  int32_t lead = tokenizer->Find("<0xF0>");
  ASSERT_GE(lead, 0);
  StreamingDetokenizer detokenizer(*tokenizer);
  EXPECT_EQ(detokenizer.Push(lead), "");
  EXPECT_EQ(detokenizer.Flush(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace sinew::model
