#include "backend/cuda/tma_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "backend/cuda/check.cuh"

namespace tandem::cuda {

CUtensorMap tensor_map(const char* who, CUtensorMapDataType type, const void* base, int rank,
                       const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                       CUtensorMapSwizzle swizzle) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) cuda_fail(who, "no cuTensorMapEncodeTiled in the driver", __FILE__, __LINE__);
  if (rank < 2 || rank > 5) cuda_fail(who, "tensor map rank out of range", __FILE__, __LINE__);
  cuuint64_t d[5], s[4];
  cuuint32_t b[5], e[5];
  for (int i = 0; i < rank; ++i) {
    d[i] = cuuint64_t(dims[i]);
    b[i] = cuuint32_t(box[i]);
    e[i] = 1;
    if (i > 0) s[i - 1] = cuuint64_t(strides[i - 1]);
  }
  CUtensorMap m;
  const CUresult r = encode(&m, type, cuuint32_t(rank), const_cast<void*>(base), d, s, b, e,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) cuda_fail(who, "cuTensorMapEncodeTiled failed", __FILE__, __LINE__);
  return m;
}

}  // namespace tandem::cuda
