// The random-weight model files carry complete tokenizer metadata: what other
// GGUF readers need to tokenize any text (llama.cpp's llama-server looks up the
// byte tokens <0xXX> for every character outside the vocabulary and throws
// std::out_of_range when one is missing), checked on the file itself and by
// tokenizing text outside the vocabulary with our own tokenizer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>

#include "random_model.h"
#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"

namespace sinew::model::testing {
namespace {

std::string WriteSmall(int32_t n_vocab, const std::string& name) {
  RandomModelSpec spec;
  spec.n_vocab = n_vocab;
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 128;
  spec.n_layer = 1;
  const std::string path = ::testing::TempDir() + "/sinew_random_vocab_" + name + "_" +
                           std::to_string(getpid()) + ".gguf";
  EXPECT_TRUE(WriteRandomModel(spec, path).ok());
  return path;
}

TEST(RandomModelVocabTest, BenchmarkSizedFileHasCompleteSentencePieceMetadata) {
  const int32_t n_vocab = 32000;  // as sinew-model-bench --write-random
  const std::string path = WriteSmall(n_vocab, "32k");
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  auto scores = f.GetF32Array("tokenizer.ggml.scores");
  auto types = f.GetI32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(tokens.ok() && scores.ok() && types.ok());
  ASSERT_EQ(tokens->size(), static_cast<size_t>(n_vocab));
  ASSERT_EQ(scores->size(), static_cast<size_t>(n_vocab));
  ASSERT_EQ(types->size(), static_cast<size_t>(n_vocab));
  // Every piece once (readers build a piece -> id map).
  EXPECT_EQ(std::set<std::string_view>(tokens->begin(), tokens->end()).size(),
            static_cast<size_t>(n_vocab));
  // Special ids point at their pieces, typed unknown (2) and control (3).
  const uint64_t unk = *f.GetUint("tokenizer.ggml.unknown_token_id");
  const uint64_t bos = *f.GetUint("tokenizer.ggml.bos_token_id");
  const uint64_t eos = *f.GetUint("tokenizer.ggml.eos_token_id");
  EXPECT_EQ((*tokens)[unk], "<unk>");
  EXPECT_EQ((*tokens)[bos], "<s>");
  EXPECT_EQ((*tokens)[eos], "</s>");
  EXPECT_EQ((*types)[unk], 2);
  EXPECT_EQ((*types)[bos], 3);
  EXPECT_EQ((*types)[eos], 3);
  EXPECT_TRUE(*f.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f.GetBool("tokenizer.ggml.add_eos_token"));
  // All 256 byte tokens, typed byte (6).
  static const char* kHex = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    const std::string piece = std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
    const size_t id = static_cast<size_t>(kRandomVocabBytesFrom + byte);
    EXPECT_EQ((*tokens)[id], piece);
    EXPECT_EQ((*types)[id], 6) << piece;
  }
  // SentencePiece's space marker is a piece, so prompts are not all bytes.
  EXPECT_NE(std::find(tokens->begin(), tokens->end(), "\xe2\x96\x81"), tokens->end());

  // Any text tokenizes without <unk> and decodes back.
  auto tokenizer = Tokenizer::FromGguf(f);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::string text = "Edit main.cc:\n\tint x = 42; // caf\xc3\xa9 \xe4\xb8\x96\xe7\x95\x8c {}";
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], static_cast<int32_t>(bos));
  for (int32_t id : ids) EXPECT_NE(id, static_cast<int32_t>(unk));
  EXPECT_EQ((*tokenizer)->Decode(std::span<const int32_t>(ids).subspan(1)), text);
  std::remove(path.c_str());
}

TEST(RandomModelVocabTest, TinyVocabularyKeepsSpecialsAndFiller) {
  const std::string path = WriteSmall(40, "tiny");  // too small for the byte tokens
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 40u);
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[39], "t39");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sinew::model::testing
