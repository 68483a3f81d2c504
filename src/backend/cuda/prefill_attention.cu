#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_attention.cuh"
#include "backend/cuda/prefill_attention_wgmma.cuh"
#include "backend/cuda/prefill_rows.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBcR32 = 32;  // keys per K/V tile of the 32-row shapes (16-row ones: 64)

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One block = one KV head of one tile, for a chunk of BM = 16 * MT * NW (query row, head)
// pairs. The tile's rows x G query heads (G = Hq / Hkv) are flattened row-major, m = r * G + g,
// and chunk c takes m in [c * BM, c * BM + BM); warp w owns m in [16 MT w, 16 MT (w + 1)) of
// the chunk as MT m16 tiles, so every K/V tile staged in shared memory serves BM query rows,
// and with MT = 2 every K/V fragment a warp loads feeds two mma (half the shared-memory
// reads per mma). Fragment layouts are those of mma.m16n8k16: lane = 4 * qd + qm holds m-rows
// qd and qd + 8 of each m16 tile, columns 2 qm, 2 qm + 1 (and + 8). Row u = 2 * mt + half of
// a lane is m16 tile mt's row qd + 8 * half. Q lives in registers (MT = 1) or in shared memory
// (MT = 2: registers go to the second tile's S and O). S = Q K^T and O += P V run on tensor
// cores; the softmax is fp32 with a running max per row (exp2 domain, the scale folded into
// log2 e). K and V tiles of BC keys stream through a two-stage cp.async pipeline in separate
// groups: tile j + 1's K and V load during tile j's softmax and P V, and V has until the end
// of tile j + 1's S. Only key tiles that reach past a row's position (the diagonal) or the
// context end are masked; a warp whose rows all end before a key tile skips its math.
// Grid: one dimension, chunk fastest, then KV head, then tile (longest first): the blocks
// running together read the same key range of one sequence (L2 reuse), and the short tiles
// come last (load balance).
//
// F8 (FP8 cache, kv_fp8.cuh): cp.async stages tile j + 1's e4m3 bytes and per-key scales
// while tile j's math runs; at the top of tile j + 1 every thread widens its share of the
// staged K and V to bf16(q * s) in the same padded bf16 layout (one stage each: the widened
// tile is only read between two barriers), and the math is unchanged. Two barriers a tile,
// as the bf16 path; the loads have a whole tile of math to land in. Keys past kend are
// zero-filled (codes and scale 0), so they read back as 0 like the bf16 ones.
template <int HD, int NW, int MT, int BC, bool F8>
__global__ void __launch_bounds__(NW * 32, NW == 4 ? 2 : 1)
    prefill_attn_kernel(const bf16_t* qkv, int q_stride, const int32_t* positions,
                        const int4* tiles, int nchunk, PagedKv kv, int G, int Hkv, float scale_log2,
                        bf16_t* out, int out_stride) {
  constexpr int NT = NW * 32, BM = NW * 16 * MT, U = 2 * MT;
  constexpr int LD = HD + 8;  // padded rows: conflict-free ldmatrix
  constexpr int CH = HD / 8;  // 16-byte bf16 chunks per key row (F8: 8-code units widened)
  constexpr int CP = F8 ? HD / 16 : CH;        // 16-byte chunks per cache row copied
  constexpr int KI = (BC * CP + NT - 1) / NT;  // chunks a thread copies per K or V tile
  constexpr int NS = F8 ? 1 : 2;               // bf16 K/V stages
  static_assert(BC % 16 == 0 && HD % 16 == 0, "tile shapes");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16_t* const Ks = reinterpret_cast<bf16_t*>(smem_raw);  // [NS][BC][LD]
  bf16_t* const Vs = Ks + NS * BC * LD;                    // [NS][BC][LD]
  bf16_t* const Qs = Vs + NS * BC * LD;                    // [BM][LD] when MT == 2
  // F8 staging after the bf16 area (16-byte aligned: LD * 2 is a multiple of 16).
  uint8_t* const K8 = reinterpret_cast<uint8_t*>(Qs + (MT == 2 ? BM * LD : 0));  // [BC][HD]
  uint8_t* const V8 = K8 + BC * HD;                                              // [BC][HD]
  float* const Ksc = reinterpret_cast<float*>(V8 + BC * HD);                     // [BC]
  float* const Vsc = Ksc + BC;                                                   // [BC]
  __shared__ int s_pmax;

  const PrefillItem item = prefill_item(tiles, nchunk, Hkv, G, BM);
  const int seq = item.seq, row0 = item.row0, M = item.M, m0 = item.m0, kvh = item.kvh;
  if (m0 >= M) return;  // the whole block: no barrier has been reached yet

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qd = lane >> 2, qm = lane & 3;
  // Row u of this lane is m-row m_of(u) of the tile: query row m / G, head kvh * G + m % G.
  auto m_of = [&](int u) { return m0 + warp * 16 * MT + (u >> 1) * 16 + qd + (u & 1) * 8; };
  int p[U];  // positions (-1: no row)
  int warp_pmax, warp_pmin;
  prefill_pair_positions(positions, row0, M, G, m_of, p, warp_pmax, warp_pmin);
  if (threadIdx.x == 0) s_pmax = -1;
  __syncthreads();
  if (lane == 0) atomicMax(&s_pmax, warp_pmax);
  __syncthreads();
  const int ctx = kv.ctx_lens[seq];
  const int kend = min(ctx, s_pmax + 1);  // keys [0, kend) are read by some row of the block
  const int ntiles = kend > 0 ? (kend + BC - 1) / BC : 0;

  uint32_t qa[MT == 1 ? HD / 16 : 1][4];  // Q fragments (MT == 1)
  if constexpr (MT == 1) {
    const int mlo = m_of(0), mhi = m_of(1);
    const bool v_lo = mlo < M, v_hi = mhi < M;
    const bf16_t* q_lo =
        v_lo ? qkv + size_t(row0 + mlo / G) * q_stride + size_t(kvh * G + mlo % G) * HD : qkv;
    const bf16_t* q_hi =
        v_hi ? qkv + size_t(row0 + mhi / G) * q_stride + size_t(kvh * G + mhi % G) * HD : qkv;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const int col = kk * 16 + qm * 2;
      qa[kk][0] = v_lo ? ld32(q_lo + col) : 0u;
      qa[kk][1] = v_hi ? ld32(q_hi + col) : 0u;
      qa[kk][2] = v_lo ? ld32(q_lo + col + 8) : 0u;
      qa[kk][3] = v_hi ? ld32(q_hi + col + 8) : 0u;
    }
  } else if (ntiles > 0) {
    // Q rows of the chunk into shared memory (zeros past M), in the first K group.
    for (int i = threadIdx.x; i < BM * CH; i += NT) {
      const int mr = i / CH, c = i % CH, m = m0 + mr;
      const bool ok = m < M;
      const bf16_t* g =
          ok ? qkv + size_t(row0 + m / G) * q_stride + size_t(kvh * G + m % G) * HD + c * 8 : qkv;
      cp_async16(Qs + mr * LD + c * 8, g, ok);
    }
  }

  float o[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
  float m_run[U], l[U];  // running max (exp2 domain; -1e30 until a row sees a key), sum
#pragma unroll
  for (int u = 0; u < U; ++u) {
    m_run[u] = -1e30f;
    l[u] = 0.0f;
  }

  // Cache slot of each chunk this thread copies for the tile in flight (-1: past kend, zero).
  const int32_t* bt = kv.block_tables + size_t(seq) * kv.max_blocks;
  const int bs = kv.block_size;
  const bool pow2 = (bs & (bs - 1)) == 0;  // block sizes are powers of two in practice
  const int bs_shift = __ffs(bs) - 1;
  int slot[KI];
  auto find_slots = [&](int kt) {
#pragma unroll
    for (int it = 0; it < KI; ++it) {
      const int i = threadIdx.x + it * NT;
      const int tok = kt + i / CP;
      slot[it] = -1;
      if (i < BC * CP && tok < kend)
        slot[it] = pow2 ? (bt[tok >> bs_shift] << bs_shift) | (tok & (bs - 1))
                        : bt[tok / bs] * bs + tok % bs;
    }
  };
  auto copy_tile = [&](bf16_t* dst, const bf16_t* src) {
#pragma unroll
    for (int it = 0; it < KI; ++it) {
      const int i = threadIdx.x + it * NT;
      if (i < BC * CH) {
        const int key = i / CH, c = i % CH;
        const bool ok = slot[it] >= 0;
        const bf16_t* g = ok ? src + (size_t(slot[it]) * Hkv + kvh) * HD + c * 8 : src;
        cp_async16(dst + key * LD + c * 8, g, ok);
      }
    }
  };
  // F8: codes of K and V into the staging rows, and the thread holding a row's first chunk
  // also copies its two scales.
  auto copy_tile_f8 = [&]() {
    const uint8_t* k8 = static_cast<const uint8_t*>(kv.k);
    const uint8_t* v8 = static_cast<const uint8_t*>(kv.v);
#pragma unroll
    for (int it = 0; it < KI; ++it) {
      const int i = threadIdx.x + it * NT;
      if (i < BC * CP) {
        const int key = i / CP, c = i % CP;
        const bool ok = slot[it] >= 0;
        // (slot, head) row: also the scale index. int: fewer registers than size_t (no
        // spill in the 4 x 32, hd 128 shape), and slots * Hkv < 2^31 for any real cache.
        const int row = ok ? slot[it] * Hkv + kvh : 0;
        cp_async16(K8 + key * HD + c * 16, k8 + size_t(row) * HD + c * 16, ok);
        cp_async16(V8 + key * HD + c * 16, v8 + size_t(row) * HD + c * 16, ok);
        if (c == 0) {
          cp_async4(Ksc + key, kv.k_scale + row, ok);
          cp_async4(Vsc + key, kv.v_scale + row, ok);
        }
      }
    }
  };
  // F8: staged codes -> bf16(q * s) tiles, 8 codes (one 16-byte bf16 chunk) a step: reads
  // and writes of a warp are then contiguous in shared memory.
  auto widen_tile = [&]() {
#pragma unroll
    for (int it = 0; it < (BC * CH + NT - 1) / NT; ++it) {
      const int i = threadIdx.x + it * NT;
      if (i < BC * CH) {
        const int key = i / CH, c = i % CH;
        *reinterpret_cast<uint4*>(Ks + key * LD + c * 8) =
            kv_fp8x8_to_bf16(*reinterpret_cast<const uint2*>(K8 + key * HD + c * 8), Ksc[key]);
        *reinterpret_cast<uint4*>(Vs + key * LD + c * 8) =
            kv_fp8x8_to_bf16(*reinterpret_cast<const uint2*>(V8 + key * HD + c * 8), Vsc[key]);
      }
    }
  };

  if (ntiles > 0) {
    find_slots(0);
    if constexpr (F8) {
      copy_tile_f8();
      cp_async_commit();  // (with Q when MT == 2)
    } else {
      copy_tile(Ks, static_cast<const bf16_t*>(kv.k));
      cp_async_commit();  // (with Q when MT == 2)
      copy_tile(Vs, static_cast<const bf16_t*>(kv.v));
      cp_async_commit();
    }
  }

  for (int j = 0; j < ntiles; ++j) {
    const int kt = j * BC;
    const bf16_t* Kb = Ks + (F8 ? 0 : (j & 1) * BC * LD);
    const bf16_t* Vb = Vs + (F8 ? 0 : (j & 1) * BC * LD);
    if constexpr (F8)
      cp_async_wait<0>();  // tile j's codes and scales (and Q) have landed
    else
      cp_async_wait<1>();  // pending at most: V_j -> K_j has landed
    __syncthreads();       // ... for every thread; tile j - 1 is no longer read by anyone
    const bool more = j + 1 < ntiles;
    if (more) find_slots(kt + BC);  // block-table loads overlap the S = Q K^T (F8: widening)
    if constexpr (F8) {
      widen_tile();
      __syncthreads();  // the bf16 tile is complete; the staging buffers are free
      if (more) {
        copy_tile_f8();  // tile j + 1, in flight during all the math of tile j
        cp_async_commit();
      }
    }
    const bool active = warp_pmax >= kt;  // some row of this warp reaches this key tile

    float s[MT][BC / 8][4];
    if (active) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt)
          s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        uint32_t a[MT][4];
        if constexpr (MT == 1) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[0][e] = qa[kk][e];
        } else {
          // A tiles (rows +0, cols +0), (rows +8, +0), (+0, +8), (+8, +8) of m16 tile mt.
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            ldsm_x4(a[mt],
                    Qs + (warp * 16 * MT + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
        }
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt += 2) {
          // B = K^T for keys nt*8.. and nt*8+8..: tiles (keys +0, dims +0), (+0, +8),
          // (+8, +0), (+8, +8) of dims kk*16..
          uint32_t b[4];
          ldsm_x4(b, Kb + (nt * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(s[mt][nt], a[mt], b[0], b[1]);
            mma_bf16(s[mt][nt + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    if constexpr (!F8) {
      // K and V of tile j + 1 into the buffers of tile j - 1, in flight during the softmax
      // and P V of tile j and the S of tile j + 1 respectively.
      if (more) copy_tile(Ks + ((j + 1) & 1) * BC * LD, static_cast<const bf16_t*>(kv.k));
      cp_async_commit();
      if (more) copy_tile(Vs + ((j + 1) & 1) * BC * LD, static_cast<const bf16_t*>(kv.v));
      cp_async_commit();
    }
    if (active) {
      if (kt + BC - 1 > warp_pmin || kt + BC > kend) {  // diagonal or context end
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int col = kt + nt * 8 + qm * 2 + (e & 1);
              if (!(col < kend && col <= p[2 * mt + (e >> 1)])) s[mt][nt][e] = -INFINITY;
            }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int mt = u >> 1, e0 = (u & 1) * 2;
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][e0], s[mt][nt][e0 + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // Running max in the exp2 domain; a row with no key yet stays at -1e30 (finite).
        const float mn = fmaxf(m_run[u], mx * scale_log2);
        const float alpha = fast_exp2(m_run[u] - mn);
        m_run[u] = mn;
        float rs = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt) {
          s[mt][nt][e0] = fast_exp2(fmaf(s[mt][nt][e0], scale_log2, -mn));
          s[mt][nt][e0 + 1] = fast_exp2(fmaf(s[mt][nt][e0 + 1], scale_log2, -mn));
          rs += s[mt][nt][e0] + s[mt][nt][e0 + 1];
        }
        l[u] = l[u] * alpha + rs;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) {
          o[mt][n][e0] *= alpha;
          o[mt][n][e0 + 1] *= alpha;
        }
      }
    }

    if constexpr (!F8) {
      cp_async_wait<2>();  // pending at most: K_j+1, V_j+1 -> V_j has landed
      __syncthreads();
    }

    if (active) {
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int n = 0; n < HD / 8; n += 2) {
          // B = V (keys x dims), transposed on load: tiles (keys +0/+8) x (dims n*8, n*8+8).
          uint32_t b[4];
          ldsm_x4_trans(b, Vb + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 +
                               (lane >> 4) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][n], pa[mt], b[0], b[1]);
            mma_bf16(o[mt][n + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int mt = u >> 1, e0 = (u & 1) * 2;
    float sum = l[u];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int m = m_of(u);
    if (m >= M) continue;
    bf16_t* dst = out + size_t(row0 + m / G) * out_stride + size_t(kvh * G + m % G) * HD + qm * 2;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[mt][n][e0] * inv, o[mt][n][e0 + 1] * inv);
  }
}

// bf16: K and V (two stages each), and Q when MT == 2. F8: K and V widened (one stage each),
// Q when MT == 2, and the staged codes and scales of K and V.
template <int HD, int NW, int MT, int BC, bool F8>
constexpr int smem_bytes() {
  const int bf16_rows = (F8 ? 2 : 4) * BC + (MT == 2 ? NW * 16 * MT : 0);
  return bf16_rows * (HD + 8) * int(sizeof(bf16_t)) + (F8 ? 2 * BC * (HD + int(sizeof(float))) : 0);
}

template <int HD, int NW, int MT, int BC, bool F8>
void launch(const bf16_t* qkv, int q_stride, const int32_t* positions, const int32_t* tiles,
            int num_tiles, PagedKv kv, bf16_t* out, int out_stride, int G, int Hkv,
            float scale_log2, cudaStream_t stream) {
  constexpr int BM = NW * 16 * MT, smem = smem_bytes<HD, NW, MT, BC, F8>();
  auto kernel = prefill_attn_kernel<HD, NW, MT, BC, F8>;
  if (smem > 48 * 1024)
    TANDEM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int nchunk = (kPrefillTileRows * G + BM - 1) / BM;
  const long long blocks = (long long)num_tiles * Hkv * nchunk;
  if (blocks > INT_MAX) cuda_fail("prefill_attention", "too many tiles", __FILE__, __LINE__);
  kernel<<<unsigned(blocks), NW * 32, smem, stream>>>(qkv, q_stride, positions,
                                                      reinterpret_cast<const int4*>(tiles), nchunk,
                                                      kv, G, Hkv, scale_log2, out, out_stride);
}

template <int HD, bool F8>
void launch_hd(PrefillShape shape, const bf16_t* qkv, int q_stride, const int32_t* positions,
               const int32_t* tiles, int num_tiles, PagedKv kv, bf16_t* out, int out_stride, int G,
               int Hkv, float scale_log2, cudaStream_t stream) {
#define TANDEM_PREFILL_LAUNCH(NW, MT, BC)                                                        \
  launch<HD, NW, MT, BC, F8>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G, \
                             Hkv, scale_log2, stream)
  switch (shape) {
    case PrefillShape::kW4R16:
      TANDEM_PREFILL_LAUNCH(4, 1, 64);
      break;
    case PrefillShape::kW8R16:
      TANDEM_PREFILL_LAUNCH(8, 1, 64);
      break;
    case PrefillShape::kW4R32:
      TANDEM_PREFILL_LAUNCH(4, 2, kBcR32);
      break;
    default:
      TANDEM_PREFILL_LAUNCH(8, 2, kBcR32);
      break;
  }
#undef TANDEM_PREFILL_LAUNCH
}

}  // namespace

