#pragma once
// The end both tensor-core decode attention kernels share (internal: include from .cu files
// only): merge the warps of a block, write the output or this split's partial, and let the
// last split of a (sequence, KV head) to finish merge every split's partial.
#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_attention_mma.cuh"

namespace tandem::cuda {

// Where a block's result goes. Split `split` of sequence s, KV head kvh (its G query heads),
// `eff` effective splits: part rows [S, Hq, splits] of hd fp32 (part_o) and (max, sum)
// (part_ml); counters [S * Hkv], zero between launches.
struct DecodeMmaOut {
  int s, kvh, G, Hq, Hkv, split, splits, eff;
  float* part_o;
  float* part_ml;
  int* counters;
  bf16_t* out;
  int out_stride;
};

// Row stride of the warps' outputs in shared memory: 4 floats of padding spread the rows of a
// warp's stores over the banks.
template <int HD>
constexpr int kDecodeMergeLd = HD + 4;

// Call with every thread of the block once each warp has stored rows [warp*8, warp*8+G) of
// sm_o ([NW][8][kDecodeMergeLd<HD>] unnormalised outputs) and sm_m / sm_l (running max, log2
// domain, and sum); no barrier is needed before the call.
template <int NW, int HD>
__device__ __forceinline__ void decode_mma_finish(const float (&sm_m)[NW][8],
                                                  const float (&sm_l)[NW][8], const float* sm_o,
                                                  int& sm_last, const DecodeMmaOut& r) {
  __syncthreads();
  const size_t row0 = (size_t(r.s) * r.Hq + size_t(r.kvh) * r.G) * r.splits;  // + g * splits
  for (int e = threadIdx.x; e < r.G * HD; e += blockDim.x) {
    const int g = e / HD, d = e % HD;
    float M, L, O;
    merge_warp_partials<NW>(sm_m, sm_l, sm_o, kDecodeMergeLd<HD>, g, d, M, L, O);
    if (r.eff == 1) {
      r.out[size_t(r.s) * r.out_stride + size_t(r.kvh * r.G + g) * HD + d] =
          __float2bfloat16(L > 0.0f ? O / L : 0.0f);
    } else {
      const size_t row = row0 + size_t(g) * r.splits + r.split;
      r.part_o[row * HD + d] = O;
      if (d == 0) {
        r.part_ml[row * 2] = M;
        r.part_ml[row * 2 + 1] = L;
      }
    }
  }
  if (r.eff == 1) return;

  // Last split of (s, kvh) to arrive merges every split's partial.
  __threadfence();
  __syncthreads();
  int* counter = r.counters + size_t(r.s) * r.Hkv + r.kvh;
  if (threadIdx.x == 0) sm_last = atomicAdd(counter, 1) == r.eff - 1;
  __syncthreads();
  if (!sm_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < r.G * HD; e += blockDim.x) {
    const int g = e / HD, d = e % HD;
    const size_t r0 = row0 + size_t(g) * r.splits;
    float M = -1e30f;
    for (int i = 0; i < r.eff; ++i) M = fmaxf(M, __ldcg(r.part_ml + (r0 + i) * 2));
    float L = 0.0f, O = 0.0f;
    for (int i = 0; i < r.eff; ++i) {
      const float f = exp2f(__ldcg(r.part_ml + (r0 + i) * 2) - M);
      L += __ldcg(r.part_ml + (r0 + i) * 2 + 1) * f;
      O += __ldcg(r.part_o + (r0 + i) * HD + d) * f;
    }
    r.out[size_t(r.s) * r.out_stride + size_t(r.kvh * r.G + g) * HD + d] =
        __float2bfloat16(L > 0.0f ? O / L : 0.0f);
  }
  if (threadIdx.x == 0) *counter = 0;  // ready for the next launch (graph replays too)
}

}  // namespace tandem::cuda
