#pragma once
// Prefill attention on Hopper's warpgroup MMA (sm_90a): the head_dim-128 case of
// prefill_attention.cuh (same arguments, same results), with K/V tiles copied by TMA straight
// from the paged cache; an FP8 cache's codes are widened in shared memory. prefill_attention()
// sends work here where it fits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/decode_attention.cuh"

namespace tandem::cuda {

// Whether a call can run on this kernel: sm_90a code on this GPU, head_dim 128, the cache's
// slot count known (kv.slots), block size 16, 32 or 64, q rows and cache 16-byte aligned; an
// FP8 cache also needs 4 or 8 KV heads (its scale rows are copied whole).
bool prefill_wgmma_fits(const void* qkv, int q_stride, const PagedKv& kv, int hd, int Hkv);

// Launches only what prefill_wgmma_fits accepted. scale_log2 = scale * log2(e).
void prefill_attention_wgmma(const __nv_bfloat16* qkv, int q_stride, const int32_t* positions,
                             const int32_t* tiles, int num_tiles, const PagedKv& kv,
                             __nv_bfloat16* out, int out_stride, int G, int Hkv, float scale_log2,
                             cudaStream_t stream);

}  // namespace tandem::cuda
