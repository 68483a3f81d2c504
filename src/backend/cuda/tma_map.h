#pragma once
// Host side of the tensor-memory-accelerator copies (tma.cuh): the tensor maps that
// cp.async.bulk.tensor reads, built by the driver's cuTensorMapEncodeTiled, which the runtime
// finds for us (nothing more is linked).
#include <cuda.h>

#include <cstdint>

namespace tandem::cuda {

// A tensor of `rank` (2..5) dimensions of `type` at `base`: dims[0] elements contiguous,
// dimension i > 0 strides[i - 1] bytes apart; copied in boxes of box[] elements with
// `swizzle` (SWIZZLE_128B needs 128-byte box rows), elements past the end read as zeros.
// Fails (cuda_fail, naming `who`) where the driver has no TMA or refuses the shape.
CUtensorMap tensor_map(const char* who, CUtensorMapDataType type, const void* base, int rank,
                       const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                       CUtensorMapSwizzle swizzle);

}  // namespace tandem::cuda
