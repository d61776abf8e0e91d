// Model::Load on a backend that behaves like a device: weights cannot be used
// in place (WrapHost is Unimplemented, so they are copied with Allocate +
// Write), and memory runs out. DeviceLikeBackend is a test double of a GPU
// backend's memory (there is no GPU here), wrapping the real CPU backend.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "model.h"
#include "random_model.h"
#include "sinew/model/backend.h"

namespace sinew::model {
namespace {

class LimitedMemory final : public BackendMemory {
 public:
  LimitedMemory(BackendMemory& real, size_t budget) : real_(real), budget_(budget), left_(budget) {}
  size_t used() const { return budget_ - left_; }
  Result<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override {
    if (bytes > left_) {
      return Status::ResourceExhausted("test double: allocation of " + std::to_string(bytes) +
                                       " bytes exceeds the " + std::to_string(left_) + " left");
    }
    left_ -= bytes;
    return real_.Allocate(bytes);
  }
  Result<std::unique_ptr<BackendBuffer>> WrapHost(const void*, size_t) override {
    return Status::Unimplemented("test double: no host memory in place");
  }
  Result<std::unique_ptr<BackendBuffer>> AllocateHost(size_t bytes) override {
    return real_.AllocateHost(bytes);
  }

 private:
  BackendMemory& real_;
  size_t budget_;
  size_t left_;
};

class DeviceLikeBackend final : public Backend {
 public:
  DeviceLikeBackend(std::unique_ptr<Backend> real, size_t budget)
      : real_(std::move(real)), memory_(real_->memory(), budget) {}
  std::string_view name() const override { return "device-like-double"; }
  std::string device() const override { return "double:0"; }
  BackendMemory& memory() override { return memory_; }
  BackendOps& ops() override { return real_->ops(); }
  size_t used() const { return memory_.used(); }

 private:
  std::unique_ptr<Backend> real_;
  LimitedMemory memory_;
};

// The logits of the last of `tokens`, run from position 0 in a one-block cache
// of 16 positions on `backend`.
Status LastLogits(Model& m, Backend& backend, const std::vector<int32_t>& tokens, float* out) {
  const HParams& hp = m.hparams();
  SINEW_ASSIGN_OR_RETURN(
      auto cache, KvCache::Create(backend, hp.n_layer, 1, 16, int64_t{hp.n_head_kv} * hp.head_dim,
                                  GgmlType::kF16, GgmlType::kF16));
  static constexpr int32_t kOneBlock[] = {0};
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.seqs.push_back(ForwardSeq{static_cast<int32_t>(tokens.size()), 0, kOneBlock, 1});
  return m.Forward(batch, *cache, /*batch_invariant=*/false, out);
}

std::string WriteModel() {
  const std::string path =
      ::testing::TempDir() + "/sinew_load_" + std::to_string(getpid()) + ".gguf";
  testing::RandomModelSpec spec;
  spec.weight_type = GgmlType::kQ8_0;
  EXPECT_TRUE(testing::WriteRandomModel(spec, path).ok());
  return path;
}

TEST(ModelLoadOnDevice, CopiedWeightsGiveTheSameLogitsAsMappedOnes) {
  const std::string path = WriteModel();
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto cpu = CreateCpuBackend(CpuBackendOptions{1, "scalar"});
  ASSERT_TRUE(cpu.ok());
  DeviceLikeBackend device(std::move(cpu).value(), size_t{1} << 30);
  auto copied = Model::Load(**file, device);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  auto mapped_backend = CreateCpuBackend(CpuBackendOptions{1, "scalar"});
  ASSERT_TRUE(mapped_backend.ok());
  auto mapped = Model::Load(**file, **mapped_backend);
  ASSERT_TRUE(mapped.ok());
  const HParams& hp = (*mapped)->hparams();
  const std::vector<int32_t> tokens = {1, 5, 9};
  std::vector<float> a(static_cast<size_t>(hp.n_vocab)), b(a.size());
  auto run = [&](Model& m, Backend& backend, std::vector<float>& out) {
    const Status status = LastLogits(m, backend, tokens, out.data());
    ASSERT_TRUE(status.ok()) << status.ToString();
  };
  run(**copied, device, a);
  run(**mapped, **mapped_backend, b);
  EXPECT_EQ(a, b);
  std::remove(path.c_str());
}

TEST(ModelLoadOnDevice, TooLittleMemoryNamesTheBytesNeeded) {
  const std::string path = WriteModel();
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  uint64_t need = 0;
  for (const GgufTensorInfo& t : (*file)->tensors()) need += t.size_bytes;
  auto cpu = CreateCpuBackend(CpuBackendOptions{1, "scalar"});
  ASSERT_TRUE(cpu.ok());
  DeviceLikeBackend device(std::move(cpu).value(), need / 2);
  auto model = Model::Load(**file, device);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(model.status().message().find(std::to_string(need) + " bytes of tensors onto double:0"),
            std::string::npos)
      << model.status().ToString();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sinew::model
