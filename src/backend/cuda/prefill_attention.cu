#include <algorithm>
#include <climits>
#include <numeric>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_attention.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBc = 64;  // keys per shared-memory K/V tile

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One block = one KV head of one tile, for a chunk of BM = 16 * NW (query row, head) pairs.
// The tile's rows x G query heads (G = Hq / Hkv) are flattened row-major, m = r * G + g, and
// chunk c takes m in [c * BM, c * BM + BM); warp w owns m in [16w, 16w + 16) of the chunk, so
// every K/V tile loaded into shared memory serves BM query rows. Fragment layouts are those of
// mma.m16n8k16: lane = 4 * qd + qm holds m-rows qd and qd + 8, columns 2 qm, 2 qm + 1 (and
// + 8). S = Q K^T and O += P V run on tensor cores; the softmax is fp32 with a running max per
// row (exp2 domain, the scale folded into log2 e). K and V tiles stream through a two-stage
// cp.async pipeline in separate groups: tile j + 1's K and V load during tile j's softmax and
// P V, and V has until the end of tile j + 1's S. Only key tiles that reach past a row's position (the diagonal)
// or the context end are masked; a warp whose rows all end before a key tile skips its math.
// Grid: one dimension, chunk fastest, then KV head, then tile (longest first): the blocks
// running together read the same key range of one sequence (L2 reuse), and the short tiles
// come last (load balance).
template <int HD, int NW>
__global__ void __launch_bounds__(NW * 32, NW == 8 ? 1 : 2)
    prefill_attn_kernel(const bf16_t* qkv, int q_stride, const int32_t* positions,
                        const int4* tiles, int nchunk, PagedKv kv, int G, int Hkv,
                        float scale_log2, bf16_t* out, int out_stride) {
  constexpr int NT = NW * 32, BM = NW * 16;
  constexpr int LD = HD + 8;  // padded rows: conflict-free ldmatrix
  constexpr int CH = HD / 8;  // 16-byte chunks per key row
  constexpr int KI = (kBc * CH + NT - 1) / NT;  // chunks a thread copies per tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16_t* const Ks = reinterpret_cast<bf16_t*>(smem_raw);  // [2][kBc][LD]
  bf16_t* const Vs = Ks + 2 * kBc * LD;                    // [2][kBc][LD]
  __shared__ int s_pmax;

  const int chunk = blockIdx.x % nchunk;
  const int rest = blockIdx.x / nchunk;
  const int kvh = rest % Hkv;
  const int4 tile = tiles[rest / Hkv];
  const int seq = tile.x, row0 = tile.y, nrows = tile.z;
  const int M = nrows * G, m0 = chunk * BM;
  if (m0 >= M) return;  // the whole block: no barrier has been reached yet

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qd = lane >> 2, qm = lane & 3;
  const int m_lo = m0 + warp * 16 + qd, m_hi = m_lo + 8;
  const bool v_lo = m_lo < M, v_hi = m_hi < M;
  const int r_lo = v_lo ? m_lo / G : 0, r_hi = v_hi ? m_hi / G : 0;
  const int h_lo = kvh * G + (v_lo ? m_lo % G : 0), h_hi = kvh * G + (v_hi ? m_hi % G : 0);
  const int p_lo = v_lo ? positions[row0 + r_lo] : -1;
  const int p_hi = v_hi ? positions[row0 + r_hi] : -1;
  int warp_pmax = max(p_lo, p_hi);
  int warp_pmin = min(v_lo ? p_lo : INT_MAX, v_hi ? p_hi : INT_MAX);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    warp_pmax = max(warp_pmax, __shfl_xor_sync(0xffffffffu, warp_pmax, o));
    warp_pmin = min(warp_pmin, __shfl_xor_sync(0xffffffffu, warp_pmin, o));
  }
  if (threadIdx.x == 0) s_pmax = -1;
  __syncthreads();
  if (lane == 0) atomicMax(&s_pmax, warp_pmax);
  __syncthreads();
  const int ctx = kv.ctx_lens[seq];
  const int kend = min(ctx, s_pmax + 1);  // keys [0, kend) are read by some row of the block
  const int ntiles = kend > 0 ? (kend + kBc - 1) / kBc : 0;

  uint32_t qa[HD / 16][4];
  {
    const bf16_t* q_lo = qkv + size_t(row0 + r_lo) * q_stride + size_t(h_lo) * HD;
    const bf16_t* q_hi = qkv + size_t(row0 + r_hi) * q_stride + size_t(h_hi) * HD;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const int col = kk * 16 + qm * 2;
      qa[kk][0] = v_lo ? ld32(q_lo + col) : 0u;
      qa[kk][1] = v_hi ? ld32(q_hi + col) : 0u;
      qa[kk][2] = v_lo ? ld32(q_lo + col + 8) : 0u;
      qa[kk][3] = v_hi ? ld32(q_hi + col + 8) : 0u;
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_run_lo = -1e30f, m_run_hi = -1e30f, l_lo = 0.0f, l_hi = 0.0f;  // exp2 domain

  // Cache slot of each chunk this thread copies for the tile in flight (-1: past kend, zero).
  const int32_t* bt = kv.block_tables + size_t(seq) * kv.max_blocks;
  int slot[KI];
  auto find_slots = [&](int kt) {
#pragma unroll
    for (int it = 0; it < KI; ++it) {
      const int i = threadIdx.x + it * NT;
      const int tok = kt + i / CH;
      slot[it] = -1;
      if (i < kBc * CH && tok < kend)
        slot[it] = bt[tok / kv.block_size] * kv.block_size + tok % kv.block_size;
    }
  };
  auto copy_tile = [&](bf16_t* dst, const bf16_t* src) {
#pragma unroll
    for (int it = 0; it < KI; ++it) {
      const int i = threadIdx.x + it * NT;
      if (i < kBc * CH) {
        const int key = i / CH, c = i % CH;
        const bool ok = slot[it] >= 0;
        const bf16_t* g = ok ? src + (size_t(slot[it]) * Hkv + kvh) * HD + c * 8 : src;
        cp_async16(dst + key * LD + c * 8, g, ok);
      }
    }
  };

  if (ntiles > 0) {
    find_slots(0);
    copy_tile(Ks, kv.k);
    cp_async_commit();
    copy_tile(Vs, kv.v);
    cp_async_commit();
  }

  for (int j = 0; j < ntiles; ++j) {
    const int kt = j * kBc;
    const bf16_t* Kb = Ks + (j & 1) * kBc * LD;
    const bf16_t* Vb = Vs + (j & 1) * kBc * LD;
    cp_async_wait<1>();  // pending at most: V_j -> K_j has landed
    __syncthreads();      // ... for every thread; tile j - 1 is no longer read by anyone
    const bool more = j + 1 < ntiles;
    if (more) find_slots(kt + kBc);  // block-table loads overlap the S = Q K^T below
    const bool active = warp_pmax >= kt;  // some row of this warp reaches this key tile

    float s[kBc / 8][4];
    if (active) {
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
        for (int nt = 0; nt < kBc / 8; nt += 2) {
          // B = K^T for keys nt*8.. and nt*8+8..: tiles (keys +0, dims +0), (+0, +8),
          // (+8, +0), (+8, +8) of dims kk*16..
          uint32_t b[4];
          ldsm_x4(b, Kb + (nt * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
          mma_bf16(s[nt], qa[kk], b[0], b[1]);
          mma_bf16(s[nt + 1], qa[kk], b[2], b[3]);
        }
      }
    }
    // K and V of tile j + 1 into the buffers of tile j - 1, in flight during the softmax and
    // P V of tile j and the S of tile j + 1 respectively.
    if (more) copy_tile(Ks + ((j + 1) & 1) * kBc * LD, kv.k);
    cp_async_commit();
    if (more) copy_tile(Vs + ((j + 1) & 1) * kBc * LD, kv.v);
    cp_async_commit();
    if (active) {
      if (kt + kBc - 1 > warp_pmin || kt + kBc > kend) {  // diagonal or context end
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = kt + nt * 8 + qm * 2 + e;
            if (!(col < kend && col <= p_lo)) s[nt][e] = -INFINITY;
            if (!(col < kend && col <= p_hi)) s[nt][2 + e] = -INFINITY;
          }
        }
      }
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[nt][0], s[nt][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[nt][2], s[nt][3]));
      }
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
      }
      // Running max in the exp2 domain; a row with no key yet stays at -1e30 (finite).
      const float mn_lo = fmaxf(m_run_lo, mx_lo * scale_log2);
      const float mn_hi = fmaxf(m_run_hi, mx_hi * scale_log2);
      const float a_lo = fast_exp2(m_run_lo - mn_lo), a_hi = fast_exp2(m_run_hi - mn_hi);
      m_run_lo = mn_lo;
      m_run_hi = mn_hi;
      float rs_lo = 0.0f, rs_hi = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -mn_lo));
          s[nt][2 + e] = fast_exp2(fmaf(s[nt][2 + e], scale_log2, -mn_hi));
          rs_lo += s[nt][e];
          rs_hi += s[nt][2 + e];
        }
      }
      l_lo = l_lo * a_lo + rs_lo;
      l_hi = l_hi * a_hi + rs_hi;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        o[n][0] *= a_lo;
        o[n][1] *= a_lo;
        o[n][2] *= a_hi;
        o[n][3] *= a_hi;
      }
    }

    cp_async_wait<2>();  // pending at most: K_j+1, V_j+1 -> V_j has landed
    __syncthreads();

    if (active) {
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                                pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int n = 0; n < HD / 8; n += 2) {
          // B = V (keys x dims), transposed on load: tiles (keys +0/+8) x (dims n*8, n*8+8).
          uint32_t b[4];
          ldsm_x4_trans(b, Vb + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 +
                               (lane >> 4) * 8);
          mma_bf16(o[n], pa, b[0], b[1]);
          mma_bf16(o[n + 1], pa, b[2], b[3]);
        }
      }
    }
  }

