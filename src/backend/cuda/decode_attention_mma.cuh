#pragma once
// The tensor-core decode attention kernel behind decode_attention() (internal: include from
// .cu files only). It covers head_dim 64 and 128 with up to 8 query heads per KV head; the
// CUDA-core kernel in decode_attention.cu covers the other shapes.
#include <climits>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/launch.cuh"

namespace tandem::cuda {

// A split covers at least this many keys (with decode_attention_splits' count: see there).
constexpr int kDecodeMinSplitTokens = 128;

// Splits a sequence of `ctx` cached tokens really uses out of `splits` (blocks past it exit).
__host__ __device__ inline int decode_effective_splits(int ctx, int splits) {
  const int by_len = (ctx + kDecodeMinSplitTokens - 1) / kDecodeMinSplitTokens;
  return by_len < 1 ? 1 : (splits < by_len ? splits : by_len);
}

// The keys [t0, t1) that split `split` of a sequence with `ctx` cached tokens covers, of
// `eff` effective splits (a block with split >= eff has nothing to do).
struct DecodeKeyRange {
  int eff, t0, t1;
};
__device__ inline DecodeKeyRange decode_key_range(int ctx, int splits, int split) {
  const int eff = decode_effective_splits(ctx, splits);
  const int per = (ctx + eff - 1) / eff;
  const int t0 = split * per;
  return {eff, t0, min(ctx, t0 + per)};
}

// Leading tile-key tiles of a split whose keys were all cached before this step: the step's
// new key (position ctx - 1) is written by the kernel before attention, so only these may be
// read before the grid dependency wait.
__device__ inline int decode_ready_tiles(const DecodeKeyRange& r, int ctx, int tile) {
  if (r.t1 <= ctx - 1) return INT_MAX;  // the split ends before the new key
  return ctx - 1 > r.t0 ? (ctx - 1 - r.t0) / tile : 0;
}

// Whether the bf16 tensor-core decode kernel is launched with PDL (pdl_enabled(), unless
// TANDEM_ATTN_PDL=0): it then copies its first cached tiles while the kernel before it
// (q/k-norm + RoPE) finishes. H200, same call: batch 1 / 8 +1.0 / +1.3%, b=64 +0.2%, b=256
// even, C=64 burst +0.9%. The FP8 kernel keeps a plain launch (its wait is then a no-op):
// with PDL its b=64 / 256 steps were 2.1 / 0.8% slower. Host code.
bool decode_attention_pdl();

// Log-sum-exp merge of NW warps' partial results for query head g (of at most 8 in a
// group), output dim d: sm_m/sm_l [NW][8] running max (log2 domain) and sum, sm_o [NW][8][ld]
// unnormalised outputs. Gives the merged max M, sum L and output O.
template <int NW>
__device__ __forceinline__ void merge_warp_partials(const float (&sm_m)[NW][8],
                                                    const float (&sm_l)[NW][8], const float* sm_o,
                                                    int ld, int g, int d, float& M, float& L,
                                                    float& O) {
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

// One warp tile's online-softmax step for row qd of a tensor-core decode kernel. sc[nt][e]
// (e < 2) holds this lane's raw scores of keys key0 + nt*8 + 2qm + e, which become
// probabilities: each times mul[nt][e] (to the log2 domain), keys at or past t1 masked, the
// running max m and this lane's sum l updated. Returns the factor for the old output.
__device__ __forceinline__ float decode_tile_softmax(float (&sc)[2][4], const float (&mul)[2][2],
                                                     int key0, int qm, int t1, float& m, float& l) {
  float mx = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool ok = key0 + nt * 8 + qm * 2 + e < t1;
      sc[nt][e] = ok ? sc[nt][e] * mul[nt][e] : -INFINITY;
      mx = fmaxf(mx, sc[nt][e]);
    }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float mn = fmaxf(m, mx);
  const float alpha = exp2f(m - mn);
  m = mn;
  float rs = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sc[nt][e] = exp2f(sc[nt][e] - mn);
      rs += sc[nt][e];
    }
  l = l * alpha + rs;
  return alpha;
}

// Launches one tensor-core decode kernel instance on its grid (Hkv, S, splits) with `threads`
// threads and `smem` bytes of dynamic shared memory, raising the kernel's limit on first use;
// with `pdl`, as a programmatic dependent launch.
template <auto Kernel>
void launch_decode_mma(int threads, int smem, const bf16_t* q, int q_stride, PagedKv kv,
                       bf16_t* out, int out_stride, int S, int Hq, int Hkv, float scale_log2,
                       int splits, float* part_o, float* part_ml, int* counters,
                       cudaStream_t stream, bool pdl) {
  static bool configured = false;  // per kernel instance; set once per process
  if (!configured) {
    TANDEM_CUDA_CHECK(
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  const dim3 grid{unsigned(Hkv), unsigned(S), unsigned(splits)};
  if (pdl)
    launch_pdl(Kernel, grid, dim3(unsigned(threads)), size_t(smem), stream, q, q_stride, kv, Hq,
               Hkv, scale_log2, splits, part_o, part_ml, counters, out, out_stride);
  else
    Kernel<<<grid, threads, smem, stream>>>(q, q_stride, kv, Hq, Hkv, scale_log2, splits, part_o,
                                            part_ml, counters, out, out_stride);
}

bool decode_attention_mma_supports(int hd, int group);

// Calls fn(std::integral_constant<int, HD>{}) for the head sizes the tensor-core kernels are
// built for (64, 128), then checks the launch; any other hd fails, naming `who`.
template <class Fn>
void decode_mma_for_head_dim(int hd, const char* who, Fn&& fn) {
  if (hd == 64)
    fn(std::integral_constant<int, 64>{});
  else if (hd == 128)
    fn(std::integral_constant<int, 128>{});
  else
    cuda_fail(who, "head_dim must be 64 or 128", __FILE__, __LINE__);
  TANDEM_CUDA_CHECK_LAUNCH();
}

// `shape`: DecodeMma in decode_attention.cuh. part_o [S, Hq, splits, hd] and part_ml [S, Hq,
// splits, 2] as in decode_attention.cu; counters [S * Hkv] zero before the call, zero again after
// it.
void decode_attention_mma(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out,
                          int out_stride, int S, int Hq, int Hkv, int hd, float scale_log2,
                          int splits, float* part_o, float* part_ml, int* counters,
                          cudaStream_t stream);

// The same over an FP8 cache (kv.fp8(); decode_attention_mma_f8.cu), which the call above
// hands on to.
void decode_attention_mma_f8(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv,
                             bf16_t* out, int out_stride, int S, int Hq, int Hkv, int hd,
                             float scale_log2, int splits, float* part_o, float* part_ml,
                             int* counters, cudaStream_t stream);

}  // namespace tandem::cuda
