// Decode attention over an FP8 cache on tensor cores. As in decode_attention_mma.cu, the G
// query heads of a KV head are the rows of m16n8k16 tiles and cp.async stages stream 16 W-key
// tiles of the paged cache, here as e4m3 codes and per-vector scales: half the bytes of bf16.
// Each lane builds its mma fragments straight from the staged codes in registers (no widened
// copy of a tile in shared memory, no barrier for it). That needs each lane's codes to sit
// together in a key's row, which two permutations arrange:
//
//  - S = Q K^T sums over head dims, so the mma's k index may map to any dims as long as Q and
//    K agree. Lane (qd, qm) scores key qd of an 8-key n-tile; at k-step kk its fragment holds
//    the mma's k = 2qm, 2qm+1, 2qm+8, 2qm+9, which here are dims qm*HD/4 + 4kk + {0, 1, 2, 3}:
//    over the HD/16 steps one contiguous HD/4-byte run of the key's row.
//  - O = P V: the output's dims may be permuted and put back when the block merges. The
//    mma's n-tile n, column qd is dim qd*HD/8 + n, so lane (qd, qm) needs dims
//    [qd*HD/8, (qd+1)*HD/8) of its four keys 2qm, 2qm+1, 2qm+8, 2qm+9: one run a key.
//
// Codes widen to their exact fp16 values on the conversion unit, one instruction a pair (V's
// pairs of two keys interleaved by a byte permute first); widening V by integer operations
// instead measured 3-7% slower on the H200. Scales go where they are per key: each score
// times its key's K scale; each probability times its key's V scale over the largest V
// scale the warp has seen (fp16 range), that largest applied to the output in fp32.
#include "backend/cuda/check.cuh"
#include "backend/cuda/decode_attention_mma.cuh"
#include "backend/cuda/decode_mma_finish.cuh"
#include "backend/cuda/decode_mma_rows.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/mma.cuh"

namespace tandem::cuda {
namespace {

// W warps each scoring 16 keys of a (16 W)-key tile, ST stages. A staged code row is HD + 16
// bytes: with that padding the lanes' 16-byte reads of a quarter warp hit distinct banks.
template <int W, int ST, int HD>
struct F8Shape {
  static constexpr int kTile = 16 * W;
  static constexpr int kRow = HD + 16;
  static constexpr int kStage = 2 * kTile * kRow + 2 * kTile * int(sizeof(float));
  static constexpr int kMerge = W * 8 * kDecodeMergeLd<HD> * int(sizeof(float));  // merge reuses it
  static constexpr int kSmem = ST * kStage > kMerge ? ST* kStage : kMerge;
  static constexpr int kBlocksPerSm = (227 * 1024) / (kSmem + 1024);
};

// DPL codes of a key's row (DPL 8 or 16) into 32-bit words.
template <int DPL>
__device__ __forceinline__ void ld_codes(uint32_t (&w)[DPL / 4], const uint8_t* p) {
  if constexpr (DPL == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else {
    static_assert(DPL == 8, "8 or 16 codes");
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  }
}

// Grid (Hkv, S, splits), 32 W threads; the split, tile and merge scheme of decode_mma_kernel.
template <int W, int ST, int HD>
__global__ void __launch_bounds__(W * 32, F8Shape<W, ST, HD>::kBlocksPerSm)
    decode_mma_f8_kernel(const bf16_t* q, int q_stride, PagedKv kv, int Hq, int Hkv,
                         float scale_log2, int splits, float* part_o, float* part_ml, int* counters,
                         bf16_t* out, int out_stride) {
  using Sh = F8Shape<W, ST, HD>;
  constexpr int kTile = Sh::kTile, kRow = Sh::kRow;
  constexpr int KPL = HD / 4;  // K codes a lane reads of a key: HD/16 k-steps of 4
  constexpr int DPL = HD / 8;  // V codes a lane reads of a key: one per n-tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // [ST][kTile][kRow] K codes, the same for V, then [ST][kTile] K scales and V scales.
  uint8_t* K8 = smem_raw;
  uint8_t* V8 = K8 + ST * kTile * kRow;
  float* KSc = reinterpret_cast<float*>(V8 + ST * kTile * kRow);
  float* VSc = KSc + ST * kTile;
  __shared__ float sm_m[W][8], sm_l[W][8];
  __shared__ int sm_last;

  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const auto [kvh, s, split, G, warp, lane, qd, qm, eff, t0, t1, ntiles] =
      decode_mma_block(kv.ctx_lens, Hq, Hkv, splits, kTile);
  if (split >= eff) return;

  // Each thread copies one 16-code chunk column c of every (W*32/CPK)-th key of a tile, and
  // the key's two scales when c == 0.
  constexpr int CPK = HD / 16;
  constexpr int kKeyStep = W * 32 / CPK;
  const int c = threadIdx.x % CPK;
  DecodeKeyRows<kTile, kKeyStep> rows(kv.block_tables + size_t(s) * kv.max_blocks, t0, t1,
                                      kv.block_size, threadIdx.x / CPK);
  const uint8_t* kbase = static_cast<const uint8_t*>(kv.k) + size_t(kvh) * HD + c * 16;
  const uint8_t* vbase = static_cast<const uint8_t*>(kv.v) + size_t(kvh) * HD + c * 16;
  auto load_tile = [&](int j, int stage) {  // then fetches tile j + 1's rows
#pragma unroll
    for (int i = 0; i < rows.KPT; ++i) {
      const int slot = rows.slot(j, i);
      const bool ok = slot >= 0;
      const size_t vec = ok ? size_t(unsigned(slot)) * unsigned(Hkv) : 0;  // (slot, head 0)
      const int row = stage * kTile + rows.first + i * kKeyStep;
      cp_async16(K8 + row * kRow + c * 16, kbase + vec * HD, ok);
      cp_async16(V8 + row * kRow + c * 16, vbase + vec * HD, ok);
      if (c == 0) {
        cp_async4(KSc + row, kv.k_scale + vec + kvh, ok);
        cp_async4(VSc + row, kv.v_scale + vec + kvh, ok);
      }
    }
    rows.fetch(j + 1);
  };

  // The cached tiles before the wait for the kernel ahead (q and the new key are its output;
  // launched plainly, as this kernel is, the wait is a no-op).
  rows.template start<ST>(ntiles, decode_ready_tiles({eff, t0, t1}, kv.ctx_lens[s], kTile),
                          load_tile);

  // A fragments of Q as fp16, in K's dim order: row qd = head kvh*G + qd (zero past G).
  uint32_t qa[HD / 16][2];
  {
    const bool valid = qd < G;
    const bf16_t* qr =
        q + size_t(s) * q_stride + size_t(kvh * G + (valid ? qd : 0)) * HD + qm * KPL;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t b = valid ? ld32(qr + kk * 4 + h * 2) : 0u;
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b));
        qa[kk][h] = pack_f16(f.x, f.y);
      }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m = -1e30f, l = 0.0f;  // row qd: running max (log2 domain) and this lane's sum
  float vref = 0.0f;           // largest V scale so far: o holds output / vref

