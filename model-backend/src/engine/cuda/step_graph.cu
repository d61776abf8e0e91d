#include <algorithm>
#include <cstring>

#include "cuda/cuda_status.cuh"
#include "cuda/step_graph.cuh"

namespace sinew::model::cuda {
namespace {

constexpr int kMaxCaptureFailures = 3;

uint64_t Fnv(std::initializer_list<uint64_t> values) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : values) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

StepGraphs::~StepGraphs() {
  DropAll();
  if (launched_ != nullptr) cudaEventDestroy(launched_);
  if (host_arena_ != nullptr) cudaFreeHost(host_arena_);
  if (device_arena_ != nullptr) cudaFree(device_arena_);
}

void StepGraphs::Drop(Graph& g) {
  if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
  g.ops.clear();
  g.uploads.clear();
}

void StepGraphs::DropAll() {
  for (auto& [key, g] : graphs_) Drop(g);
}

Status StepGraphs::EnsureArena() {
  if (arena_needed_ > arena_bytes_) {
    // Every graph copies into the old arena: they go with it.
    DropAll();
    if (host_arena_ != nullptr) cudaFreeHost(host_arena_);
    if (device_arena_ != nullptr) cudaFree(device_arena_);
    host_arena_ = nullptr;
    device_arena_ = nullptr;
    arena_bytes_ = 2 * arena_needed_;
    arena_needed_ = 0;
  }
  if (host_arena_ == nullptr) {
    void* p = nullptr;
    SINEW_RETURN_IF_ERROR(CudaStatus("cudaHostAlloc (step graph arena)",
                                     cudaHostAlloc(&p, arena_bytes_, cudaHostAllocDefault)));
    host_arena_ = static_cast<uint8_t*>(p);
  }
  if (device_arena_ == nullptr) {
    void* p = nullptr;
    SINEW_RETURN_IF_ERROR(
        CudaStatus("cudaMalloc (step graph arena)", cudaMalloc(&p, arena_bytes_)));
    device_arena_ = static_cast<uint8_t*>(p);
  }
  return Status::Ok();
}

Status StepGraphs::WaitForLastLaunch() {
  if (!launch_pending_) return Status::Ok();
  launch_pending_ = false;
  return CudaStatus("cudaEventSynchronize (last step graph)", cudaEventSynchronize(launched_));
}

void StepGraphs::Begin(uint64_t key) {
  mode_ = Mode::kDirect;
  current_ = &graphs_[key];
  Graph& g = *current_;
  op_index_ = 0;
  upload_index_ = 0;
  mismatch_ = false;
  for (SlotLast& l : last_) l.index = -1;
  if (g.failures >= kMaxCaptureFailures) return;
  if (g.exec != nullptr) {
    // A failed wait leaves the step to run directly (the error comes back at its ops).
    if (WaitForLastLaunch().ok()) mode_ = Mode::kFill;
    return;
  }
  if (!g.warmed) {  // first sight: run directly, so that scratch grows outside a capture
    g.warmed = true;
    return;
  }
  if (!WaitForLastLaunch().ok() || !EnsureArena().ok() ||
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    ++g.failures;
    return;
  }
  g.ops.clear();
  g.uploads.clear();
  arena_used_ = 0;
  mode_ = Mode::kCapture;
}

Result<const void*> StepGraphs::Upload(const void* data, size_t bytes, int slot) {
  SlotLast& last = last_[static_cast<size_t>(slot)];
  if (last.index >= 0 && last.bytes.size() == bytes &&
      std::memcmp(last.bytes.data(), data, bytes) == 0) {
    return static_cast<const void*>(device_arena_ +
                                    current_->uploads[static_cast<size_t>(last.index)].offset);
  }
  const int index = static_cast<int>(upload_index_++);
  size_t offset = 0;
  if (mode_ == Mode::kCapture) {
    // Room to grow: block tables get longer as their sequences do.
    const size_t capacity = (std::max<size_t>(2 * bytes, 256) + 255) / 256 * 256;
    if (arena_used_ + capacity > arena_bytes_) {
      arena_needed_ = std::max(arena_needed_, arena_used_ + capacity);
      return Status::ResourceExhausted("step graph arena full");
    }
    offset = arena_used_;
    arena_used_ += capacity;
    std::memcpy(host_arena_ + offset, data, bytes);
    SINEW_CUDA_RETURN(cudaMemcpyAsync(device_arena_ + offset, host_arena_ + offset, capacity,
                                      cudaMemcpyHostToDevice, stream_));
    current_->uploads.push_back({offset, capacity, slot});
  } else {
    const std::vector<UploadRec>& ups = current_->uploads;
    if (static_cast<size_t>(index) >= ups.size() || ups[static_cast<size_t>(index)].slot != slot ||
        ups[static_cast<size_t>(index)].capacity < bytes) {
      mismatch_ = true;
      return static_cast<const void*>(device_arena_);  // never launched: the step reruns
    }
    offset = ups[static_cast<size_t>(index)].offset;
    std::memcpy(host_arena_ + offset, data, bytes);
  }
  last.index = index;
  last.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  return static_cast<const void*>(device_arena_ + offset);
}

bool StepGraphs::Launch(std::initializer_list<uint64_t> signature) {
  if (mode_ == Mode::kDirect) return true;
  const uint64_t sig = Fnv(signature);
  if (mode_ == Mode::kCapture) {
    current_->ops.push_back(sig);
    return true;
  }
  if (op_index_ >= current_->ops.size() || current_->ops[op_index_] != sig) mismatch_ = true;
  ++op_index_;
  return false;
}

Result<bool> StepGraphs::End(const Status& ops) {
  const Mode mode = mode_;
  mode_ = Mode::kDirect;
  if (current_ == nullptr || mode == Mode::kDirect) return true;
  Graph& g = *current_;
  current_ = nullptr;
  if (mode == Mode::kCapture) {
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    cudaError_t made = cudaErrorUnknown;
    if (ops.ok() && ended == cudaSuccess && graph != nullptr) {
      made = cudaGraphInstantiate(&g.exec, graph, 0);
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      cudaGetLastError();
      g.exec = nullptr;
      g.ops.clear();
      g.uploads.clear();
      ++g.failures;
      return false;  // nothing ran: the caller runs the step directly
    }
    ++counts_.captures;
  } else if (!ops.ok() || mismatch_ || op_index_ != g.ops.size() ||
             upload_index_ != g.uploads.size()) {
    Drop(g);  // captured again at its next step
    ++counts_.misses;
    return false;
  } else {
    ++counts_.replays;
  }
  SINEW_CUDA_RETURN(cudaGraphLaunch(g.exec, stream_));
  if (launched_ == nullptr) {
    SINEW_CUDA_RETURN(cudaEventCreateWithFlags(&launched_, cudaEventDisableTiming));
  }
  SINEW_CUDA_RETURN(cudaEventRecord(launched_, stream_));
  launch_pending_ = true;
  return true;
}

}  // namespace sinew::model::cuda
