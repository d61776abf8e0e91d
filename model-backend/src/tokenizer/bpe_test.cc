// Byte-level BPE on small hand-made vocabularies: merge order, ignore_merges (Llama 3),
// special tokens.
#include <gtest/gtest.h>

#include "sinew/model/tokenizer.h"
#include "sinew/model/unicode.h"

namespace sinew::model {
namespace {

// Every byte's printable image as a token (ids 0..255), then `extra` tokens.
Vocab ByteVocab(std::string pre, std::vector<std::string> extra, std::vector<std::string> merges) {
  Vocab vocab;
  vocab.model = VocabModel::kBytePairEncoding;
  vocab.pre_tokenizer = std::move(pre);
  for (int byte = 0; byte < 256; ++byte) {
    std::string text;
    unicode::AppendUtf8(unicode::ByteToPrintable(static_cast<uint8_t>(byte)), text);
    vocab.tokens.push_back(text);
  }
  for (std::string& token : extra) vocab.tokens.push_back(std::move(token));
  vocab.types.assign(vocab.tokens.size(), TokenType::kNormal);
  vocab.merges = std::move(merges);
  return vocab;
}

TEST(Bpe, MergesByRankNotByPosition) {
  // "abc": "b c" has the better rank, so "a" + "bc" wins over "ab" + "c".
  auto tokenizer = Tokenizer::Create(ByteVocab("gpt-2", {"ab", "bc"}, {"b c", "a b"}));
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ((*tokenizer)->Encode("abc", {.add_special = false}), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ((*tokenizer)->Encode("ab", {.add_special = false}), (std::vector<int32_t>{256}));
  EXPECT_EQ((*tokenizer)->Decode(std::vector<int32_t>{'a', 257}), "abc");
}

TEST(Bpe, Llama3TakesWholeWordTokensWithoutMerges) {
  // "hello" is a token but no merges lead to it: only Llama 3 (ignore_merges) finds it.
  auto llama3 = Tokenizer::Create(ByteVocab("llama-bpe", {"hello"}, {}));
  auto qwen2 = Tokenizer::Create(ByteVocab("qwen2", {"hello"}, {}));
  ASSERT_TRUE(llama3.ok());
  ASSERT_TRUE(qwen2.ok());
  EXPECT_EQ((*llama3)->Encode("hello", {.add_special = false}), (std::vector<int32_t>{256}));
  EXPECT_EQ((*qwen2)->Encode("hello", {.add_special = false}),
            (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
}

TEST(Bpe, SpecialTokensAndBos) {
  Vocab vocab = ByteVocab("qwen2", {"<|im_start|>", "<|im_end|>", "<tool>"}, {});
  vocab.types[256] = TokenType::kControl;
  vocab.types[257] = TokenType::kControl;
  vocab.types[258] = TokenType::kUserDefined;
  vocab.bos_id = 256;
  vocab.add_bos = true;
  auto tokenizer = Tokenizer::Create(vocab);
  ASSERT_TRUE(tokenizer.ok());
  const Tokenizer& t = **tokenizer;
  EXPECT_EQ(t.Encode("x<|im_end|>", {.add_special = true, .parse_special = true}),
            (std::vector<int32_t>{256, 'x', 257}));
  // Without parse_special the control token is plain text; user-defined ones still match.
  std::vector<int32_t> plain = t.Encode("<|im_end|><tool>", {.add_special = false});
  EXPECT_EQ(plain.back(), 258);
  EXPECT_EQ(plain.size(), 11u);
  EXPECT_EQ(t.Decode(plain), "<|im_end|><tool>");
  EXPECT_EQ(t.Decode(std::vector<int32_t>{257}), "");
  EXPECT_EQ(t.Decode(std::vector<int32_t>{257}, /*render_special=*/true), "<|im_end|>");
}

}  // namespace
}  // namespace sinew::model

namespace sinew::model {
namespace {

TEST(Spm, MalformedByteTokenDecodesAsText) {
  Vocab vocab;
  vocab.tokens = {"<unk>", "<0xZZ>", "<0x41>",
                  "\xE2\x96\x81"
                  "a"};
  vocab.types = {TokenType::kUnknown, TokenType::kByte, TokenType::kByte, TokenType::kNormal};
  vocab.scores = {0, 0, 0, 1};
  vocab.unk_id = 0;
  auto tokenizer = Tokenizer::Create(vocab);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_EQ((*tokenizer)->TokenPiece(1), "<0xZZ>");
  EXPECT_EQ((*tokenizer)->TokenPiece(2), "A");
  // "A" has a byte token; "b" has none and no single-character token: <unk>.
  EXPECT_EQ((*tokenizer)->Encode("aAb", {.add_special = false}), (std::vector<int32_t>{3, 2, 0}));
}

}  // namespace
}  // namespace sinew::model