  for (int j = 0; j < ntiles; ++j) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // tile j has landed for all; every warp is done with tile j - 1
    if (j + ST - 1 < ntiles) load_tile(j + ST - 1, (j + ST - 1) % ST);
    cp_async_commit();

    const int kb = warp * 16;              // this warp's keys within the tile
    const int key0 = t0 + j * kTile + kb;  // absolute index of its first key
    if (key0 >= t1) continue;              // warp-uniform: nothing left for this warp
    const int stage = j % ST;
    const uint8_t* ks = K8 + (stage * kTile + kb) * kRow;
    const uint8_t* vs = V8 + (stage * kTile + kb) * kRow;

    // This lane's codes: K of keys qd and 8 + qd, V of keys 2qm, 2qm+1, 2qm+8, 2qm+9.
    uint32_t kw[2][KPL / 4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < KPL / 16; ++i) {
        const uint4 v =
            *reinterpret_cast<const uint4*>(ks + (nt * 8 + qd) * kRow + qm * KPL + i * 16);
        kw[nt][4 * i] = v.x, kw[nt][4 * i + 1] = v.y, kw[nt][4 * i + 2] = v.z,
                   kw[nt][4 * i + 3] = v.w;
      }
    uint32_t vw[4][DPL / 4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      ld_codes<DPL>(vw[r], vs + ((r >> 1) * 8 + qm * 2 + (r & 1)) * kRow + qd * DPL);

    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        const uint32_t a[4] = {qa[kk][0], 0u, qa[kk][1], 0u};
        mma_f16(sc[nt], a, kv_fp8x2_to_f16x2(kw[nt][kk]), kv_fp8x2_to_f16x2(kw[nt][kk] >> 16));
      }
    }
    // Scores of keys nt*8 + 2qm + e; their scales at ksc[nt*8 + e] (K) and vsc (V).
    const float* ksc = KSc + stage * kTile + kb + qm * 2;
    const float* vsc = VSc + stage * kTile + kb + qm * 2;
    const float mul[2][2] = {{scale_log2 * ksc[0], scale_log2 * ksc[1]},
                             {scale_log2 * ksc[8], scale_log2 * ksc[9]}};
    const float alpha = decode_tile_softmax(sc, mul, key0, qm, t1, m, l);

