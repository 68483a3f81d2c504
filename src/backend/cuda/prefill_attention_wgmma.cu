#include "backend/cuda/prefill_attention_wgmma.cuh"

#include <climits>
#include <mutex>
#include <vector>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_attention.cuh"
#include "backend/cuda/prefill_rows.cuh"
#include "backend/cuda/skinny_gemm.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgmma.cuh"

namespace tandem::cuda {
namespace {

constexpr int kHd = 128;        // head_dim
constexpr int kRow = 128;       // bytes of a 64-element swizzled bf16 row
constexpr int kBc = 64;         // keys per K/V tile
constexpr int kStages = 2;      // K/V tiles in flight
constexpr int kWgs = 2;         // warpgroups; each owns 64 (query row, head) pairs
constexpr int kBm = 64 * kWgs;  // (query row, head) pairs per block
constexpr int kThreads = 128 * kWgs;
constexpr int kQBytes = 2 * kBm * kRow;   // Q: two head_dim halves
constexpr int kKvBytes = 2 * kBc * kRow;  // one bf16 K or V tile: two halves
constexpr int kF8MaxHkv = 8;              // FP8: scale rows staged per key (Hkv 4 or 8)
constexpr int kF8Codes = kBc * kHd;       // FP8: one staged K or V tile of codes
constexpr int kF8Scales = kBc * kF8MaxHkv * 4;
// bf16: Q, K and V rings. FP8: Q, one widened K and V, rings of codes and scale rows.
constexpr int kSmemBf16 = 1024 + kQBytes + 2 * kStages * kKvBytes + 2 * kStages * 8;
constexpr int kSmemF8 =
    1024 + kQBytes + 2 * kKvBytes + 2 * kStages * (kF8Codes + kF8Scales) + 2 * kStages * 8;

#ifdef TANDEM_WGMMA
__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Synchronises the 128 threads of warpgroup `wg` (named barrier 1 + wg).
__device__ __forceinline__ void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
}
#endif

// One block = one KV head of one tile of query rows, for a chunk of kBm (query row, head)
// pairs, flattened as in prefill_attention.cu (m = row * G + head in the group). Warpgroup w
// owns pairs [64 w, 64 w + 64) of the chunk: S = Q K^T is one m64n64 wgmma chain over
// head_dim (Q and K from shared memory, K-major), the softmax runs on S's accumulator
// registers (each thread holds 2 rows x 16 keys), and O += P V is an m64n128 chain with P
// from registers (the accumulator layout is the A fragment's) and V from shared memory,
// MN-major. Warp 0 is also the producer: it copies each K/V tile by TMA, one box per cache
// block (and half), into a 2-stage ring with a full barrier (bytes landed) and an empty one
// (both warpgroups done) per stage; the block-table entries of a refill are loaded a tile
// ahead. Every operand tile is in the 128-byte swizzle the wgmma descriptors read: Q rows
// (cp.async, swizzled by hand) and K/V rows (TMA) 128 bytes a half. In the last tile the V
// rows past the keys any row reads are zeroed: they hold stale or unwritten slots, and
// 0 * NaN is NaN.
//
// F8 (FP8 cache, kv_fp8.cuh): the ring holds codes and the scale rows of the tile's keys
// (all KV heads of a key: TMA boxes must be 16 bytes wide); each tile, all threads widen
// their share to bf16(code * scale) into one swizzled K and V tile (zeros past the keys
// read), between two block barriers, then the math is the bf16 path's. The widened values
// are those of the mma.sync kernel's FP8 path.
// A warp whose rows all kept their running max skips the accumulator rescale (H200, 8k-16k
// contexts: +0.3-1.5%).
template <bool F8>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_attn_wgmma_kernel(const __grid_constant__ CUtensorMap kmap,
                              const __grid_constant__ CUtensorMap vmap,
                              const __grid_constant__ CUtensorMap ksmap,
                              const __grid_constant__ CUtensorMap vsmap, const bf16_t* qkv,
                              int q_stride, const int32_t* positions, const int4* tiles, int nchunk,
                              const int32_t* block_tables, int max_blocks, const int32_t* ctx_lens,
                              int bs, int G, int Hkv, float scale_log2, bf16_t* out,
                              int out_stride) {
#ifdef TANDEM_WGMMA
  constexpr int kMaxPages = kBc / 16;  // cache blocks a tile spans (block size >= 16)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const Qs = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // bf16: K, V [stage][half][kBc][128 B]. F8: K, V [half][kBc][128 B] widened, then codes
  // [stage][kBc][hd] and scale rows [stage][kBc][Hkv].
  unsigned char* const Ks = Qs + kQBytes;
  unsigned char* const Vs = Ks + (F8 ? 1 : kStages) * kKvBytes;
  unsigned char* const K8 = Vs + (F8 ? 1 : kStages) * kKvBytes;
  unsigned char* const V8 = K8 + (F8 ? kStages * kF8Codes : 0);
  float* const Ksc = reinterpret_cast<float*>(V8 + (F8 ? kStages * kF8Codes : 0));
  float* const Vsc = Ksc + (F8 ? kStages * kF8Scales / 4 : 0);
  uint64_t* const full = reinterpret_cast<uint64_t*>(Vsc + (F8 ? kStages * kF8Scales / 4 : 0));
  uint64_t* const empty = full + kStages;
  __shared__ int s_pmax[kWgs], s_pmin[kWgs];

  const PrefillItem item = prefill_item(tiles, nchunk, Hkv, G, kBm);
  const int seq = item.seq, row0 = item.row0, M = item.M, m0 = item.m0, kvh = item.kvh;
  if (m0 >= M) return;  // the whole block, before any barrier

  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const int qd = lane >> 2, qm = lane & 3;
  const int mrow = m0 + wg * 64 + ((tid >> 5) & 3) * 16 + qd;  // this thread's rows: +0, +8
  int p[2];                                                    // their positions (-1: no row)
  int wmax, wmin;
  prefill_pair_positions(
      positions, row0, M, G, [&](int u) { return mrow + 8 * u; }, p, wmax, wmin);
  if (tid < kWgs) {
    s_pmax[tid] = -1;
    s_pmin[tid] = INT_MAX;
  }
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kWgs);
    }
    mbar_init_fence();
  }
  // Q pairs of the chunk into shared memory (zeros past M), 16-byte chunk c of pair mr at
  // half c / 8, swizzled position (c % 8) ^ (mr % 8).
  for (int i = tid; i < kBm * 16; i += kThreads) {
    const int mr = i >> 4, c = i & 15, m = m0 + mr;
    const bool ok = m < M;
    const bf16_t* g =
        ok ? qkv + size_t(row0 + m / G) * q_stride + size_t(kvh * G + m % G) * kHd + c * 8 : qkv;
    cp_async16(Qs + (c >> 3) * (kBm * kRow) + mr * kRow + (((c & 7) ^ (mr & 7)) << 4), g, ok);
  }
  cp_async_commit();
  __syncthreads();  // barriers initialised, s_pmax/s_pmin reset
  if (lane == 0) {
    atomicMax(&s_pmax[wg], wmax);
    atomicMin(&s_pmin[wg], wmin);
  }
  __syncthreads();
  int bmax = -1;
