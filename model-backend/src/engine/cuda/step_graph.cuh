// Step graphs: BackendOps::BeginStep/EndStep (backend.h) on CUDA. A step key
// seen for the first time runs directly (its scratch buffers grow to size);
// the second time its ops are captured into a CUDA graph; from then on the
// model's host code issues the same ops in a fill-only mode and the graph is
// launched once instead of every kernel.
//
// Host arrays (token ids, positions, block tables) cannot be captured as
// pageable copies, and change every step. In a graph mode each upload goes to
// a pinned host arena and a device arena at an offset fixed at capture (with
// room to grow to twice its size), and the graph holds the copy from one to
// the other: filling a step writes the new values into the pinned arena before
// the launch. Every op records a signature (its kernels' pointers and shapes);
// a fill whose signatures, uploads or sizes differ from the capture is a miss:
// the graph is dropped, EndStep returns false and the caller runs the step
// directly (the next time, it is captured again). Uploads of the same bytes to
// the same slot within a step share one copy, as Upload's shadow does outside.
//
// Not thread-safe: one per CudaOps, used from the thread that issues its ops.
// The caller may queue the next step before the last one has run (the
// serving scheduler's step overlap): a fill or capture, which writes the
// pinned arena, first waits for the last launched graph to finish (an event
// recorded after each launch), so that it never overwrites the arena under a
// running graph. The host's planning of the step comes before that wait, and
// the work queued after the last graph (the sampling) runs during it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "sinew/model/backend.h"
#include "sinew/status.h"

namespace sinew::model::cuda {

class StepGraphs {
 public:
  StepGraphs(int n_slots, cudaStream_t stream)
      : last_(static_cast<size_t>(n_slots)), stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Capturing or filling: uploads go through Upload below.
  bool active() const { return mode_ != Mode::kDirect; }
  void Begin(uint64_t key);
  // The device address of `bytes` bytes of host `data` for this step, in the
  // arena (graph modes only). `slot` is the kind of array (one per slot may be
  // shared within a step).
  Result<const void*> Upload(const void* data, size_t bytes, int slot);
  // Whether an op whose kernels take `signature` launches them now: true when
  // running directly or capturing, false when filling (the graph will).
  bool Launch(std::initializer_list<uint64_t> signature);
  // See BackendOps::EndStep.
  Result<bool> End(const Status& ops);
  BackendOps::StepGraphCounts counts() const { return counts_; }

 private:
  enum class Mode { kDirect, kCapture, kFill };
  struct UploadRec {
    size_t offset = 0;
    size_t capacity = 0;
    int slot = 0;
  };
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    std::vector<uint64_t> ops;       // signatures, in order
    std::vector<UploadRec> uploads;  // in order
    bool warmed = false;             // ran directly once
    int failures = 0;                // failed captures; at 3 the key runs directly for good
  };
  struct SlotLast {
    int index = -1;  // its last upload in this step, or -1
    std::vector<uint8_t> bytes;
  };

  Status EnsureArena();
  // Waits until the last launched graph has run (before the arena is written).
  Status WaitForLastLaunch();
  void DropAll();  // every graph (before the arena moves)
  void Drop(Graph& g);

  Mode mode_ = Mode::kDirect;
  Graph* current_ = nullptr;
  std::unordered_map<uint64_t, Graph> graphs_;
  size_t op_index_ = 0, upload_index_ = 0;
  bool mismatch_ = false;
  std::vector<SlotLast> last_;
  // The arenas: pinned host and device, arena_bytes_ each.
  uint8_t* host_arena_ = nullptr;
  uint8_t* device_arena_ = nullptr;
  size_t arena_bytes_ = size_t{4} << 20;
  size_t arena_used_ = 0;
  size_t arena_needed_ = 0;  // > arena_bytes_: a capture ran out
  cudaStream_t stream_;
  cudaEvent_t launched_ = nullptr;  // recorded after each graph launch
  bool launch_pending_ = false;     // launched_ was recorded and not yet waited for
  BackendOps::StepGraphCounts counts_;
};

}  // namespace sinew::model::cuda
