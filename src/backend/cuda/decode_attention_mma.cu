// Decode attention on tensor cores: the G query heads that share a KV head are the rows of
// one m16n8k16 tile (rows G..15 are zero), so S = Q K^T and O += P V run as mma.sync over
// 64-key tiles that a 3-stage cp.async pipeline streams from the paged cache. The kernel is
// bound by the K/V bytes it reads (each KV head once per sequence and split), not by math.
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/decode_attention_mma.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/mma.cuh"

namespace tandem::cuda {
namespace {

// Two shapes of the same kernel (DecodeMma): W warps each scoring 16 keys of a (16 W)-key
// tile, ST cp.async stages. Wide: 4 warps, 3 stages, 104 KB of shared memory, 2 blocks an
// SM. Narrow: 2 warps, 3 stages, 52 KB, 4 blocks an SM, so twice as many (sequence, KV head)
// blocks run at once: a batch of 64 at Qwen3-14B's 8 KV heads (512 blocks) fits on 132 SMs
// in one wave instead of two. (Wide with 2 stages, 3 blocks an SM, measured on the H200:
// batch 64 -3%, batch 128-256 +2-5%; engine C=64 4,210 tok/s against 4,393.)
//
// FP8 caches (F8): the stages hold e4m3 codes and per-key scales, half the bytes a tile, and
// each tile is widened once (an extra barrier a tile) into fp16 K and V tiles holding the
// codes' exact values: one conversion per two values, where widening to bf16(code * scale)
// took five instructions and left the kernel conversion-bound, slower than bf16 (H200,
// S=64: 1.19x). The math runs on fp16 tensor cores (q converted once), and the scales go
// where they are per key: each score times its key's K scale, each probability times its
// key's V scale over the warp tile's largest (fp16 range), that largest applied to the tile's
// P V in fp32. Four stages keep 3 tiles in flight at the bf16 shapes' occupancy.
template <int W, int ST, int HD, bool F8>
struct MmaShape {
  static constexpr int kTile = 16 * W;
  static constexpr int kWide = 2 * kTile * (HD + 8) * 2;  // K and V bf16, rows padded 16 bytes
  static constexpr int kSmem = F8 ? kWide + ST * 2 * kTile * (HD + 4) : ST * kWide;
  static constexpr int kBlocksPerSm = (227 * 1024) / (kSmem + 1024);
};

// Grid (Hkv, S, splits), 32 W threads. Split `z` of sequence s covers keys [t0, t1); each
// (16 W)-key tile is loaded by the whole block and warp w scores keys [16w, 16w+16) of it for
// all G heads, keeping its own running max / sum / output. Warps merge through shared
// memory; with one split the block writes the output, otherwise its unnormalised partial,
// and the last split of (s, kv head) to finish merges all of them (no second kernel).
template <int W, int ST, int HD, bool F8>
__global__ void __launch_bounds__(W * 32, MmaShape<W, ST, HD, F8>::kBlocksPerSm)
    decode_mma_kernel(const bf16_t* q, int q_stride, PagedKv kv, int Hq, int Hkv,
                      float scale_log2, int splits, float* part_o, float* part_ml,
                      int* counters, bf16_t* out, int out_stride) {
  constexpr int kWarps = W, kStages = ST, kTile = 16 * W;
  constexpr int LD = HD + 8;
  constexpr int CH = HD / 8;  // 16-byte chunks per key row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // bf16: [kStages][kTile][LD] K then V. F8: one bf16 [kTile][LD] K and V, then the stages:
  // codes [kStages][kTile][HD] K then V, scales [kStages][kTile] K then V.
  bf16_t* Ks = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* Vs = Ks + (F8 ? 1 : kStages) * kTile * LD;
  uint8_t* K8 = reinterpret_cast<uint8_t*>(Vs + kTile * LD);
  uint8_t* V8 = K8 + kStages * kTile * HD;
  float* KSc = reinterpret_cast<float*>(V8 + kStages * kTile * HD);
  float* VSc = KSc + kStages * kTile;
  __shared__ float sm_m[kWarps][8], sm_l[kWarps][8];
  __shared__ int sm_last;

  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int kvh = blockIdx.x, s = blockIdx.y, split = blockIdx.z;
  const int G = Hq / Hkv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qd = lane >> 2, qm = lane & 3;
  const int ctx = kv.ctx_lens[s];
  const int eff = decode_effective_splits(ctx, splits);
  if (split >= eff) return;
  const int per = (ctx + eff - 1) / eff;
  const int t0 = split * per, t1 = min(ctx, t0 + per);
  const int ntiles = t1 > t0 ? (t1 - t0 + kTile - 1) / kTile : 0;
  const int32_t* bt = kv.block_tables + size_t(s) * kv.max_blocks;

  // Each thread copies one 16-byte chunk column c of every (kWarps*32/CPK)-th key of a tile
  // (CPK chunks a key: 8 bf16 or 16 e4m3 values each), and in F8 the key's two scales when
  // c == 0. Block sizes are powers of two in practice: a shift and a mask find a key's slot
  // there (a division per key made the address math cost more issue slots than the math).
  constexpr int CPK = F8 ? HD / 16 : CH;
  constexpr int kEl = F8 ? 16 : 8;  // values a chunk
  const int c = threadIdx.x % CPK;
  constexpr int kKeyStep = kWarps * 32 / CPK;
  const int bs = kv.block_size;
  const bool pow2 = (bs & (bs - 1)) == 0;
  const int bs_shift = __ffs(bs) - 1;
  using Elem = std::conditional_t<F8, uint8_t, bf16_t>;
  const Elem* kbase = static_cast<const Elem*>(kv.k) + size_t(kvh) * HD + c * kEl;
  const Elem* vbase = static_cast<const Elem*>(kv.v) + size_t(kvh) * HD + c * kEl;
  auto load_tile = [&](int j, int stage) {
#pragma unroll
    for (int key = threadIdx.x / CPK; key < kTile; key += kKeyStep) {
      const int tok = t0 + j * kTile + key;
      const bool ok = tok < t1;
      size_t vec = 0;  // (slot, kv head) vector index
      if (ok) {
        const int blk = pow2 ? tok >> bs_shift : tok / bs;
        const int in = pow2 ? tok & (bs - 1) : tok % bs;
        vec = (size_t(bt[blk]) * bs + in) * size_t(Hkv);
      }
      if constexpr (F8) {
        const int row = stage * kTile + key;
        cp_async16(K8 + row * HD + c * 16, kbase + vec * HD, ok);
        cp_async16(V8 + row * HD + c * 16, vbase + vec * HD, ok);
        if (c == 0) {
          cp_async4(KSc + row, kv.k_scale + vec + kvh, ok);
          cp_async4(VSc + row, kv.v_scale + vec + kvh, ok);
        }
      } else {
        const int row = stage * kTile + key;
        cp_async16(Ks + row * LD + c * 8, kbase + vec * HD, ok);
        cp_async16(Vs + row * LD + c * 8, vbase + vec * HD, ok);
      }
    }
  };
  // F8: the codes of stage `stage` as fp16 into the K and V tiles (K exact, V / 256; keys
  // past the end are zero codes). A fixed count of chunks a thread, all loaded before any is
  // converted, so the shared-memory latency is paid once a tile rather than once a chunk.
  constexpr int kWidenIters = kTile * (HD / 16) / (kWarps * 32);
  static_assert(!F8 || kTile * (HD / 16) % (kWarps * 32) == 0, "whole chunks a thread");
  auto widen_tile = [&](int stage) {
    uint4 kq[kWidenIters], vq[kWidenIters];
#pragma unroll
    for (int it = 0; it < kWidenIters; ++it) {
      const int i = threadIdx.x + it * kWarps * 32;
      const int row = stage * kTile + i / (HD / 16), c16 = i % (HD / 16);
      kq[it] = *reinterpret_cast<const uint4*>(K8 + row * HD + c16 * 16);
      vq[it] = *reinterpret_cast<const uint4*>(V8 + row * HD + c16 * 16);
    }
#pragma unroll
    for (int it = 0; it < kWidenIters; ++it) {
      const int i = threadIdx.x + it * kWarps * 32;
      const int key = i / (HD / 16), c16 = i % (HD / 16);
      uint4 lo, hi;
      kv_fp8x16_to_f16(kq[it], lo, hi);
      *reinterpret_cast<uint4*>(Ks + key * LD + c16 * 16) = lo;
      *reinterpret_cast<uint4*>(Ks + key * LD + c16 * 16 + 8) = hi;
      // V by integer operations (its values / 256; the P V scale makes up for it), so the
      // conversion unit only widens K.
      kv_fp8x16_to_f16_over256(vq[it], lo, hi);
      *reinterpret_cast<uint4*>(Vs + key * LD + c16 * 16) = lo;
      *reinterpret_cast<uint4*>(Vs + key * LD + c16 * 16 + 8) = hi;
    }
  };

  // Start the first tiles before anything else: they do not depend on q.
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ntiles) load_tile(st, st);
    cp_async_commit();
  }

