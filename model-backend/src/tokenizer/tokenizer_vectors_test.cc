// The shared tokenizer test vectors (../shared/models/vocab) and stories260K's own vocab,
// read from the real GGUF files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "sinew/model/gguf.h"
#include "sinew/model/gguf_writer.h"
#include "sinew/model/tokenizer.h"
#include "sinew/model/unicode.h"

namespace sinew::model {
namespace {

std::string SharedDir() {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  return std::string(source ? source : ".") + "/../shared/models";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << path << ": " << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << path << ": " << tokenizer.status().ToString();
  if (!tokenizer.ok()) return nullptr;
  return std::move(tokenizer).value();
}

class VocabVectors : public testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EveryLineMatches) {
  std::string base = SharedDir() + "/vocab/ggml-vocab-" + GetParam() + ".gguf";
  std::unique_ptr<Tokenizer> tokenizer = Load(base);
  ASSERT_NE(tokenizer, nullptr);

  std::string inputs = ReadAll(base + ".inp");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos;
  while ((pos = inputs.find(separator)) != std::string::npos) {
    texts.push_back(inputs.substr(0, pos));
    inputs.erase(0, pos + separator.size());
  }
  std::ifstream expected_file(base + ".out");
  std::vector<std::vector<int32_t>> expected;
  for (std::string line; std::getline(expected_file, line);) {
    std::istringstream fields(line);
    std::vector<int32_t> ids;
    for (int32_t id; fields >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  ASSERT_EQ(texts.size(), expected.size());
  ASSERT_GT(texts.size(), 40u);
  size_t compared = 0, mismatches = 0;
  for (size_t index = 0; index < texts.size(); ++index) {
    std::vector<int32_t> ids = tokenizer->Encode(texts[index], {.add_special = false});
    EXPECT_EQ(ids, expected[index])
        << GetParam() << " line " << index << ": \"" << texts[index] << "\"";
    compared += expected[index].size();
    mismatches += ids != expected[index];
    // Decoding gives the text back (these vocabularies cover every input byte).
    EXPECT_EQ(tokenizer->Decode(ids), texts[index]) << GetParam() << " line " << index;
  }
  std::printf("%s vs llama.cpp: %zu texts, %zu ids, %zu mismatching texts\n", GetParam().c_str(),
              texts.size(), compared, mismatches);
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors,
                         testing::Values("llama-spm", "gpt-2", "deepseek-coder", "deepseek-llm", "phi-3"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

TEST(Stories260K, VocabRoundTrips) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SharedDir() + "/stories260K.gguf");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->size(), 512);
  EXPECT_EQ(tokenizer->vocab().model, VocabModel::kSentencePiece);
  EXPECT_EQ(tokenizer->vocab().bos_id, 1);
  EXPECT_EQ(tokenizer->vocab().eos_id, 2);
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(2));
  for (std::string text : {"Once upon a time", "Lily's mom said, \"Let's go to the park!\"",
                           "  two  spaces\n\tand ä ü 🦙", "x"}) {
    std::vector<int32_t> ids = tokenizer->Encode(text);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1) << "BOS first";
    EXPECT_EQ(tokenizer->Decode(ids), text);
  }
  // Each piece of "Once upon a time" is a vocabulary token (no byte fallback).
  std::vector<int32_t> ids = tokenizer->Encode("Once upon a time", {.add_special = false});
  for (int32_t id : ids) EXPECT_GT(id, 258) << "not a byte token";
  EXPECT_EQ(tokenizer->TokenPiece(ids[0]).front(), ' ');
  // Characters the vocabulary lacks go through byte fallback.
  std::vector<int32_t> llama = tokenizer->Encode("🦙", {.add_special = false});
  ASSERT_GE(llama.size(), 4u);
  EXPECT_EQ(tokenizer->Decode(llama), "🦙");
}

TEST(SpecialTokens, ControlTokensOnlyWithParseSpecial) {
  std::unique_ptr<Tokenizer> tokenizer = Load(SharedDir() + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tokenizer, nullptr);
  std::vector<int32_t> parsed =
      tokenizer->Encode("a</s>b", {.add_special = false, .parse_special = true});
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 2), parsed.end());
  std::vector<int32_t> literal = tokenizer->Encode("a</s>b", {.add_special = false});
  EXPECT_EQ(std::find(literal.begin(), literal.end(), 2), literal.end());
  EXPECT_EQ(tokenizer->Decode(literal), "a</s>b");
  EXPECT_EQ(tokenizer->TokenPiece(2), "");
  EXPECT_EQ(tokenizer->TokenPiece(2, true), "</s>");
}

