#pragma once
// Test hooks: the device side of the FP8 KV codec (kv_fp8.cuh) run over host arrays, so host
// tests (compiled without nvcc) can compare it with core/fp8.h bit for bit. Synchronous, on
// the default stream; not for production paths.
#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

// For each code: as_half[i] = the e4m3 value widened through half (the hardware decode),
// as_bf16[i] = bf16(value * s) as the attention kernels widen cache entries.
void kv_fp8_check_decode(const uint8_t* codes, size_t n, float s, float* as_half, float* as_bf16);

// q[i] = kv_fp8_encode(x[i], inv[i]).
void kv_fp8_check_encode(const float* x, const float* inv, size_t n, uint8_t* q);

// inv[i] = kv_fp8_inv_scale(amax[i]), scale[i] = kv_fp8_scale(amax[i]).
void kv_fp8_check_scales(const float* amax, size_t n, float* inv, float* scale);

}  // namespace tandem::cuda
