#include <algorithm>
#include <numeric>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_attention.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBr = kPrefillTileRows;  // query rows per block: 4 warps x 16
constexpr int kBc = 64;                // keys per smem tile

// Grid (tiles, Hq), 4 warps; warp w owns query rows [16w, 16w+16) of the tile. Fragment
// layouts are those of mma.m16n8k16: lane = 4 * qd + qm holds rows qd and qd + 8, columns
// 2 qm, 2 qm + 1 (and + 8). S = Q K^T and O += P V run on tensor cores; the softmax is fp32
// with a running max per row (exp2 domain, the scale folded into log2 e).
template <int HD>
__global__ void __launch_bounds__(128)
    prefill_attn_kernel(const bf16_t* qkv, int q_stride, const int32_t* positions,
                        const int4* tiles, PagedKv kv, int Hq, int Hkv, float scale_log2,
                        bf16_t* out, int out_stride) {
  constexpr int LD = HD + 8;  // padded rows: conflict-free fragment loads
  __shared__ __align__(16) bf16_t Ks[kBc][LD];
  __shared__ __align__(16) bf16_t Vs[kBc][LD];
  const int4 tile = tiles[blockIdx.x];
  const int seq = tile.x, row0 = tile.y, nrows = tile.z;
  const int h = blockIdx.y, kvh = h / (Hq / Hkv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qd = lane >> 2, qm = lane & 3;
  const int ctx = kv.ctx_lens[seq];
  const int kend = min(ctx, positions[row0 + nrows - 1] + 1);

  const int r_lo = warp * 16 + qd, r_hi = r_lo + 8;
  const bool v_lo = r_lo < nrows, v_hi = r_hi < nrows;
  const int p_lo = v_lo ? positions[row0 + r_lo] : -1;
  const int p_hi = v_hi ? positions[row0 + r_hi] : -1;
  int warp_pmax = max(p_lo, p_hi);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    warp_pmax = max(warp_pmax, __shfl_xor_sync(0xffffffffu, warp_pmax, o));

  uint32_t qa[HD / 16][4];
  const bf16_t* q_lo = qkv + size_t(row0 + r_lo) * q_stride + size_t(h) * HD;
  const bf16_t* q_hi = q_lo + size_t(8) * q_stride;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const int col = kk * 16 + qm * 2;
    qa[kk][0] = v_lo ? ld32(q_lo + col) : 0u;
    qa[kk][1] = v_hi ? ld32(q_hi + col) : 0u;
    qa[kk][2] = v_lo ? ld32(q_lo + col + 8) : 0u;
    qa[kk][3] = v_hi ? ld32(q_hi + col + 8) : 0u;
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_lo = -1e30f, m_hi = -1e30f, l_lo = 0.0f, l_hi = 0.0f;
  const int32_t* bt = kv.block_tables + size_t(seq) * kv.max_blocks;

  for (int kt = 0; kt < kend; kt += kBc) {
    __syncthreads();  // the previous tile is no longer read
    for (int i = threadIdx.x; i < kBc * HD / 8; i += blockDim.x) {
      const int key = i / (HD / 8), c = i % (HD / 8);
      const int tok = kt + key;
      int4 kv4 = make_int4(0, 0, 0, 0), vv4 = make_int4(0, 0, 0, 0);
      if (tok < kend) {
        const int64_t slot = int64_t(bt[tok / kv.block_size]) * kv.block_size + tok % kv.block_size;
        const size_t off = (size_t(slot) * Hkv + kvh) * (HD / 8) + c;
        kv4 = reinterpret_cast<const int4*>(kv.k)[off];
        vv4 = reinterpret_cast<const int4*>(kv.v)[off];
      }
      *reinterpret_cast<int4*>(&Ks[key][c * 8]) = kv4;
      *reinterpret_cast<int4*>(&Vs[key][c * 8]) = vv4;
    }
    __syncthreads();
    if (warp_pmax < kt) continue;  // every row of this warp is before the tile (causal)

    float s[kBc / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        // B = K^T: tile 0 = keys nt*8.., dims kk*16 + 0..7; tile 1 = dims + 8.
        uint32_t b0, b1;
        ldsm_x2(b0, b1, &Ks[nt * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]);
        mma_bf16(s[nt], qa[kk], b0, b1);
      }
    }
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = kt + nt * 8 + qm * 2 + e;
        const bool ok = col < kend;
        s[nt][e] = ok && col <= p_lo ? s[nt][e] * scale_log2 : -INFINITY;
        s[nt][2 + e] = ok && col <= p_hi ? s[nt][2 + e] * scale_log2 : -INFINITY;
        mx_lo = fmaxf(mx_lo, s[nt][e]);
        mx_hi = fmaxf(mx_hi, s[nt][2 + e]);
      }
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
    }
    const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
    const float a_lo = exp2f(m_lo - mn_lo), a_hi = exp2f(m_hi - mn_hi);
    m_lo = mn_lo;
    m_hi = mn_hi;
    float rs_lo = 0.0f, rs_hi = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - mn_lo);
        s[nt][2 + e] = exp2f(s[nt][2 + e] - mn_hi);
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
        ldsm_x4_trans(b,
                      &Vs[kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][n * 8 + (lane >> 4) * 8]);
        mma_bf16(o[n], pa, b[0], b[1]);
        mma_bf16(o[n + 1], pa, b[2], b[3]);
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
  bf16_t* o_lo = out + size_t(row0 + r_lo) * out_stride + size_t(h) * HD + qm * 2;
  bf16_t* o_hi = o_lo + size_t(8) * out_stride;
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

template <int HD>
void launch(const bf16_t* qkv, int q_stride, const int32_t* positions, const int32_t* tiles,
            int num_tiles, PagedKv kv, bf16_t* out, int out_stride, int Hq, int Hkv,
            float scale_log2, cudaStream_t stream) {
  prefill_attn_kernel<HD><<<dim3(num_tiles, Hq), 128, 0, stream>>>(
      qkv, q_stride, positions, reinterpret_cast<const int4*>(tiles), kv, Hq, Hkv, scale_log2, out,
      out_stride);
}

}  // namespace

std::vector<int32_t> make_prefill_tiles(const int32_t* query_start, const int32_t* positions,
                                        int S) {
  struct Tile {
    int32_t seq, row0, rows, last_pos;
  };
  std::vector<Tile> tiles;
  for (int s = 0; s < S; ++s)
    for (int r = query_start[s]; r < query_start[s + 1]; r += kBr) {
      const int rows = std::min(kBr, query_start[s + 1] - r);
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
                       int Hq, int Hkv, int hd, float scale, cudaStream_t stream) {
  if (num_tiles <= 0) return;
  if (Hq % Hkv != 0) cuda_fail("prefill_attention", "Hq % Hkv != 0", __FILE__, __LINE__);
  const float scale_log2 = scale * 1.4426950408889634f;
  switch (hd) {
    case 16:
      launch<16>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, Hq, Hkv,
                 scale_log2, stream);
      break;
    case 32:
      launch<32>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, Hq, Hkv,
                 scale_log2, stream);
      break;
    case 64:
      launch<64>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, Hq, Hkv,
                 scale_log2, stream);
      break;
    case 128:
      launch<128>(qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride, Hq, Hkv,
                  scale_log2, stream);
      break;
    default:
      cuda_fail("prefill_attention", "unsupported head_dim", __FILE__, __LINE__);
  }
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
