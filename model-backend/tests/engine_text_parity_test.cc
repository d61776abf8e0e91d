// The stories260K parity test at the text level, through the project's own
// SentencePiece tokenizer (sinew_tokenizer): encode "Once upon a time" (BOS
// prepended as the vocabulary asks), 64 greedy tokens, decode, compare with the
// text of the reference engine (issue 4). Also streams the text piecewise.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sinew/model/engine.h"
#include "sinew/model/tokenizer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

constexpr const char* kExpected =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

// llama.cpp's greedy text is the same with its default F16 KV cache and with
// -ctk f32 -ctv f32; so must ours be.
class Stories260KTextParity : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Stories260KTextParity, GreedyTextThroughTokenizer) {
  const std::string path = testutil::Stories260KPath();
  ASSERT_EQ(testutil::FileSha256(path), testutil::kStories260KSha256);
  EngineOptions options;
  options.n_threads = 2;
  options.cache_type_k = options.cache_type_v = GetParam();
  auto engine = Engine::Load(path, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto tokenizer = Tokenizer::FromGguf((*engine)->gguf());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::vector<int32_t> prompt = (*tokenizer)->Encode("Once upon a time");
  ASSERT_FALSE(prompt.empty());
  EXPECT_EQ(prompt.front(), (*engine)->info().bos_id);
  EXPECT_TRUE((*engine)->info().add_bos);

  SamplingParams params;
  params.greedy = true;
  params.max_tokens = 64;
  params.stop_at_eos = false;
  StreamingDetokenizer stream(**tokenizer);
  std::string streamed;
  auto result = (*engine)->Generate(prompt, params, [&](const GeneratedToken& t) {
    streamed += stream.Push(t.id);
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  streamed += stream.Flush();
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : result->tokens) ids.push_back(t.id);
  EXPECT_EQ(ids.size(), 64u);
  EXPECT_EQ((*tokenizer)->Decode(ids), kExpected);
  EXPECT_EQ(streamed, kExpected);
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, Stories260KTextParity,
                         ::testing::Values(GgmlType::kF16, GgmlType::kF32),
                         [](const auto& p) { return std::string(GgmlTypeName(p.param)); });

}  // namespace
}  // namespace sinew::model