TEST(VocabLoader, RejectsBadVocab) {
  Vocab vocab;
  EXPECT_FALSE(Tokenizer::Create(vocab).ok());
  vocab.tokens = {"a", "b"};
  vocab.scores = {1.0f};
  EXPECT_FALSE(Tokenizer::Create(vocab).ok());
  vocab.scores.clear();
  vocab.bos_id = 7;
  EXPECT_FALSE(Tokenizer::Create(vocab).ok());
  vocab.bos_id = -1;
  vocab.model = VocabModel::kBytePairEncoding;
  vocab.pre_tokenizer = "no-such-family";
  auto unknown = Tokenizer::Create(vocab);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no-such-family"), std::string::npos);
  vocab.pre_tokenizer = "qwen2";
  vocab.merges = {"ab"};
  EXPECT_FALSE(Tokenizer::Create(vocab).ok());
  vocab.merges = {"a b"};
  EXPECT_TRUE(Tokenizer::Create(vocab).ok());
}

// tokenizer.sinew.normalizer: "nfc" or "none"; absent, Qwen's pre-tokenizer means NFC.
TEST(VocabLoader, NormalizerKey) {
  auto load = [](const std::string& pre, const char* normalizer) -> Result<Vocab> {
    GgufWriter writer;
    writer.SetString("general.architecture", "llama");
    writer.SetString("tokenizer.ggml.model", "gpt2");
    writer.SetString("tokenizer.ggml.pre", pre);
    writer.SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
    writer.SetStringArray("tokenizer.ggml.merges", {"a b"});
    if (normalizer != nullptr) writer.SetString("tokenizer.sinew.normalizer", normalizer);
    const std::string path = "/tmp/sinew-normalizer-" + std::to_string(getpid()) + ".gguf";
    EXPECT_TRUE(writer.WriteFile(path).ok());
    auto file = GgufFile::Open(path);
    std::remove(path.c_str());
    if (!file.ok()) return file.status();
    return LoadVocabFromGguf(**file);
  };
  EXPECT_EQ(load("qwen2", nullptr)->normalizer, Normalizer::kNfc);
  EXPECT_EQ(load("llama-bpe", nullptr)->normalizer, Normalizer::kNone);
  EXPECT_EQ(load("qwen2", "none")->normalizer, Normalizer::kNone);
  EXPECT_EQ(load("gpt-2", "nfc")->normalizer, Normalizer::kNfc);
  auto bad = load("gpt-2", "nfkd");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer.sinew.normalizer \"nfkd\""), std::string::npos)
      << bad.status().message();
}

// A vocabulary with NFC encodes decomposed text as its composed form.
TEST(Normalizer, NfcVocabularyEncodesComposedText) {
  Vocab vocab;
  vocab.model = VocabModel::kBytePairEncoding;
  vocab.pre_tokenizer = "qwen2";
  vocab.tokens = {unicode::ByteLevelEncode("\u00e9"), unicode::ByteLevelEncode("e"),
                  unicode::ByteLevelEncode("\xcc"), unicode::ByteLevelEncode("\x81"),
                  unicode::ByteLevelEncode("\xc3"), unicode::ByteLevelEncode("\xa9")};
  vocab.merges = {unicode::ByteLevelEncode("\xc3") + " " + unicode::ByteLevelEncode("\xa9")};
  vocab.normalizer = Normalizer::kNfc;
  auto nfc = Tokenizer::Create(vocab);
  ASSERT_TRUE(nfc.ok());
  EXPECT_EQ((*nfc)->Encode("e\u0301", {.add_special = false}), std::vector<int32_t>{0});
  vocab.normalizer = Normalizer::kNone;
  auto raw = Tokenizer::Create(vocab);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)->Encode("e\u0301", {.add_special = false}), (std::vector<int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace sinew::model

namespace sinew::model {
namespace {

// Any byte string, valid UTF-8 or not, encodes without failing and decodes back exactly
// (byte-level BPE and SPM with byte fallback both cover every byte). DeepSeek-Coder's
// vocabulary has user-defined tokens such as "ù" that are also byte-level images of raw
// bytes (0xF9); like other GGUF engines we emit them as their text, so for it only valid
// UTF-8 round-trips and the raw bytes are left out.
TEST(RoundTrip, RandomBytes) {
  std::mt19937 rng(42);
  for (const char* name : {"gpt-2", "llama-spm", "deepseek-coder"}) {
    std::unique_ptr<Tokenizer> tokenizer =
        Load(SharedDir() + "/vocab/ggml-vocab-" + std::string(name) + ".gguf");
    ASSERT_NE(tokenizer, nullptr);
    for (int round = 0; round < 200; ++round) {
      std::string text;
      size_t length = rng() % 40;
      for (size_t index = 0; index < length; ++index) {
        uint32_t pick = rng() % 4;
        if (pick == 0 && std::string(name) != "deepseek-coder") {
          text.push_back(static_cast<char>(rng() % 256));  // any byte
        } else if (pick <= 1) {
          text += " \n\t"[rng() % 3];
        } else if (pick == 2) {
          text += std::vector<std::string>{"é", "我", "🦙", "½", "Ä", "'s"}[rng() % 6];
        } else {
          text.push_back(static_cast<char>('a' + rng() % 26));
        }
      }
      std::vector<int32_t> ids = tokenizer->Encode(text, {.add_special = false});
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer->size());
      EXPECT_EQ(tokenizer->Decode(ids), text) << name << " round " << round;
    }
  }
}

}  // namespace
}  // namespace sinew::model
