#pragma once
// Device-side tensor fills and conversions: random weights for synthetic models (built on
// the GPU, so a 14B benchmark needs no 30 GB file), constants, and bf16 -> fp32 logits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// x[i] = mean + std * u_i, u_i uniform with unit variance, from a counter-based hash of
// (seed, i): the same seed gives the same tensor on every GPU and launch shape.
void fill_random(__nv_bfloat16* x, size_t n, uint64_t seed, float mean, float std,
                 cudaStream_t stream);

void fill_constant(__nv_bfloat16* x, size_t n, float value, cudaStream_t stream);

// y[i] = float(x[i]).
void bf16_to_f32(const __nv_bfloat16* x, float* y, size_t n, cudaStream_t stream);

}  // namespace tandem::cuda
