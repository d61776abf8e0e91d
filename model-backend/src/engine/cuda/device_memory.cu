#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/device_memory.cuh"

namespace sinew::model::cuda {
namespace {

// Whether host memory at `p` is page-locked (AllocateHost), so that copies to
// and from it need no staging.
bool IsPinned(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // not an error to keep: plain host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

bool AllPinned(std::span<const BackendBuffer::HostCopy> copies) {
  return std::all_of(copies.begin(), copies.end(),
                     [](const BackendBuffer::HostCopy& c) { return IsPinned(c.host); });
}

class DeviceBuffer final : public BackendBuffer {
 public:
  DeviceBuffer(Context& ctx, void* data, size_t size) : ctx_(ctx), data_(data), size_(size) {}
  ~DeviceBuffer() override {
    cudaSetDevice(ctx_.device);
    cudaFree(data_);
  }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

  // Host -> device through the pinned staging buffer, in chunks.
  Status Write(size_t offset, const void* src, size_t n) override {
    SINEW_RETURN_IF_ERROR(CheckRange(offset, n, "write"));
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (IsPinned(src)) {
      SINEW_CUDA_RETURN(cudaMemcpyAsync(static_cast<uint8_t*>(data_) + offset, src, n,
                                        cudaMemcpyHostToDevice, ctx_.stream));
      SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
      return Status::Ok();
    }
    std::lock_guard<std::mutex> lock(ctx_.staging_mutex);
    for (size_t done = 0; done < n;) {
      const size_t chunk = std::min(n - done, ctx_.staging_bytes);
      // The previous chunk's copy must be done before the staging is reused.
      SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
      std::memcpy(ctx_.staging, static_cast<const uint8_t*>(src) + done, chunk);
      SINEW_CUDA_RETURN(cudaMemcpyAsync(static_cast<uint8_t*>(data_) + offset + done, ctx_.staging,
                                        chunk, cudaMemcpyHostToDevice, ctx_.stream));
      done += chunk;
    }
    SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    return Status::Ok();
  }

  // Into page-locked memory, every copy is queued and the stream waited for
  // once; otherwise one Write after another.
  Status WriteMany(std::span<const HostCopy> copies) override {
    if (!AllPinned(copies)) return BackendBuffer::WriteMany(copies);
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    for (const HostCopy& c : copies) {
      SINEW_RETURN_IF_ERROR(CheckRange(c.offset, c.n, "write"));
      SINEW_CUDA_RETURN(cudaMemcpyAsync(static_cast<uint8_t*>(data_) + c.offset, c.host, c.n,
                                        cudaMemcpyHostToDevice, ctx_.stream));
    }
    SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    return Status::Ok();
  }

  Status ReadMany(std::span<const HostCopy> copies) const override {
    if (!AllPinned(copies)) return BackendBuffer::ReadMany(copies);
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    for (const HostCopy& c : copies) {
      SINEW_RETURN_IF_ERROR(CheckRange(c.offset, c.n, "read"));
      SINEW_CUDA_RETURN(cudaMemcpyAsync(c.host, static_cast<const uint8_t*>(data_) + c.offset, c.n,
                                        cudaMemcpyDeviceToHost, ctx_.stream));
    }
    SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    return Status::Ok();
  }

  // Waits for the queued work, then device -> host through the staging buffer.
  Status Read(size_t offset, void* dst, size_t n) const override {
    SINEW_RETURN_IF_ERROR(CheckRange(offset, n, "read"));
    SINEW_RETURN_IF_ERROR(ctx_.Use());
    if (IsPinned(dst)) {
      SINEW_CUDA_RETURN(cudaMemcpyAsync(dst, static_cast<const uint8_t*>(data_) + offset, n,
                                        cudaMemcpyDeviceToHost, ctx_.stream));
      SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
      return Status::Ok();
    }
    std::lock_guard<std::mutex> lock(ctx_.staging_mutex);
    for (size_t done = 0; done < n;) {
      const size_t chunk = std::min(n - done, ctx_.staging_bytes);
      const uint8_t* src = static_cast<const uint8_t*>(data_) + offset + done;
      SINEW_CUDA_RETURN(
          cudaMemcpyAsync(ctx_.staging, src, chunk, cudaMemcpyDeviceToHost, ctx_.stream));
      SINEW_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
      std::memcpy(static_cast<uint8_t*>(dst) + done, ctx_.staging, chunk);
      done += chunk;
    }
    return Status::Ok();
  }

 private:
  Context& ctx_;
  void* data_;
  size_t size_;
};

// Page-locked host memory (cudaHostAlloc): the KV swap space.
class PinnedBuffer final : public HostMemoryBuffer {
 public:
  PinnedBuffer(void* data, size_t size) : HostMemoryBuffer(data, size) {}
  ~PinnedBuffer() override { cudaFreeHost(data()); }
};

}  // namespace

Result<std::unique_ptr<BackendBuffer>> DeviceMemory::Allocate(size_t bytes) {
  SINEW_RETURN_IF_ERROR(ctx_.Use());
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 256));
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return Status::ResourceExhausted(
        "cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(ctx_.device) +
        " failed: " + cudaGetErrorString(err) + " (" + std::to_string(free_bytes) + " of " +
        std::to_string(total_bytes) + " bytes free)");
  }
  SINEW_CUDA_RETURN(cudaMemsetAsync(p, 0, bytes, ctx_.stream));
  return std::unique_ptr<BackendBuffer>(std::make_unique<DeviceBuffer>(ctx_, p, bytes));
}

Result<std::unique_ptr<BackendBuffer>> DeviceMemory::WrapHost(const void*, size_t) {
  return Status::Unimplemented("the CUDA backend copies host memory (Allocate + Write)");
}

Result<std::unique_ptr<BackendBuffer>> DeviceMemory::AllocateHost(size_t bytes) {
  SINEW_RETURN_IF_ERROR(ctx_.Use());
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 256), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::ResourceExhausted("cudaHostAlloc of " + std::to_string(bytes) +
                                     " bytes failed: " + cudaGetErrorString(err));
  }
  return std::unique_ptr<BackendBuffer>(std::make_unique<PinnedBuffer>(p, bytes));
}

std::optional<BackendMemory::DeviceMemoryInfo> DeviceMemory::DeviceBytes() const {
  if (!ctx_.Use().ok()) return std::nullopt;
  DeviceMemoryInfo info;
  if (cudaMemGetInfo(&info.free_bytes, &info.total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return info;
}

}  // namespace sinew::model::cuda