  // A fragments of Q: row qd = head kvh*G + qd (zero past G), rows qd+8 are zero.
  uint32_t qa[HD / 16][2];
  {
    const bool valid = qd < G;
    const bf16_t* qr = q + size_t(s) * q_stride + size_t(kvh * G + (valid ? qd : 0)) * HD;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      qa[kk][0] = valid ? ld32(qr + kk * 16 + qm * 2) : 0u;
      qa[kk][1] = valid ? ld32(qr + kk * 16 + qm * 2 + 8) : 0u;
      if constexpr (F8) {  // fp16 for the fp16 tensor cores
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qa[kk][h]));
          qa[kk][h] = pack_f16(f.x, f.y);
        }
      }
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
    if constexpr (F8) {
      widen_tile(j % kStages);
      __syncthreads();
    }

    const int kb = warp * 16;                 // this warp's keys within the tile
    const int key0 = t0 + j * kTile + kb;     // absolute index of its first key
    if (key0 >= t1) continue;                 // warp-uniform: nothing left for this warp
    const bf16_t* ks = Ks + (F8 ? 0 : j % kStages) * kTile * LD;
    const bf16_t* vs = Vs + (F8 ? 0 : j % kStages) * kTile * LD;

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
      if constexpr (F8) {
        mma_f16(sc[0], a, b[0], b[1]);
        mma_f16(sc[1], a, b[2], b[3]);
      } else {
        mma_bf16(sc[0], a, b[0], b[1]);
        mma_bf16(sc[1], a, b[2], b[3]);
      }
    }
    // F8: this lane's keys kb + nt*8 + qm*2 + e have scales at ksc[nt*8 + e] (K) and vsc (V).
    const float* ksc = KSc + (j % kStages) * kTile + kb + qm * 2;
    const float* vsc = VSc + (j % kStages) * kTile + kb + qm * 2;
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool ok = key0 + nt * 8 + qm * 2 + e < t1;
        const float s = F8 ? scale_log2 * ksc[nt * 8 + e] : scale_log2;
        sc[nt][e] = ok ? sc[nt][e] * s : -INFINITY;
        mx = fmaxf(mx, sc[nt][e]);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m, mx);
    const float alpha = exp2f(m - mn);
    m = mn;
    float rs = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[nt][e] = exp2f(sc[nt][e] - mn);
        rs += sc[nt][e];
      }
    l = l * alpha + rs;
    if constexpr (F8) {
      // P V = 256 vmax * sum_k (p_k * s_k / vmax) * (code_k / 256): the fp16 probabilities
      // stay in [0, 1].
      float vmax = fmaxf(fmaxf(vsc[0], vsc[1]), fmaxf(vsc[8], vsc[9]));
      vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
      vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 2));
      const float vinv = vmax > 0.0f ? 1.0f / vmax : 0.0f, vmul = vmax * 256.0f;
      const uint32_t pa[4] = {pack_f16(sc[0][0] * (vsc[0] * vinv), sc[0][1] * (vsc[1] * vinv)), 0u,
                              pack_f16(sc[1][0] * (vsc[8] * vinv), sc[1][1] * (vsc[9] * vinv)), 0u};