std::vector<int32_t> make_prefill_tiles(const int32_t* query_start, const int32_t* positions,
                                        int S) {
  struct Tile {
    int32_t seq, row0, rows, last_pos;
  };
  std::vector<Tile> tiles;
  for (int s = 0; s < S; ++s)
    for (int r = query_start[s]; r < query_start[s + 1]; r += kPrefillTileRows) {
      const int rows = std::min(kPrefillTileRows, query_start[s + 1] - r);
      tiles.push_back({s, r, rows, positions[r + rows - 1]});
    }
  // Longest first: the causal tail tiles are the slow ones, start them early.
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const Tile& a, const Tile& b) { return a.last_pos > b.last_pos; });
  std::vector<int32_t> out;
  out.reserve(tiles.size() * 4);
  for (auto& t : tiles) out.insert(out.end(), {t.seq, t.row0, t.rows, 0});
  return out;
}

void prefill_attention(const bf16_t* qkv, int q_stride, const int32_t* positions,
                       const int32_t* tiles, int num_tiles, PagedKv kv, bf16_t* out, int out_stride,
                       int Hq, int Hkv, int hd, float scale, cudaStream_t stream,
                       PrefillShape shape) {
  if (num_tiles <= 0) return;
  if (Hkv <= 0 || Hq <= 0 || Hq % Hkv != 0)
    cuda_fail("prefill_attention", "Hq must be a positive multiple of Hkv", __FILE__, __LINE__);
  if (int(shape) < 0 || int(shape) > int(PrefillShape::kWgmma))
    cuda_fail("prefill_attention", "unknown block shape", __FILE__, __LINE__);
  const int G = Hq / Hkv;
  // Q rows staged with 16-byte copies (the 32-row shapes) need 16-byte aligned rows.
  const bool q_aligned = q_stride % 8 == 0 && reinterpret_cast<uintptr_t>(qkv) % 16 == 0;
  int dev = 0, sms = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const float scale_log2 = scale * 1.4426950408889634f;
  if (shape == PrefillShape::kAuto) {
    static const int forced = [] {  // TANDEM_PREFILL_SHAPE=1..5 picks one (benchmarks)
      const char* e = std::getenv("TANDEM_PREFILL_SHAPE");
      return e ? std::atoi(e) : 0;
    }();
    if (forced >= 1 && forced <= int(PrefillShape::kWgmma)) shape = PrefillShape(forced);
  }
  // Blocks of 128 (query row, head) pairs: the wgmma kernel's, and the 8 x 32 shape's.
  const long long big_blocks = (long long)num_tiles * Hkv * ((kPrefillTileRows * G + 127) / 128);
  // The wgmma kernel where it fits, unless the work fills under half the GPU (a prompt chunk
  // of ~64 rows beside decodes: there the 4 x 16 shape's 64-pair blocks spread wider; H200,
  // 64 decodes + 64 prompt tokens: 10.55 against 10.73 ms a step).
  static const bool wgmma_off = [] {  // TANDEM_PREFILL_WGMMA=0: the automatic choice skips it
    const char* e = std::getenv("TANDEM_PREFILL_WGMMA");
    return e && std::atoi(e) == 0;
  }();
  if (shape == PrefillShape::kWgmma ||
      (shape == PrefillShape::kAuto && !wgmma_off && 2 * big_blocks >= sms)) {
    if (prefill_wgmma_fits(qkv, q_stride, kv, hd, Hkv)) {
      prefill_attention_wgmma(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                              Hkv, scale_log2, stream);
      return;
    }
    shape = PrefillShape::kAuto;
  }
  if (shape == PrefillShape::kAuto) {
    // 128 query rows x heads per K/V tile halve the L2 traffic of 64 and 32-row warps
    // halve the shared-memory reads per mma, but big blocks leave SMs idle in a short
    // last wave: take them only when there are several waves of them.
    // H200, 8192 query rows at 8k/16k context (PrefillAttentionTiming): 8x32 200 TFLOP/s,
    // 4x32 183, 8x16 170, 4x16 133.
    shape = big_blocks >= 4LL * sms ? PrefillShape::kW8R32 : PrefillShape::kW4R16;
  }
  if ((shape == PrefillShape::kW4R32 || shape == PrefillShape::kW8R32) && !q_aligned)
    shape = PrefillShape::kW8R16;
  const bool f8 = kv.fp8();
  int smem_max = 0;
  TANDEM_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const int smem_w8r32 =
      f8 ? smem_bytes<128, 8, 2, kBcR32, true>() : smem_bytes<128, 8, 2, kBcR32, false>();
  if (shape == PrefillShape::kW8R32 && smem_max < smem_w8r32)
    shape = PrefillShape::kW4R32;  // sm_86/89 (99 KB a block), bf16 cache (F8 fits: 93 KB)
  auto go = [&](auto hd_const) {
    constexpr int HD = decltype(hd_const)::value;
    if (f8)
      launch_hd<HD, true>(shape, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                          Hkv, scale_log2, stream);
    else
      launch_hd<HD, false>(shape, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride,
                           G, Hkv, scale_log2, stream);
  };
  switch (hd) {
    case 16:
      go(std::integral_constant<int, 16>{});
      break;
    case 32:
      go(std::integral_constant<int, 32>{});
      break;
    case 64:
      go(std::integral_constant<int, 64>{});
      break;
    case 128:
      go(std::integral_constant<int, 128>{});
      break;
    default:
      cuda_fail("prefill_attention", "unsupported head_dim", __FILE__, __LINE__);
  }
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