#pragma unroll
  for (int w = 0; w < kWgs; ++w) bmax = max(bmax, s_pmax[w]);
  const int wg_pmax = s_pmax[wg], wg_pmin = s_pmin[wg];
  const int kend = min(ctx_lens[seq], bmax + 1);  // keys [0, kend) are read by some row
  const int ntiles = kend > 0 ? (kend + kBc - 1) / kBc : 0;
  const int32_t* bt = block_tables + size_t(seq) * max_blocks;

  // Producer (warp 0): lane i holds the cache block of the tile's i-th page (loaded a tile
  // ahead), lane 0 arms the stage's barrier and issues the copies.
  int my_blk = 0;
  auto load_pages = [&](int j) {
    const int kt = j * kBc, np = (min(kt + kBc, kend) - kt + bs - 1) / bs;
    if (lane < np) my_blk = bt[kt / bs + lane];
  };
  auto issue = [&](int j) {  // warp 0, converged
    const int s = j % kStages, kt = j * kBc, np = (min(kt + kBc, kend) - kt + bs - 1) / bs;
    const int per_key = F8 ? 2 * (kHd + Hkv * 4) : 4 * kRow;
    if (lane == 0) mbar_arrive_expect(&full[s], uint32_t(np * bs * per_key));
#pragma unroll
    for (int i = 0; i < kMaxPages; ++i) {
      const int slot0 = __shfl_sync(0xffffffffu, my_blk, i) * bs;
      if (lane == 0 && i < np) {
        if constexpr (F8) {
          const int key = i * bs;
          tma_load_3d(K8 + s * kF8Codes + key * kHd, &kmap, 0, kvh, slot0, &full[s]);
          tma_load_3d(V8 + s * kF8Codes + key * kHd, &vmap, 0, kvh, slot0, &full[s]);
          tma_load_2d(Ksc + s * (kF8Scales / 4) + key * Hkv, &ksmap, 0, slot0, &full[s]);
          tma_load_2d(Vsc + s * (kF8Scales / 4) + key * Hkv, &vsmap, 0, slot0, &full[s]);
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int off = s * kKvBytes + h * kBc * kRow + i * bs * kRow;
            tma_load_3d(Ks + off, &kmap, h * 64, kvh, slot0, &full[s]);
            tma_load_3d(Vs + off, &vmap, h * 64, kvh, slot0, &full[s]);
          }
        }
      }
    }
  };
  if (tid < 32) {
    for (int j = 0; j < kStages && j < ntiles; ++j) {
      load_pages(j);
      issue(j);
    }
  }

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  float m_run[2] = {-1e30f, -1e30f}, l[2] = {0.0f, 0.0f};  // exp2-domain running max, sum

  cp_async_wait<0>();
  fence_proxy_async_smem();  // Q, written through cp.async, is read by wgmma
  __syncthreads();
  const unsigned char* const Qw = Qs + wg * 64 * kRow;

  for (int j = 0; j < ntiles; ++j) {
    const int s = j % kStages, kt = j * kBc;
    const uint32_t parity = uint32_t(j / kStages) & 1u;
    const bool refill = j + kStages < ntiles;
    if (tid < 32 && refill) load_pages(j + kStages);  // lands while this tile computes
    mbar_wait(&full[s], parity);
    unsigned char* const Kt = Ks + (F8 ? 0 : s * kKvBytes);
    unsigned char* const Vt = Vs + (F8 ? 0 : s * kKvBytes);
    if constexpr (F8) {
      __syncthreads();  // every warpgroup is done with the previous widened tile
      const int valid = min(kBc, kend - kt);  // keys loaded and read; zeros after
      for (int i = tid; i < 2 * kBc * 16; i += kThreads) {
        const int t = i / (kBc * 16), r = (i >> 4) % kBc, c = i & 15;
        uint4 w = make_uint4(0, 0, 0, 0);
        if (r < valid) {
          const uint2 q =
              *reinterpret_cast<const uint2*>((t ? V8 : K8) + s * kF8Codes + r * kHd + c * 8);
          w = kv_fp8x8_to_bf16(q, (t ? Vsc : Ksc)[s * (kF8Scales / 4) + r * Hkv + kvh]);
        }
        *reinterpret_cast<uint4*>((t ? Vt : Kt) + (c >> 3) * (kBc * kRow) + r * kRow +
                                  (((c & 7) ^ (r & 7)) << 4)) = w;
      }
      fence_proxy_async_smem();
      __syncthreads();  // the widened tile is complete; stage s is free
      if (tid < 32 && refill) issue(j + kStages);
    }
    if (wg_pmax >= kt) {  // some row of this warpgroup reads this key tile
      if (!F8 && kt + kBc > kend) {
        const int r0 = kend - kt;
        for (int i = tid & 127; i < (kBc - r0) * 16; i += 128) {
          const int r = r0 + (i >> 4), c = i & 15;
          *reinterpret_cast<uint4*>(Vt + (c >> 3) * (kBc * kRow) + r * kRow + (c & 7) * 16) =
              make_uint4(0, 0, 0, 0);
        }
        fence_proxy_async_smem();
        warpgroup_sync(wg);
      }
      // Descriptors advance by (byte offset) / 16 in their address field; the Q base goes
      // through an opaque move so the compiler does not keep all eight live across tiles.
      uint64_t qdesc = wgmma_desc(Qw);
      asm volatile("mov.b64 %0, %0;\n" : "+l"(qdesc));
      const uint64_t kdesc = wgmma_desc(Kt);
      float sc[kBc / 2];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHd / 16; ++kk) {  // 16 dims = 32 bytes into the swizzled rows
        const uint32_t qo = (kk >> 2) * (kBm * kRow) + (kk & 3) * 32;
        const uint32_t ko = (kk >> 2) * (kBc * kRow) + (kk & 3) * 32;
        Wgmma<kBc>::run(sc, qdesc + (qo >> 4), kdesc + (ko >> 4), kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_hold(sc);
      if (kt + kBc - 1 > wg_pmin || kt + kBc > kend) {  // diagonal or context end
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = kt + n * 8 + qm * 2 + (e & 1);
            if (!(col < kend && col <= p[e >> 1])) sc[4 * n + e] = -INFINITY;
          }
      }
      float alpha[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n)
          mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * u], sc[4 * n + 2 * u + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m_run[u], mx * scale_log2);  // -1e30 until a row sees a key
        alpha[u] = fast_exp2(m_run[u] - mn);
        m_run[u] = mn;
        float rs = 0.0f;
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n) {
          float& a = sc[4 * n + 2 * u];
          float& b = sc[4 * n + 2 * u + 1];
          a = fast_exp2(fmaf(a, scale_log2, -mn));
          b = fast_exp2(fmaf(b, scale_log2, -mn));
          rs += a + b;
        }
        l[u] = l[u] * alpha[u] + rs;
      }
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int n = 0; n < kHd / 8; ++n) {
          o[4 * n] *= alpha[0];
          o[4 * n + 1] *= alpha[0];
          o[4 * n + 2] *= alpha[1];
          o[4 * n + 3] *= alpha[1];
        }
      }
      uint32_t pa[kBc / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        pa[kk][0] = pack_bf16(sc[8 * kk + 0], sc[8 * kk + 1]);
        pa[kk][1] = pack_bf16(sc[8 * kk + 2], sc[8 * kk + 3]);
        pa[kk][2] = pack_bf16(sc[8 * kk + 4], sc[8 * kk + 5]);
        pa[kk][3] = pack_bf16(sc[8 * kk + 6], sc[8 * kk + 7]);
      }
      const uint64_t vdesc = wgmma_desc_mn(Vt, kBc * kRow);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk)  // keys 16 kk.. = 2048 bytes into each half
        WgmmaRegA<128>::run(o, pa[kk], vdesc + ((kk * 16 * kRow) >> 4), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_hold(o);
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) wgmma_hold(pa[kk]);  // read until the wait
    }
    if constexpr (!F8) {
      if ((tid & 127) == 0) mbar_arrive(&empty[s]);  // this warpgroup is done with stage s
      if (tid < 32 && refill) {
        mbar_wait(&empty[s], parity);
        issue(j + kStages);
      }
    }
  }