#pragma unroll
      for (int n = 0; n < HD / 8; n += 2) {
        uint32_t b[4];
        ldsm_x4_trans(b, vs + (kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 + (lane >> 4) * 8);
        float t0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, t1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_f16(t0, pa, b[0], b[1]);
        mma_f16(t1, pa, b[2], b[3]);
        o[n][0] = fmaf(t0[0], vmul, o[n][0] * alpha);
        o[n][1] = fmaf(t0[1], vmul, o[n][1] * alpha);
        o[n + 1][0] = fmaf(t1[0], vmul, o[n + 1][0] * alpha);
        o[n + 1][1] = fmaf(t1[1], vmul, o[n + 1][1] * alpha);
      }
    } else {
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
        ldsm_x4_trans(b, vs + (kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 + (lane >> 4) * 8);
        mma_bf16(o[n], pa, b[0], b[1]);
        mma_bf16(o[n + 1], pa, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free: reuse them for the merge

  // Merge the warps: row qd's sum over its 4 lanes, then per (head, dim) over the warps.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  float* sm_o = reinterpret_cast<float*>(smem_raw);  // [kWarps][8][HD]
  if (qd < G) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      sm_o[(warp * 8 + qd) * HD + n * 8 + qm * 2] = o[n][0];
      sm_o[(warp * 8 + qd) * HD + n * 8 + qm * 2 + 1] = o[n][1];
    }
    if (qm == 0) {
      sm_m[warp][qd] = m;
      sm_l[warp][qd] = l;
    }
  }
  __syncthreads();
  const size_t row0 = (size_t(s) * Hq + size_t(kvh) * G) * splits;  // part row of head g: + g*splits
  for (int e = threadIdx.x; e < G * HD; e += blockDim.x) {
    const int g = e / HD, d = e % HD;
    float M, L, O;
    merge_warp_partials<kWarps>(sm_m, sm_l, sm_o, HD, g, d, M, L, O);
    if (eff == 1) {
      out[size_t(s) * out_stride + size_t(kvh * G + g) * HD + d] =
          __float2bfloat16(L > 0.0f ? O / L : 0.0f);
    } else {
      const size_t row = row0 + size_t(g) * splits + split;
      part_o[row * HD + d] = O;
      if (d == 0) {
        part_ml[row * 2] = M;
        part_ml[row * 2 + 1] = L;
      }
    }
  }
  if (eff == 1) return;

  // Last split of (s, kvh) to arrive merges every split's partial.
  __threadfence();
  __syncthreads();
  int* counter = counters + size_t(s) * Hkv + kvh;
  if (threadIdx.x == 0) sm_last = atomicAdd(counter, 1) == eff - 1;
  __syncthreads();
  if (!sm_last) return;
  __threadfence();
  for (int e = threadIdx.x; e < G * HD; e += blockDim.x) {
    const int g = e / HD, d = e % HD;
    const size_t r0 = row0 + size_t(g) * splits;
    float M = -1e30f;
    for (int i = 0; i < eff; ++i) M = fmaxf(M, __ldcg(part_ml + (r0 + i) * 2));
    float L = 0.0f, O = 0.0f;
    for (int i = 0; i < eff; ++i) {
      const float f = exp2f(__ldcg(part_ml + (r0 + i) * 2) - M);
      L += __ldcg(part_ml + (r0 + i) * 2 + 1) * f;
      O += __ldcg(part_o + (r0 + i) * HD + d) * f;
    }
    out[size_t(s) * out_stride + size_t(kvh * G + g) * HD + d] =
        __float2bfloat16(L > 0.0f ? O / L : 0.0f);
  }
  if (threadIdx.x == 0) *counter = 0;  // ready for the next launch (graph replays too)
}

