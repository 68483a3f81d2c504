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

// Log-sum-exp merge of NW warps' partial results for query head g (of at most 8 in a
// group), output dim d: sm_m/sm_l [NW][8] running max (log2 domain) and sum, sm_o [NW][8][ld]
// unnormalised outputs. Gives the merged max M, sum L and output O.
template <int NW>
__device__ __forceinline__ void merge_warp_partials(const float (&sm_m)[NW][8],
                                                    const float (&sm_l)[NW][8],
                                                    const float* sm_o, int ld, int g, int d,
                                                    float& M, float& L, float& O) {
  M = -1e30f;
#pragma unroll
  for (int w = 0; w < NW; ++w) M = fmaxf(M, sm_m[w][g]);
  L = 0.0f;
  O = 0.0f;
#pragma unroll
  for (int w = 0; w < NW; ++w) {
    const float f = exp2f(sm_m[w][g] - M);
    L += sm_l[w][g] * f;
    O += sm_o[(w * 8 + g) * ld + d] * f;
  }
}

bool decode_attention_mma_supports(int hd, int group);

// `shape`: DecodeMma in decode_attention.cuh. part_o [S, Hq, splits, hd] and part_ml [S, Hq, splits, 2] as in decode_attention.cu;
// counters [S * Hkv] zero before the call, zero again after it.
void decode_attention_mma(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv,
                          bf16_t* out, int out_stride, int S, int Hq, int Hkv, int hd,
                          float scale_log2, int splits, float* part_o, float* part_ml,
                          int* counters, cudaStream_t stream);

// The same over an FP8 cache (kv.fp8(); decode_attention_mma_f8.cu), which the call above
// hands on to.
void decode_attention_mma_f8(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv,
                             bf16_t* out, int out_stride, int S, int Hq, int Hkv, int hd,
                             float scale_log2, int splits, float* part_o, float* part_ml,
                             int* counters, cudaStream_t stream);

}  // namespace tandem::cuda
