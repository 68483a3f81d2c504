#pragma once
// FP8 KV cache on the device (internal: include from .cu files only). Each (token, KV head)
// vector of hd values is stored as hd e4m3 bytes plus one fp32 scale s = amax / 448, the
// rule of core/fp8.h (kv_fp8_quantize), which the host reference applies bit for bit.
// Prefill attention stages the bytes and scales in shared memory and widens them to bf16,
// bf16(q * s), before its bf16 tensor-core math; decode attention widens the codes to fp16
// in registers and applies the scales to scores and probabilities.
#include <cuda_fp8.h>

#include "backend/cuda/common.cuh"

namespace tandem::cuda {

constexpr float kKvFp8Max = 448.0f;

// 448 / amax, or 0 for an all-zero (or vanishing, < 1e-30) vector: its codes are then zero.
__device__ __forceinline__ float kv_fp8_inv_scale(float amax) {
  return amax >= 1e-30f ? __fdiv_rn(kKvFp8Max, amax) : 0.0f;
}
__device__ __forceinline__ float kv_fp8_scale(float amax) {
  return __fdiv_rn(amax, kKvFp8Max);
}
__device__ __forceinline__ uint8_t kv_fp8_encode(float x, float inv) {
  return uint8_t(__nv_cvt_float_to_fp8(__fmul_rn(x, inv), __NV_SATFINITE, __NV_E4M3));
}

// Two e4m3 codes (low byte first) to their exact fp16 values, packed low first.
__device__ __forceinline__ uint32_t kv_fp8x2_to_f16x2(uint32_t codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(codes & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

__device__ __forceinline__ float2 f16x2_to_float2(uint32_t h) {
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Two e4m3 codes (low byte first) to bf16(q * s) each, packed low first.
__device__ __forceinline__ uint32_t kv_fp8x2_to_bf16x2(uint16_t codes, float s) {
  const float2 f = f16x2_to_float2(kv_fp8x2_to_f16x2(codes));
  const __nv_bfloat162 b = __floats2bfloat162_rn(__fmul_rn(f.x, s), __fmul_rn(f.y, s));
  return *reinterpret_cast<const uint32_t*>(&b);
}

// 8 e4m3 codes (low byte first) to 8 bf16 values bf16(q * s), one 16-byte chunk.
__device__ __forceinline__ uint4 kv_fp8x8_to_bf16(uint2 q, float s) {
  return make_uint4(
      kv_fp8x2_to_bf16x2(uint16_t(q.x), s), kv_fp8x2_to_bf16x2(uint16_t(q.x >> 16), s),
      kv_fp8x2_to_bf16x2(uint16_t(q.y), s), kv_fp8x2_to_bf16x2(uint16_t(q.y >> 16), s));
}

// 8 e4m3 codes (a uint2) to 8 floats bf16(q * s): the values the tensor-core kernels read.
__device__ __forceinline__ void kv_fp8x8_to_float(const uint2& q, float s, float f[8]) {
  const uint32_t pairs[4] = {q.x, q.x >> 16, q.y, q.y >> 16};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = f16x2_to_float2(kv_fp8x2_to_f16x2(pairs[i]));
    f[2 * i] = rbf(__fmul_rn(v.x, s));
    f[2 * i + 1] = rbf(__fmul_rn(v.y, s));
  }
}

}  // namespace tandem::cuda