template <int W, int ST, int HD, bool F8>
void launch(const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out, int out_stride, int S, int Hq,
            int Hkv, float scale_log2, int splits, float* part_o, float* part_ml, int* counters,
            cudaStream_t stream) {
  constexpr int bytes = MmaShape<W, ST, HD, F8>::kSmem;
  static_assert(W * 8 * HD * 4 <= bytes, "the warp merge reuses the stages");
  static bool configured = false;  // per template instance; set once per process
  if (!configured) {
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(decode_mma_kernel<W, ST, HD, F8>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    configured = true;
  }
  decode_mma_kernel<W, ST, HD, F8><<<dim3(Hkv, S, splits), W * 32, bytes, stream>>>(
      q, q_stride, kv, Hq, Hkv, scale_log2, splits, part_o, part_ml, counters, out, out_stride);
}

template <int HD>
void launch_shape(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out,
                  int out_stride, int S, int Hq, int Hkv, float scale_log2, int splits,
                  float* part_o, float* part_ml, int* counters, cudaStream_t stream) {
#define TANDEM_DECODE_MMA(W, ST, F8)                                                        \
  launch<W, ST, HD, F8>(q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits, part_o, \
                        part_ml, counters, stream)
  const bool narrow = shape == DecodeMma::kNarrow;
  if (kv.fp8()) {
    if (narrow)
      TANDEM_DECODE_MMA(2, 4, true);
    else
      TANDEM_DECODE_MMA(4, 4, true);
  } else if (narrow) {
    TANDEM_DECODE_MMA(2, 3, false);
  } else {
    TANDEM_DECODE_MMA(4, 3, false);
  }
#undef TANDEM_DECODE_MMA
}

}  // namespace

bool decode_attention_mma_supports(int hd, int group) {
  return (hd == 64 || hd == 128) && group >= 1 && group <= 8;
}

void decode_attention_mma(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv,
                          bf16_t* out, int out_stride, int S, int Hq, int Hkv, int hd,
                          float scale_log2, int splits, float* part_o, float* part_ml,
                          int* counters, cudaStream_t stream) {
  if (hd == 64)
    launch_shape<64>(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits,
                     part_o, part_ml, counters, stream);
  else if (hd == 128)
    launch_shape<128>(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits,
                      part_o, part_ml, counters, stream);
  else
    cuda_fail("decode_attention_mma", "head_dim must be 64 or 128", __FILE__, __LINE__);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