#pragma unroll
  for (int u = 0; u < 2; ++u) {
    float sum = l[u];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int m = mrow + 8 * u;
    if (m >= M) continue;
    bf16_t* dst = out + size_t(row0 + m / G) * out_stride + size_t(kvh * G + m % G) * kHd + qm * 2;
#pragma unroll
    for (int n = 0; n < kHd / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[4 * n + 2 * u] * inv, o[4 * n + 2 * u + 1] * inv);
  }
#endif
}

// Tensor maps of the caches seen so far (a runner's are fixed: K and V, and their scales,
// per layer), so a step does not re-encode them for every layer.
struct CacheMap {
  const void* base;
  int64_t slots;
  int Hkv, bs, kind;
  CUtensorMap map;
};

// kind 0: bf16 vectors [slots][Hkv][128], boxes of 64 dims x 1 head x bs slots, swizzled.
// kind 1: e4m3 codes, same layout, boxes of 128 codes x 1 head x bs slots.
// kind 2: fp32 scales [slots][Hkv], boxes of Hkv x bs.
CUtensorMap cache_map(const void* base, int64_t slots, int Hkv, int bs, int kind) {
  static std::mutex mu;
  static std::vector<CacheMap> maps;
  std::lock_guard<std::mutex> lock(mu);
  for (const CacheMap& c : maps)
    if (c.base == base && c.slots == slots && c.Hkv == Hkv && c.bs == bs && c.kind == kind)
      return c.map;
  if (maps.size() >= 512) maps.clear();  // tests allocate many caches; a runner has 4 a layer
  const int el = kind == 0 ? 2 : 1;
  const uint64_t dims3[3] = {uint64_t(kHd), uint64_t(Hkv), uint64_t(slots)};
  const uint64_t strides3[2] = {uint64_t(kHd) * el, uint64_t(Hkv) * kHd * el};
  const uint32_t box3[3] = {kind == 0 ? 64u : uint32_t(kHd), 1, uint32_t(bs)};
  const uint64_t dims2[2] = {uint64_t(Hkv), uint64_t(slots)};
  const uint64_t strides2[1] = {uint64_t(Hkv) * 4};
  const uint32_t box2[2] = {uint32_t(Hkv), uint32_t(bs)};
  CUtensorMap m =
      kind == 2
          ? tensor_map("prefill_attention", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, 2, dims2,
                       strides2, box2, CU_TENSOR_MAP_SWIZZLE_NONE)
          : tensor_map("prefill_attention",
                       kind == 0 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8,
                       base, 3, dims3, strides3, box3,
                       kind == 0 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
  maps.push_back({base, slots, Hkv, bs, kind, m});
  return m;
}

template <bool F8>
void launch(const CUtensorMap& km, const CUtensorMap& vm, const CUtensorMap& ksm,
            const CUtensorMap& vsm, const bf16_t* qkv, int q_stride, const int32_t* positions,
            const int32_t* tiles, int num_tiles, const PagedKv& kv, bf16_t* out, int out_stride,
            int G, int Hkv, float scale_log2, cudaStream_t stream) {
  constexpr int smem = F8 ? kSmemF8 : kSmemBf16;
  auto kernel = prefill_attn_wgmma_kernel<F8>;
  static const bool attr = [&] {
    TANDEM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)attr;
  const int nchunk = (kPrefillTileRows * G + kBm - 1) / kBm;
  const long long blocks = (long long)num_tiles * Hkv * nchunk;
  if (blocks > INT_MAX) cuda_fail("prefill_attention", "too many tiles", __FILE__, __LINE__);
  kernel<<<unsigned(blocks), kThreads, smem, stream>>>(
      km, vm, ksm, vsm, qkv, q_stride, positions, reinterpret_cast<const int4*>(tiles), nchunk,
      kv.block_tables, kv.max_blocks, kv.ctx_lens, kv.block_size, G, Hkv, scale_log2, out,
      out_stride);
}

}  // namespace

