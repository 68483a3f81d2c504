#pragma once
// Shared by the prefill attention kernels (internal: include from .cu files only).
#include <climits>
#include <cstdint>

namespace tandem::cuda {

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