#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, off);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, off);
  }
  const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f;
  const float inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
  bf16_t* o_lo = out + size_t(row0 + r_lo) * out_stride + size_t(h_lo) * HD + qm * 2;
  bf16_t* o_hi = out + size_t(row0 + r_hi) * out_stride + size_t(h_hi) * HD + qm * 2;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    if (v_lo)
      *reinterpret_cast<__nv_bfloat162*>(o_lo + n * 8) =
          __floats2bfloat162_rn(o[n][0] * inv_lo, o[n][1] * inv_lo);
    if (v_hi)
      *reinterpret_cast<__nv_bfloat162*>(o_hi + n * 8) =
          __floats2bfloat162_rn(o[n][2] * inv_hi, o[n][3] * inv_hi);
  }
}

template <int HD, int NW>
void launch(const bf16_t* qkv, int q_stride, const int32_t* positions, const int32_t* tiles,
            int num_tiles, PagedKv kv, bf16_t* out, int out_stride, int G, int Hkv,
            float scale_log2, cudaStream_t stream) {
  constexpr int BM = NW * 16;
  constexpr int smem = 4 * kBc * (HD + 8) * int(sizeof(bf16_t));  // K and V, two stages each
  auto kernel = prefill_attn_kernel<HD, NW>;
  if (smem > 48 * 1024)
    TANDEM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int nchunk = (kPrefillTileRows * G + BM - 1) / BM;
  const long long blocks = (long long)num_tiles * Hkv * nchunk;
  if (blocks > INT_MAX) cuda_fail("prefill_attention", "too many tiles", __FILE__, __LINE__);
  kernel<<<unsigned(blocks), NW * 32, smem, stream>>>(
      qkv, q_stride, positions, reinterpret_cast<const int4*>(tiles), nchunk, kv, G,
      Hkv, scale_log2, out, out_stride);
}

