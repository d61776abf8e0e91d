// Long-running corruption fuzzing (ctest label `long`): random models in every
// tensor type, mutated (byte flips, huge integers, truncation) many times. Each
// image must either be rejected with an error or load; images that parse are
// also loaded as models and run, which must give a result or an error, never
// a crash. Deterministic seeds; run with scripts/test.sh --long.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "random_model.h"
#include "sinew/model/engine.h"
#include "sinew/model/gguf.h"

namespace sinew::model {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(GgufFuzzTest, MutatedModelsNeverCrash) {
  const std::string path =
      ::testing::TempDir() + "/sinew_fuzz_" + std::to_string(getpid()) + ".gguf";
  std::mt19937_64 rng(20261129);
  int parsed = 0, loaded = 0, rejected = 0;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K,
                        GgmlType::kQ6_K}) {
    testing::RandomModelSpec spec;
    spec.weight_type = type;
    spec.n_vocab = 40;
    spec.n_layer = 1;
    ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
    const std::string image = ReadAll(path);
    auto clean = GgufFile::FromBytes(image);
    ASSERT_TRUE(clean.ok());
    // Mutations target the header, metadata and tensor infos (before the data).
    const size_t data_start = static_cast<size_t>(clean.value()->data_offset());
    for (int iter = 0; iter < 20000; ++iter) {
      std::string bad = image;
      const int kind = static_cast<int>(rng() % 3);
      const size_t span = std::min(data_start, bad.size());
      if (kind == 0) {
        for (int f = 0; f < 1 + static_cast<int>(rng() % 3); ++f) {
          bad[rng() % span] = static_cast<char>(rng());
        }
      } else if (kind == 1) {
        const uint64_t huge = rng() % 2 ? ~uint64_t{0} >> (rng() % 40) : rng() % 100000;
        const size_t at = rng() % (span - 8);
        std::memcpy(bad.data() + at, &huge, rng() % 2 ? 8 : 4);
      } else {
        bad.resize(rng() % bad.size());
      }
      auto file = GgufFile::FromBytes(bad);
      if (!file.ok()) {
        ++rejected;
        continue;
      }
      ++parsed;
      if (iter % 8 != 0) continue;  // loading a model is slower; sample it
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
      }
      EngineOptions options;
      options.n_threads = 1;
      options.n_ctx = 64;
      auto engine = Engine::Load(path, options);
      if (!engine.ok()) continue;
      ++loaded;
      auto logits = (*engine)->Evaluate({1, 2, 3}, false);
      EXPECT_TRUE(logits.ok() || !logits.status().message().empty());
    }
  }
  std::remove(path.c_str());
  RecordProperty("parsed", parsed);
  RecordProperty("loaded", loaded);
  RecordProperty("rejected", rejected);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace sinew::model
