#pragma once
// Shared by the prefill attention kernels (internal: include from .cu files only).
#include <climits>
#include <cstdint>

namespace tandem::cuda {

// The work of one block: KV head `kvh` of the tile at `seq`'s rows [row0, row0 + M / G), and
// of its M (query row, head) pairs the chunk [m0, m0 + pairs a block). Blocks are numbered
// chunk fastest, then KV head, then tile (tiles: make_prefill_tiles' int4 items).
struct PrefillItem {
  int seq, row0, M, m0, kvh;
};
__device__ __forceinline__ PrefillItem prefill_item(const int4* tiles, int nchunk, int Hkv, int G,
                                                    int pairs_a_block) {
  const int chunk = blockIdx.x % nchunk, rest = blockIdx.x / nchunk;
  const int4 tile = tiles[rest / Hkv];
  return {tile.x, tile.y, tile.z * G, chunk * pairs_a_block, rest % Hkv};
}

// Positions of a thread's U (query row, head) pairs m_of(0 .. U-1) in a work item whose rows
// start at row0 with G heads a row (-1 for pairs at or past M), and across the warp the
// largest position and the smallest one of a pair that exists.
template <int U, class MOf>
__device__ __forceinline__ void prefill_pair_positions(const int32_t* positions, int row0, int M,
                                                       int G, MOf m_of, int (&p)[U], int& pmax,
                                                       int& pmin) {
  pmax = -1;
  pmin = INT_MAX;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int m = m_of(u);
    p[u] = m < M ? positions[row0 + m / G] : -1;
    pmax = max(pmax, p[u]);
    if (m < M) pmin = min(pmin, p[u]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    pmax = max(pmax, __shfl_xor_sync(0xffffffffu, pmax, o));
    pmin = min(pmin, __shfl_xor_sync(0xffffffffu, pmin, o));
  }
}

}  // namespace tandem::cuda
