// The CUDA backend's memory: the state its buffers and ops share (Context) and
// BackendMemory on a device (cudaMalloc, never managed memory; host copies
// through a pinned staging buffer unless the host side is page-locked).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <optional>

#include "cuda/cuda_status.cuh"
#include "sinew/model/backend.h"

namespace sinew::model::cuda {

// The state a backend's buffers and ops share: device, stream, pinned staging.
struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::mutex staging_mutex;
  void* staging = nullptr;  // pinned host memory
  size_t staging_bytes = 0;
  void* cublas_workspace = nullptr;  // set up front, so that cuBLAS can run in a captured step

  ~Context() {
    cudaSetDevice(device);
    if (staging != nullptr) cudaFreeHost(staging);
    if (cublas_workspace != nullptr) cudaFree(cublas_workspace);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  Status Use() const { return CudaStatus("cudaSetDevice", cudaSetDevice(device)); }
};

constexpr size_t kStagingBytes = size_t{32} << 20;

class DeviceMemory final : public BackendMemory {
 public:
  explicit DeviceMemory(Context& ctx) : ctx_(ctx) {}

  Result<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override;
  Result<std::unique_ptr<BackendBuffer>> WrapHost(const void* data, size_t bytes) override;
  Result<std::unique_ptr<BackendBuffer>> AllocateHost(size_t bytes) override;
  std::optional<DeviceMemoryInfo> DeviceBytes() const override;

 private:
  Context& ctx_;
};

}  // namespace sinew::model::cuda