template <int HD>
void launch_hd(int warps, const bf16_t* qkv, int q_stride, const int32_t* positions,
               const int32_t* tiles, int num_tiles, PagedKv kv, bf16_t* out, int out_stride,
               int G, int Hkv, float scale_log2, cudaStream_t stream) {
  if (warps == 8)
    launch<HD, 8>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G, Hkv,
                  scale_log2, stream);
  else
    launch<HD, 4>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G, Hkv,
                  scale_log2, stream);
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
                       int Hq, int Hkv, int hd, float scale, cudaStream_t stream, int warps) {
  if (num_tiles <= 0) return;
  if (Hkv <= 0 || Hq <= 0 || Hq % Hkv != 0)
    cuda_fail("prefill_attention", "Hq must be a positive multiple of Hkv", __FILE__, __LINE__);
  if (warps != 0 && warps != 4 && warps != 8)
    cuda_fail("prefill_attention", "warps must be 0, 4 or 8", __FILE__, __LINE__);
  const int G = Hq / Hkv;
  if (warps == 0) {
    // 8-warp blocks (one per SM) halve the K/V traffic per query row but leave SMs idle
    // in a short last wave; take them only when there are several waves of them.
    int dev = 0, sms = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const long long full_blocks8 = (long long)num_tiles * Hkv * ((kPrefillTileRows * G + 127) / 128);
    warps = full_blocks8 >= 4LL * sms ? 8 : 4;
  }
  const float scale_log2 = scale * 1.4426950408889634f;
  switch (hd) {
    case 16:
      launch_hd<16>(warps, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                    Hkv, scale_log2, stream);
      break;
    case 32:
      launch_hd<32>(warps, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                    Hkv, scale_log2, stream);
      break;
    case 64:
      launch_hd<64>(warps, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                    Hkv, scale_log2, stream);
      break;
    case 128:
      launch_hd<128>(warps, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, G,
                     Hkv, scale_log2, stream);
      break;
    default:
      cuda_fail("prefill_attention", "unsupported head_dim", __FILE__, __LINE__);
  }
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
