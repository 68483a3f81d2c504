#pragma once
// Y[T, N] = X[T, K] · W[N, K]^T with fp32 activations and accumulation, the weight read in
// its stored dtype (bf16, f16 or f32) and widened in registers: no fp32 copy of the model.
// Decode (T = 1) is a GEMV bound by the speed weights stream from memory; prefill reuses
// each block of weight rows for 4 rows of X from the L1 cache.
#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace tandem::cpu {

enum class WType { kBF16, kF16, kF32 };

struct WeightRef {
  const void* data = nullptr;  // [N, K] row-major
  WType type = WType::kBF16;
  int64_t n = 0, k = 0;
};

// x: [t, w.k] with row stride ldx; y: [t, w.n] with row stride ldy (floats). y is
// overwritten, or accumulated into when `accumulate` (y += X·W^T, for residual adds).
void matmul(const float* x, int64_t t, int64_t ldx, const WeightRef& w, float* y, int64_t ldy,
            ThreadPool& pool, bool accumulate = false);

// One row of a weight as fp32: out[0, w.k).
void weight_row(const WeightRef& w, int64_t row, float* out);

}  // namespace tandem::cpu
