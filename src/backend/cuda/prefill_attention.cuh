#pragma once
// Causal attention for any mix of prefill chunks and decodes, reading K/V from the paged cache
// (flash-attention 2 style, bf16 tensor cores through mma.sync, sm_80+; on sm_90a the common
// case runs on warpgroup MMA instead, see PrefillShape). New tokens' K/V are
// written to the cache first, so a chunk continuing a prefix (chunked prefill, prefix-cache
// hit) attends over the cached tokens and its own in one pass.
//
//   qkv: row t at qkv + t * q_stride; q heads [Hq, hd] at the start of the row
//   positions [T]: query row t attends to keys 0..positions[t] of its sequence
//   tiles: work items of up to kPrefillTileRows consecutive rows of one sequence
//          (make_prefill_tiles)
//   out: row t at out + t * out_stride, [Hq, hd] bf16
//
// GQA: one block serves one KV head for the whole group of Hq / Hkv query heads that share it,
// so each K/V tile it stages in shared memory feeds 64 to 256 (query row, head) pairs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/decode_attention.cuh"

namespace tandem::cuda {

constexpr int kPrefillTileRows = 128;

// Work items {seq, first row, rows, 0} covering rows [query_start[s], query_start[s+1]) of
// every sequence in tiles of <= kPrefillTileRows rows; the tiles with the most keys come first.
std::vector<int32_t> make_prefill_tiles(const int32_t* query_start, const int32_t* positions,
                                        int S);

// Block shapes: warps x query rows (x heads) per warp of the mma.sync kernel, or kWgmma, the
// warpgroup-MMA kernel (prefill_attention_wgmma.cuh: sm_90a, head_dim 128, bf16 cache). kAuto
// picks from the amount of work (or TANDEM_PREFILL_SHAPE=1..5 in the environment, for
// benchmarks); tests force each one. The 32-row shapes need 16-byte aligned q rows (else they
// fall back to kW8R16); kWgmma falls back to the automatic choice where it does not fit.
enum class PrefillShape : int {
  kAuto = 0,
  kW4R16 = 1,
  kW8R16 = 2,
  kW4R32 = 3,
  kW8R32 = 4,
  kWgmma = 5
};

// hd in {16, 32, 64, 128}. tiles: device copy of make_prefill_tiles' output (4 ints a tile).
void prefill_attention(const __nv_bfloat16* qkv, int q_stride, const int32_t* positions,
                       const int32_t* tiles, int num_tiles, PagedKv kv, __nv_bfloat16* out,
                       int out_stride, int Hq, int Hkv, int hd, float scale, cudaStream_t stream,
                       PrefillShape shape = PrefillShape::kAuto);

}  // namespace tandem::cuda
