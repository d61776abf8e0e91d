// Exact greedy parity on the real stories260K model: the prompt "Once upon a
// time" with BOS, 64 greedy tokens, must give the text another mature GGUF
// engine produces for the same file (issue 4).
//
// Prompt token ids are looked up by their SentencePiece pieces in the file's
// vocabulary ("▁Once" ...), and generated ids are turned into text by joining
// their pieces ("▁" -> space, <0xNN> -> byte). This straightforward decoding
// is independent of the tokenizer library.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/model/engine.h"
#include "test_util.h"

namespace sinew::model {
namespace {

constexpr const char* kExpected =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

int32_t PieceId(const std::vector<std::string_view>& vocab, std::string_view piece) {
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i] == piece) return static_cast<int32_t>(i);
  }
  return -1;
}

std::string DecodePieces(const std::vector<std::string_view>& vocab,
                         const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    std::string_view p = vocab[static_cast<size_t>(id)];
    if (p.size() == 6 && p.substr(0, 3) == "<0x" && p[5] == '>') {
      out += static_cast<char>(std::stoi(std::string(p.substr(3, 2)), nullptr, 16));
      continue;
    }
    for (size_t i = 0; i < p.size();) {
      if (p.substr(i, 3) == "\xE2\x96\x81") {  // U+2581 LOWER ONE EIGHTH BLOCK
        out += ' ';
        i += 3;
      } else {
        out += p[i++];
      }
    }
  }
  return out;
}

class Stories260KParity : public ::testing::TestWithParam<std::string> {};

TEST_P(Stories260KParity, GreedyTextMatchesReferenceEngine) {
  const std::string path = testutil::Stories260KPath();
  ASSERT_EQ(testutil::FileSha256(path), testutil::kStories260KSha256)
      << path << " is missing or not the expected file";
  // A kernel level this CPU lacks is skipped with the backend's own reason.
  if (auto level = CreateCpuBackend(CpuBackendOptions{1, GetParam()});
      !level.ok() && level.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << level.status().message();
  }
  EngineOptions options;
  options.n_threads = 2;
  options.simd = GetParam();
  auto engine = Engine::Load(path, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto vocab = *(*engine)->gguf().GetStringArray("tokenizer.ggml.tokens");
  std::vector<int32_t> prompt = {(*engine)->info().bos_id};
  for (const char* piece : {"\xE2\x96\x81Once", "\xE2\x96\x81upon", "\xE2\x96\x81" "a",
                            "\xE2\x96\x81time"}) {
    const int32_t id = PieceId(vocab, piece);
    ASSERT_GE(id, 0) << piece;
    prompt.push_back(id);
  }
  ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  SamplingParams params;
  params.greedy = true;
  params.max_tokens = 64;
  params.stop_at_eos = false;
  int callbacks = 0;
  auto result = (*engine)->Generate(prompt, params, [&](const GeneratedToken&) {
    ++callbacks;
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->tokens.size(), 64u);
  EXPECT_EQ(callbacks, 64);
  EXPECT_EQ(result->finish_reason, FinishReason::kMaxTokens);
  std::vector<int32_t> ids;
  for (const GeneratedToken& t : result->tokens) ids.push_back(t.id);
  EXPECT_EQ(DecodePieces(vocab, ids), kExpected);
}

// SINEW_CPU_LEVEL caps the levels the CPU is taken to have: "auto" picks at most the cap,
// a level above it is refused as on a CPU without it, and a value that names no level is
// an error rather than a silent default.
TEST(CpuLevelCap, AutoPicksAtMostTheCapAndAnUnknownCapIsRefused) {
  const char* before = std::getenv("SINEW_CPU_LEVEL");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("SINEW_CPU_LEVEL", "scalar", 1);
  auto scalar = Engine::Load(testutil::Stories260KPath(), EngineOptions{});
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_EQ((*scalar)->info().simd, "cpu-scalar");
  auto avx2 = CreateCpuBackend(CpuBackendOptions{1, "avx2"});
  EXPECT_EQ(avx2.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(avx2.status().message().find("SINEW_CPU_LEVEL=scalar"), std::string::npos)
      << avx2.status().message();
  ::setenv("SINEW_CPU_LEVEL", "avx3", 1);
  auto unknown = CreateCpuBackend(CpuBackendOptions{1, "auto"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("avx3"), std::string::npos);
  if (before != nullptr) {
    ::setenv("SINEW_CPU_LEVEL", saved.c_str(), 1);
  } else {
    ::unsetenv("SINEW_CPU_LEVEL");
  }
}

INSTANTIATE_TEST_SUITE_P(AllSimdLevels, Stories260KParity,
                         ::testing::Values("scalar", "avx2", "avx512"));

}  // namespace
}  // namespace sinew::model
