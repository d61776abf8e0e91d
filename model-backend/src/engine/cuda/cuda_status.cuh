// CUDA runtime errors as Status, naming the call that failed.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "sinew/status.h"

namespace sinew::model::cuda {

// Ok for cudaSuccess; ResourceExhausted for an allocation; Internal otherwise.
inline Status CudaStatus(const char* call, cudaError_t err) {
  if (err == cudaSuccess) return Status::Ok();
  const std::string what =
      std::string(call) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return Status::ResourceExhausted(what);
  return Status::Internal(what);
}

}  // namespace sinew::model::cuda

#define SINEW_CUDA_RETURN(call) \
  SINEW_RETURN_IF_ERROR(::sinew::model::cuda::CudaStatus(#call, (call)))
