// Decode attention on tensor cores: the G query heads that share a KV head are the rows of
// one m16n8k16 tile (rows G..15 are zero), so S = Q K^T and O += P V run as mma.sync over
// 64-key tiles that a 3-stage cp.async pipeline streams from the paged cache. The kernel is
// bound by the K/V bytes it reads (each KV head once per sequence and split), not by math.
#include <cstdlib>
#include <string_view>

#include "backend/cuda/check.cuh"
#include "backend/cuda/decode_attention_mma.cuh"
#include "backend/cuda/decode_mma_finish.cuh"
#include "backend/cuda/decode_mma_rows.cuh"
#include "backend/cuda/mma.cuh"

namespace tandem::cuda {
namespace {

// Two shapes of the same kernel (DecodeMma): W warps each scoring 16 keys of a (16 W)-key
// tile, ST cp.async stages. Wide: 4 warps, 3 stages, 104 KB of shared memory, 2 blocks an
// SM. Narrow: 2 warps, 3 stages, 52 KB, 4 blocks an SM, so twice as many (sequence, KV head)
// blocks run at once: a batch of 64 at Qwen3-14B's 8 KV heads (512 blocks) fits on 132 SMs
// in one wave instead of two. (Wide with 2 stages, 3 blocks an SM, measured on the H200:
// batch 64 -3%, batch 128-256 +2-5%; engine C=64 4,210 tok/s against 4,393.) FP8 caches run
// in decode_attention_mma_f8.cu.
template <int W, int ST, int HD>
struct MmaShape {
  static constexpr int kTile = 16 * W;
  static constexpr int kSmem = ST * 2 * kTile * (HD + 8) * 2;  // K, V bf16, rows padded 16 B
  static constexpr int kBlocksPerSm = (227 * 1024) / (kSmem + 1024);
};

// Grid (Hkv, S, splits), 32 W threads. Split `z` of sequence s covers keys [t0, t1); each
// (16 W)-key tile is loaded by the whole block and warp w scores keys [16w, 16w+16) of it for
// all G heads, keeping its own running max / sum / output. Warps merge through shared
// memory; with one split the block writes the output, otherwise its unnormalised partial,
// and the last split of (s, kv head) to finish merges all of them (no second kernel).
template <int W, int ST, int HD>
__global__ void __launch_bounds__(W * 32, MmaShape<W, ST, HD>::kBlocksPerSm)
    decode_mma_kernel(const bf16_t* q, int q_stride, PagedKv kv, int Hq, int Hkv, float scale_log2,
                      int splits, float* part_o, float* part_ml, int* counters, bf16_t* out,
                      int out_stride) {
  constexpr int kWarps = W, kStages = ST, kTile = 16 * W;
  constexpr int LD = HD + 8;
  constexpr int CH = HD / 8;  // 16-byte chunks per key row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16_t* Ks = reinterpret_cast<bf16_t*>(smem_raw);  // [kStages][kTile][LD] K, then V
  bf16_t* Vs = Ks + kStages * kTile * LD;
  __shared__ float sm_m[kWarps][8], sm_l[kWarps][8];
  __shared__ int sm_last;

  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const auto [kvh, s, split, G, warp, lane, qd, qm, eff, t0, t1, ntiles] =
      decode_mma_block(kv.ctx_lens, Hq, Hkv, splits, kTile);
  if (split >= eff) return;

  // Each thread copies one 16-byte chunk column c of every (kWarps*32/CH)-th key of a tile.
  const int c = threadIdx.x % CH;
  constexpr int kKeyStep = kWarps * 32 / CH;
  DecodeKeyRows<kTile, kKeyStep> rows(kv.block_tables + size_t(s) * kv.max_blocks, t0, t1,
                                      kv.block_size, threadIdx.x / CH);
  const bf16_t* kbase = static_cast<const bf16_t*>(kv.k) + size_t(kvh) * HD + c * 8;
  const bf16_t* vbase = static_cast<const bf16_t*>(kv.v) + size_t(kvh) * HD + c * 8;
  const unsigned vec_elems = unsigned(Hkv) * HD;  // elements a slot
  auto load_tile = [&](int j, int stage) {        // then fetches tile j + 1's rows
#pragma unroll
    for (int i = 0; i < rows.KPT; ++i) {
      const int slot = rows.slot(j, i);
      const size_t off = slot >= 0 ? size_t(unsigned(slot)) * vec_elems : 0;
      const int row = stage * kTile + rows.first + i * kKeyStep;
      cp_async16(Ks + row * LD + c * 8, kbase + off, slot >= 0);
      cp_async16(Vs + row * LD + c * 8, vbase + off, slot >= 0);
    }
    rows.fetch(j + 1);
  };

  // The cached tiles before the wait for the kernel ahead (q and the new key are its output).
  rows.template start<kStages>(ntiles, decode_ready_tiles({eff, t0, t1}, kv.ctx_lens[s], kTile),
                               load_tile);

  // A fragments of Q: row qd = head kvh*G + qd (zero past G), rows qd+8 are zero.
  uint32_t qa[HD / 16][2];
  {
    const bool valid = qd < G;
    const bf16_t* qr = q + size_t(s) * q_stride + size_t(kvh * G + (valid ? qd : 0)) * HD;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      qa[kk][0] = valid ? ld32(qr + kk * 16 + qm * 2) : 0u;
      qa[kk][1] = valid ? ld32(qr + kk * 16 + qm * 2 + 8) : 0u;
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m = -1e30f, l = 0.0f;  // row qd: running max (log2 domain) and this lane's sum

  for (int j = 0; j < ntiles; ++j) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile j has landed for all; every warp is done with tile j - 1
    if (j + kStages - 1 < ntiles) load_tile(j + kStages - 1, (j + kStages - 1) % kStages);
    cp_async_commit();

    const int kb = warp * 16;              // this warp's keys within the tile
    const int key0 = t0 + j * kTile + kb;  // absolute index of its first key
    if (key0 >= t1) continue;              // warp-uniform: nothing left for this warp
    const bf16_t* ks = Ks + (j % kStages) * kTile * LD;
    const bf16_t* vs = Vs + (j % kStages) * kTile * LD;

    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      // B = K^T for keys kb..kb+15: lanes 0-7 / 8-15 give keys +0..7 at dims lo / hi,
      // lanes 16-31 the same for keys +8..15.
      uint32_t b[4];
      ldsm_x4(b, ks + (kb + (lane >> 4) * 8 + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
      const uint32_t a[4] = {qa[kk][0], 0u, qa[kk][1], 0u};
      mma_bf16(sc[0], a, b[0], b[1]);
      mma_bf16(sc[1], a, b[2], b[3]);
    }
    const float mul[2][2] = {{scale_log2, scale_log2}, {scale_log2, scale_log2}};
    const float alpha = decode_tile_softmax(sc, mul, key0, qm, t1, m, l);
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      o[n][0] *= alpha;
      o[n][1] *= alpha;
    }
    const uint32_t pa[4] = {pack_bf16(sc[0][0], sc[0][1]), 0u, pack_bf16(sc[1][0], sc[1][1]), 0u};
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
      // B = V (keys x dims), transposed on load: tiles (keys +0/+8) x (dims n*8, n*8+8).
      uint32_t b[4];
      ldsm_x4_trans(b,
                    vs + (kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 + (lane >> 4) * 8);
      mma_bf16(o[n], pa, b[0], b[1]);
      mma_bf16(o[n + 1], pa, b[2], b[3]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free: reuse them for the merge

  // Row qd's sum over its 4 lanes; the warps merge per (head, dim) in decode_mma_finish.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  float* sm_o = reinterpret_cast<float*>(smem_raw) + (warp * 8 + qd) * kDecodeMergeLd<HD>;
  if (qd < G) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      sm_o[n * 8 + qm * 2] = o[n][0];
      sm_o[n * 8 + qm * 2 + 1] = o[n][1];
    }
    if (qm == 0) {
      sm_m[warp][qd] = m;
      sm_l[warp][qd] = l;
    }
  }
  decode_mma_finish<kWarps, HD>(
      sm_m, sm_l, reinterpret_cast<const float*>(smem_raw), sm_last,
      {s, kvh, G, Hq, Hkv, split, splits, eff, part_o, part_ml, counters, out, out_stride});
}

template <int W, int ST, int HD>
void launch(const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out, int out_stride, int S, int Hq,
            int Hkv, float scale_log2, int splits, float* part_o, float* part_ml, int* counters,
            cudaStream_t stream) {
  constexpr int bytes = MmaShape<W, ST, HD>::kSmem;
  static_assert(W * 8 * kDecodeMergeLd<HD> * 4 <= bytes, "the warp merge reuses the stages");
  launch_decode_mma<decode_mma_kernel<W, ST, HD>>(W * 32, bytes, q, q_stride, kv, out, out_stride,
                                                  S, Hq, Hkv, scale_log2, splits, part_o, part_ml,
                                                  counters, stream, decode_attention_pdl());
}

template <int HD>
void launch_shape(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out,
                  int out_stride, int S, int Hq, int Hkv, float scale_log2, int splits,
                  float* part_o, float* part_ml, int* counters, cudaStream_t stream) {
#define TANDEM_DECODE_MMA(W, ST)                                                              \
  launch<W, ST, HD>(q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits, part_o, \
                    part_ml, counters, stream)
  if (shape == DecodeMma::kNarrow)
    TANDEM_DECODE_MMA(2, 3);
  else
    TANDEM_DECODE_MMA(4, 3);
#undef TANDEM_DECODE_MMA
}

}  // namespace

bool decode_attention_pdl() {
  static const bool on = [] {
    const char* e = std::getenv("TANDEM_ATTN_PDL");
    return pdl_enabled() && !(e && std::string_view(e) == "0");
  }();
  return on;
}

bool decode_attention_mma_supports(int hd, int group) {
  return (hd == 64 || hd == 128) && group >= 1 && group <= 8;
}

void decode_attention_mma(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out,
                          int out_stride, int S, int Hq, int Hkv, int hd, float scale_log2,
                          int splits, float* part_o, float* part_ml, int* counters,
                          cudaStream_t stream) {
  if (kv.fp8()) {
    decode_attention_mma_f8(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv, hd, scale_log2,
                            splits, part_o, part_ml, counters, stream);
    return;
  }
  decode_mma_for_head_dim(hd, "decode_attention_mma", [&](auto h) {
    launch_shape<decltype(h)::value>(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv,
                                     scale_log2, splits, part_o, part_ml, counters, stream);
  });
}

}  // namespace tandem::cuda
