#pragma once
// Which cache rows a thread of a tensor-core decode attention block copies (internal: include
// from .cu files only). A block streams the keys [t0, t1) of one sequence in tiles of kTile
// keys; each thread copies KPT of each tile's keys, kStep apart. A key's row needs its
// block-table entry, a global load: fetched one tile ahead, so the copies of a tile never
// wait for it (waiting there stalled each warp for an L2 round trip every tile).
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_attention_mma.cuh"
#include "backend/cuda/mma.cuh"

namespace tandem::cuda {

// A tensor-core decode block's place in its grid (Hkv, S, splits): KV head kvh of sequence s,
// the keys [t0, t1) of split `split` (eff splits are used, so a block with split >= eff has
// nothing to do) in ntiles tiles of `tile` keys, and the lane's mma fragment row qd and
// column pair qm. G query heads share the KV head.
struct DecodeMmaBlock {
  int kvh, s, split, G, warp, lane, qd, qm, eff, t0, t1, ntiles;
};
__device__ __forceinline__ DecodeMmaBlock decode_mma_block(const int32_t* ctx_lens, int Hq, int Hkv,
                                                           int splits, int tile) {
  DecodeMmaBlock b;
  b.kvh = blockIdx.x, b.s = blockIdx.y, b.split = blockIdx.z;
  b.G = Hq / Hkv;
  b.warp = threadIdx.x >> 5, b.lane = threadIdx.x & 31;
  b.qd = b.lane >> 2, b.qm = b.lane & 3;
  const DecodeKeyRange r = decode_key_range(ctx_lens[b.s], splits, b.split);
  b.eff = r.eff, b.t0 = r.t0, b.t1 = r.t1;
  b.ntiles = r.t1 > r.t0 ? (r.t1 - r.t0 + tile - 1) / tile : 0;
  return b;
}

template <int kTile, int kStep>
struct DecodeKeyRows {
  static constexpr int KPT = kTile / kStep;
  static_assert(kTile % kStep == 0, "whole keys a thread");
  const int32_t* bt;  // this sequence's block table
  int t0, t1, bs, bs_shift, first;
  bool pow2;
  int32_t entry[KPT];  // block-table entries of this thread's keys in the fetched tile

  __device__ __forceinline__ DecodeKeyRows(const int32_t* bt_, int t0_, int t1_, int bs_,
                                           int first_) {
    bt = bt_;
    t0 = t0_;
    t1 = t1_;
    bs = bs_;
    bs_shift = __ffs(bs_) - 1;
    first = first_;
    pow2 = (bs_ & (bs_ - 1)) == 0;
  }

  __device__ __forceinline__ int token(int j, int i) const {
    return t0 + j * kTile + first + i * kStep;
  }

  // Loads the entries of tile j (nothing past t1).
  __device__ __forceinline__ void fetch(int j) {
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
      const int tok = token(j, i);
      entry[i] = tok < t1 ? __ldg(bt + (pow2 ? tok >> bs_shift : tok / bs)) : 0;
    }
  }

  // Fetches tile 0's rows and starts the copies of the first ST - 1 tiles, one cp.async group
  // each (empty past ntiles); load_tile(j, stage) issues tile j's copies and fetches j + 1.
  // Only the first `ready` tiles may be copied before the grid dependency wait (PDL): their
  // keys were cached by earlier steps, while q and the step's own new key come from the
  // kernel before. The wait comes after them, so every thread has passed it on return.
  template <int ST, class Load>
  __device__ __forceinline__ void start(int ntiles, int ready, Load&& load_tile) {
    fetch(0);
#pragma unroll
    for (int st = 0; st < ST - 1; ++st) {
      if (st == ready) grid_dependency_wait();
      if (st < ntiles) load_tile(st, st);
      cp_async_commit();
    }
    if (ready >= ST - 1) grid_dependency_wait();
  }

  // Cache slot of key i of the fetched tile j, or -1 past t1. Block sizes are powers of two in
  // practice: a shift and a mask there (a division a key cost more issue slots than the math).
  __device__ __forceinline__ int slot(int j, int i) const {
    const int tok = token(j, i);
    if (tok >= t1) return -1;
    return entry[i] * bs + (pow2 ? tok & (bs - 1) : tok % bs);
  }
};

}  // namespace tandem::cuda
