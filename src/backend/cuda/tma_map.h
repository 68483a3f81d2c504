#pragma once
// Host side of the tensor-memory-accelerator copies (tma.cuh): the tensor maps that
// cp.async.bulk.tensor reads, built by the driver's cuTensorMapEncodeTiled, which the runtime
// finds for us (nothing more is linked).
#include <cuda.h>

#include <cstdint>

namespace tandem::cuda {

// A bf16 tensor of `rank` (2..5) dimensions at `base`: dims[0] elements contiguous, dimension
// i > 0 strides[i - 1] bytes apart; copied in boxes of box[] elements with the 128-byte
// swizzle (box[0] * 2 must be 128), elements past the end read as zeros. Fails (cuda_fail,
// naming `who`) where the driver has no TMA or refuses the shape.
CUtensorMap bf16_tensor_map(const char* who, const void* base, int rank, const uint64_t* dims,
                            const uint64_t* strides, const uint32_t* box);

}  // namespace tandem::cuda
