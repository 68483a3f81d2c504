#pragma once
// Kernel launch with programmatic dependent launch (host code in .cu files). A kernel
// launched this way may begin while the previous kernel in the stream is still running
// (once that kernel's blocks have called launch_dependents()), so its launch latency hides
// behind the other's tail; it must call grid_dependency_wait() before it touches global
// memory that earlier kernels read or write. Without PDL (before sm_90, or TANDEM_PDL=0) it
// is an ordinary launch.
#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"

namespace tandem::cuda {

template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  TANDEM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace tandem::cuda