bool prefill_wgmma_fits(const void* qkv, int q_stride, const PagedKv& kv, int hd, int Hkv) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return hd == kHd && kv.slots > 0 &&
         (kv.block_size == 16 || kv.block_size == 32 || kv.block_size == 64) && q_stride % 8 == 0 &&
         aligned(qkv) && aligned(kv.k) && aligned(kv.v) &&
         (!kv.fp8() ||
          ((Hkv == 4 || Hkv == kF8MaxHkv) && aligned(kv.k_scale) && aligned(kv.v_scale))) &&
         skinny_supported();
}

void prefill_attention_wgmma(const bf16_t* qkv, int q_stride, const int32_t* positions,
                             const int32_t* tiles, int num_tiles, const PagedKv& kv, bf16_t* out,
                             int out_stride, int G, int Hkv, float scale_log2,
                             cudaStream_t stream) {
  if (!prefill_wgmma_fits(qkv, q_stride, kv, kHd, Hkv))
    cuda_fail("prefill_attention", "the wgmma kernel does not fit this call", __FILE__, __LINE__);
  const bool f8 = kv.fp8();
  const int bs = kv.block_size;
  const CUtensorMap km = cache_map(kv.k, kv.slots, Hkv, bs, f8 ? 1 : 0);
  const CUtensorMap vm = cache_map(kv.v, kv.slots, Hkv, bs, f8 ? 1 : 0);
  const CUtensorMap ksm = f8 ? cache_map(kv.k_scale, kv.slots, Hkv, bs, 2) : km;
  const CUtensorMap vsm = f8 ? cache_map(kv.v_scale, kv.slots, Hkv, bs, 2) : km;
  if (f8)
    launch<true>(km, vm, ksm, vsm, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride,
                 G, Hkv, scale_log2, stream);
  else
    launch<false>(km, vm, ksm, vsm, qkv, q_stride, positions, tiles, num_tiles, kv, out, out_stride,
                  G, Hkv, scale_log2, stream);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
