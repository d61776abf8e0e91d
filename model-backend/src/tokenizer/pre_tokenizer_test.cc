// Pre-tokenizer splits, checked against what the family's regex gives for each input.
#include "pre_tokenizer.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace sinew::model {
namespace {

std::vector<std::string> Split(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view word : PreTokenize(kind, text)) out.emplace_back(word);
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, "Hello world's  end!!  "),
            (Words{"Hello", " world", "'s", " ", " end", "!!", "  "}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, "I'LL 12345 a\n\nb"),
            (Words{"I", "'", "LL", " 12345", " a", "\n", "\n", "b"}));
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, ""), Words{});
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "I'LL pay 12345 $x\n\n  y"),
            (Words{"I", "'LL", " pay", " ", "123", "45", " $", "x", "\n\n", " ", " y"}));
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, "a.\n\nb"), (Words{"a", ".\n\n", "b"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsSingly) {
  EXPECT_EQ(Split(PreTokenizerKind::kQwen2, "x 123"), (Words{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, DeepseekCoder) {
  EXPECT_EQ(Split(PreTokenizerKind::kDeepseekCoder, "Hi 42, 我想\nok"),
            (Words{"Hi", " ", "4", "2", ",", " ", "我想", "\n", "ok"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  EXPECT_EQ(Split(PreTokenizerKind::kDeepseekLlm, "Hi 42, 我想 \n"),
            (Words{"Hi", " ", "42", ",", " ", "我想", " ", "\n"}));
}

TEST(PreTokenizer, CoversInvalidBytes) {
  std::string text = "a\xFF\xFE b";
  std::string joined;
  for (std::string_view word : PreTokenize(PreTokenizerKind::kLlama3, text)) joined += word;
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace sinew::model

namespace sinew::model {
namespace {

// testdata/pre_tokenizer_vectors.jsonl: each family's regex run by a real regex engine
// (see gen_pre_tokenizer_vectors.py) over the shared vocab inputs and extra strings.
TEST(PreTokenizer, MatchesTheRegexEngineOnEveryVector) {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  std::ifstream in(std::string(source ? source : ".") +
                   "/model-backend/src/tokenizer/testdata/pre_tokenizer_vectors.jsonl");
  ASSERT_TRUE(in.good());
  const std::map<std::string, PreTokenizerKind> kinds = {
      {"gpt2", PreTokenizerKind::kGpt2},
      {"llama3", PreTokenizerKind::kLlama3},
      {"qwen2", PreTokenizerKind::kQwen2},
      {"deepseek-coder", PreTokenizerKind::kDeepseekCoder},
      {"deepseek-llm", PreTokenizerKind::kDeepseekLlm}};
  std::map<std::string, int> checked;
  for (std::string line; std::getline(in, line);) {
    boost::json::object vector = boost::json::parse(line).as_object();
    std::string family(vector.at("family").as_string());
    std::string text(vector.at("text").as_string());
    Words expected;
    for (const boost::json::value& word : vector.at("words").as_array()) {
      expected.emplace_back(word.as_string());
    }
    ASSERT_TRUE(kinds.contains(family)) << family;
    EXPECT_EQ(Split(kinds.at(family), text), expected) << family << ": \"" << text << "\"";
    ++checked[family];
  }
  EXPECT_EQ(checked.size(), kinds.size());
  for (const auto& [family, count] : checked) EXPECT_GT(count, 50) << family;
}

}  // namespace
}  // namespace sinew::model
