#pragma once
// The tensor-core decode attention kernel behind decode_attention() (internal: include from
// .cu files only). It covers head_dim 64 and 128 with up to 8 query heads per KV head; the
// CUDA-core kernel in decode_attention.cu covers the other shapes.
#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_attention.cuh"

namespace tandem::cuda {

constexpr int kDecodeMinSplitTokens = 64;  // a split covers at least this many keys

// Splits a sequence of `ctx` cached tokens really uses out of `splits` (blocks past it exit).
__host__ __device__ inline int decode_effective_splits(int ctx, int splits) {
  const int by_len = (ctx + kDecodeMinSplitTokens - 1) / kDecodeMinSplitTokens;
  return by_len < 1 ? 1 : (splits < by_len ? splits : by_len);
}

bool decode_attention_mma_supports(int hd, int group);

// part_o [S, Hq, splits, hd] and part_ml [S, Hq, splits, 2] as in decode_attention.cu;
// counters [S * Hkv] zero before the call, zero again after it.
void decode_attention_mma(const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out, int out_stride,
                          int S, int Hq, int Hkv, int hd, float scale_log2, int splits,
                          float* part_o, float* part_ml, int* counters, cudaStream_t stream);

}  // namespace tandem::cuda