    // P V = vref * sum_k (p_k * s_k / vref) * code_k, the fp16 probabilities in
    // [0, 1]. The lanes of a quad see the warp's 16 keys, so vref is warp-uniform; it only
    // grows, and o is rescaled to the new one together with the new max.
    float vmax = fmaxf(fmaxf(vsc[0], vsc[1]), fmaxf(vsc[8], vsc[9]));
    vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
    vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 2));
    const float vnew = fmaxf(vref, vmax);
    const float vinv = vnew > 0.0f ? 1.0f / vnew : 0.0f;
    const float rescale = alpha * (vref * vinv);  // vref 0: o is still zero
    vref = vnew;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      o[n][0] *= rescale;
      o[n][1] *= rescale;
    }
    const uint32_t pa[4] = {pack_f16(sc[0][0] * (vsc[0] * vinv), sc[0][1] * (vsc[1] * vinv)), 0u,
                            pack_f16(sc[1][0] * (vsc[8] * vinv), sc[1][1] * (vsc[9] * vinv)), 0u};
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
      // Bytes n % 4 and n % 4 + 1 of word n / 4 of two keys' runs, interleaved: the code
      // pairs of n-tiles n (low half) and n + 1 (high half).
      const uint32_t b = uint32_t(n % 4);
      const uint32_t sel = b | ((4 + b) << 4) | ((b + 1) << 8) | ((5 + b) << 12);
      const uint32_t lo = __byte_perm(vw[0][n / 4], vw[1][n / 4], sel);
      const uint32_t hi = __byte_perm(vw[2][n / 4], vw[3][n / 4], sel);
      mma_f16(o[n], pa, kv_fp8x2_to_f16x2(lo), kv_fp8x2_to_f16x2(hi));
      mma_f16(o[n + 1], pa, kv_fp8x2_to_f16x2(lo >> 16), kv_fp8x2_to_f16x2(hi >> 16));
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free: reuse them for the merge

  // Row qd's sum over its 4 lanes; its outputs back in dim order, times vref.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  float* sm_o = reinterpret_cast<float*>(smem_raw) + (warp * 8 + qd) * kDecodeMergeLd<HD>;
  if (qd < G) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) sm_o[(qm * 2 + e) * DPL + n] = o[n][e] * vref;
    if (qm == 0) {
      sm_m[warp][qd] = m;
      sm_l[warp][qd] = l;
    }
  }
  decode_mma_finish<W, HD>(
      sm_m, sm_l, reinterpret_cast<const float*>(smem_raw), sm_last,
      {s, kvh, G, Hq, Hkv, split, splits, eff, part_o, part_ml, counters, out, out_stride});
}

template <int W, int ST, int HD>
void launch(const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out, int out_stride, int S, int Hq,
            int Hkv, float scale_log2, int splits, float* part_o, float* part_ml, int* counters,
            cudaStream_t stream) {
  launch_decode_mma<decode_mma_f8_kernel<W, ST, HD>>(
      W * 32, F8Shape<W, ST, HD>::kSmem, q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2,
      splits, part_o, part_ml, counters, stream, /*pdl=*/false);
}

template <int HD>
void launch_shape(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out,
                  int out_stride, int S, int Hq, int Hkv, float scale_log2, int splits,
                  float* part_o, float* part_ml, int* counters, cudaStream_t stream) {
  if (shape == DecodeMma::kNarrow)
    launch<2, 4, HD>(q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits, part_o,
                     part_ml, counters, stream);
  else
    launch<4, 4, HD>(q, q_stride, kv, out, out_stride, S, Hq, Hkv, scale_log2, splits, part_o,
                     part_ml, counters, stream);
}

}  // namespace

void decode_attention_mma_f8(DecodeMma shape, const bf16_t* q, int q_stride, PagedKv kv,
                             bf16_t* out, int out_stride, int S, int Hq, int Hkv, int hd,
                             float scale_log2, int splits, float* part_o, float* part_ml,
                             int* counters, cudaStream_t stream) {
  decode_mma_for_head_dim(hd, "decode_attention_mma_f8", [&](auto h) {
    launch_shape<decltype(h)::value>(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv,
                                     scale_log2, splits, part_o, part_ml, counters, stream);
  });
}

}  // namespace tandem::cuda
