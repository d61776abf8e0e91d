// GGUF reader: the real stories260K file, files the writer builds, and malformed
// images (every truncation, lying sizes, huge counts, bad types) rejected cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "sinew/model/gguf.h"
#include "sinew/model/gguf_writer.h"
#include "test_util.h"

namespace sinew::model {
namespace {

TEST(GgufTest, OpensStories260K) {
  const std::string path = testutil::Stories260KPath();
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1], "<s>");
  auto scores = f.GetF32Array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ(scores->size(), 512u);
  auto types = f.GetI32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ(types->size(), 512u);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 2048);  // as the file says
  const GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::kF32);
  EXPECT_EQ(emb->shape[1], 512);
  EXPECT_EQ(f.FindTensor("no.such.tensor"), nullptr);
  // Typed getters refuse the wrong type and name the key.
  auto wrong = f.GetString("llama.context_length");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("llama.context_length"), std::string::npos);
  EXPECT_EQ(f.GetInt("missing.key").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*f.GetIntOr("missing.key", 7), 7);
}

std::string SmallImage() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("u32", 7);
  w.SetInt32("i32", -3);
  w.SetFloat32("f32", 1.5f);
  w.SetBool("flag", true);
  w.SetStringArray("strs", {"a", "bc", ""});
  w.SetFloat32Array("floats", {1.0f, 2.0f});
  w.SetInt32Array("ints", {1, -2, 3});
  w.AddTensor("t0", GgmlType::kF32, {4, 2}, std::string(32, '\x01'));
  w.AddTensor("t1", GgmlType::kQ8_0, {32, 1}, std::string(34, '\x02'));
  return w.ToBytes();
}

TEST(GgufTest, RoundTripsWriterImage) {
  auto file = GgufFile::FromBytes(SmallImage());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(*f.GetUint("u32"), 7u);
  EXPECT_EQ(*f.GetInt("i32"), -3);
  EXPECT_EQ(f.GetUint("i32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(*f.GetFloat("f32"), 1.5);
  EXPECT_TRUE(*f.GetBool("flag"));
  EXPECT_EQ(f.GetStringArray("strs")->at(1), "bc");
  EXPECT_EQ(f.GetF32Array("floats")->at(1), 2.0f);
  EXPECT_EQ(f.GetI32Array("ints")->at(1), -2);
  EXPECT_EQ(f.GetF32Array("ints").status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[1].size_bytes, 34u);
  EXPECT_EQ(f.tensors()[1].data[0], 2);
}

TEST(GgufTest, EveryTruncationIsRejected) {
  const std::string image = SmallImage();
  for (size_t len = 0; len < image.size(); ++len) {
    auto file = GgufFile::FromBytes(image.substr(0, len));
    // Trailing alignment padding after the last tensor may be cut without loss.
    if (file.ok()) {
      EXPECT_GE(len, image.size() - 31) << "prefix of " << len << " bytes accepted";
      continue;
    }
    EXPECT_EQ(file.status().code(), StatusCode::kCorruption) << file.status().ToString();
  }
}

// Overwrites the 8 bytes at `offset` with `v`.
std::string Patch64(std::string image, size_t offset, uint64_t v) {
  std::memcpy(image.data() + offset, &v, 8);
  return image;
}

TEST(GgufTest, HugeCountsAndLyingSizesAreRejected) {
  const std::string image = SmallImage();
  // Header: magic(4) version(4) n_tensors(8) n_kv(8).
  for (uint64_t huge : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1000000}}) {
    auto a = GgufFile::FromBytes(Patch64(image, 8, huge));
    EXPECT_EQ(a.status().code(), StatusCode::kCorruption) << a.status().ToString();
    auto b = GgufFile::FromBytes(Patch64(image, 16, huge));
    EXPECT_EQ(b.status().code(), StatusCode::kCorruption) << b.status().ToString();
    // First key's string length.
    auto c = GgufFile::FromBytes(Patch64(image, 24, huge));
    EXPECT_EQ(c.status().code(), StatusCode::kCorruption) << c.status().ToString();
  }
  // Find the "strs" array count and make it lie.
  const size_t strs = image.find("strs");
  ASSERT_NE(strs, std::string::npos);
  const size_t count_at = strs + 4 + 4 + 4;  // key, value type, element type
  auto d = GgufFile::FromBytes(Patch64(image, count_at, uint64_t{1} << 61));
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << d.status().ToString();
  // A tensor offset beyond the data section.
  const size_t t1 = image.find("t1", strs);
  ASSERT_NE(t1, std::string::npos);
  const size_t off_at = t1 + 2 + 4 + 16 + 4;  // name, n_dims, 2 dims, type
  auto e = GgufFile::FromBytes(Patch64(image, off_at, 1u << 20));
  EXPECT_EQ(e.status().code(), StatusCode::kCorruption) << e.status().ToString();
  // A dimension that makes the tensor larger than the file.
  auto g = GgufFile::FromBytes(Patch64(image, t1 + 2 + 4 + 8, 1u << 30));
  EXPECT_EQ(g.status().code(), StatusCode::kCorruption) << g.status().ToString();
  // Unsupported tensor type.
  std::string bad_type = image;
  const uint32_t q5 = 6;
  std::memcpy(bad_type.data() + t1 + 2 + 4 + 16, &q5, 4);
  EXPECT_EQ(GgufFile::FromBytes(bad_type).status().code(), StatusCode::kUnimplemented);
  // Bad magic, bad version.
  std::string bad_magic = image;
  bad_magic[0] = 'X';
  EXPECT_EQ(GgufFile::FromBytes(bad_magic).status().code(), StatusCode::kCorruption);
  std::string bad_version = image;
  bad_version[4] = 9;
  EXPECT_EQ(GgufFile::FromBytes(bad_version).status().code(), StatusCode::kUnimplemented);
}

// Random byte flips in the header, metadata and tensor infos: every image either
// parses (then every tensor lies inside the image) or gives an error; nothing
// crashes (run under ASan/UBSan to make that strict). Deterministic seed.
TEST(GgufTest, RandomCorruptionNeverCrashes) {
  const std::string image = SmallImage();
  const size_t header_end = image.find("t1") + 40;  // up to the tensor infos
  std::mt19937_64 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bad[rng() % header_end] = static_cast<char>(rng() & 0xFF);
    }
    auto file = GgufFile::FromBytes(bad);
    if (!file.ok()) {
      ++rejected;
      EXPECT_FALSE(file.status().message().empty());
      continue;
    }
    for (const GgufTensorInfo& t : (*file)->tensors()) {
      EXPECT_NE(t.data, nullptr);
      EXPECT_LE(t.size_bytes, (*file)->file_size());
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(GgufTest, OpenReportsFileSystemErrors) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/model.gguf").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(GgufFile::Open("/tmp").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sinew::model
