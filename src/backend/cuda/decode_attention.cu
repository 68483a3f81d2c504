#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/decode_attention_mma.cuh"
#include "backend/cuda/kv_fp8.cuh"

namespace tandem::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;    // key chunks loaded before any is used (latency hiding)
constexpr int kMaxGroup = 8;  // Qwen3 dense models have at most 64/8 query heads per KV head

// Grid (S, Hq), hd threads: merge the splits of one (sequence, head).
__global__ void decode_combine_kernel(const float* part_o, const float* part_ml,
                                      const int32_t* ctx_lens, bf16_t* out, int out_stride, int Hq,
                                      int hd, int splits) {
  const int s = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int eff = decode_effective_splits(ctx_lens[s], splits);
  const size_t row0 = (size_t(s) * Hq + h) * splits;
  float M = -1e30f;
  for (int i = 0; i < eff; ++i) M = fmaxf(M, part_ml[(row0 + i) * 2]);
  float L = 0.0f, O = 0.0f;
  for (int i = 0; i < eff; ++i) {
    const float f = exp2f(part_ml[(row0 + i) * 2] - M);
    L += part_ml[(row0 + i) * 2 + 1] * f;
    O += part_o[(row0 + i) * hd + d] * f;
  }
  out[size_t(s) * out_stride + size_t(h) * hd + d] = __float2bfloat16(L > 0.0f ? O / L : 0.0f);
}

// Grid (Hkv, S, splits), 4 warps. Lanes split a key into hd/8 chunks of 8 (LPT lanes per
// token), so a warp scores TPW = 32/LPT tokens per step for all G query heads of the group.
// Each warp keeps its own running max m (warp-uniform), partial sums l and partial output
// acc per lane; warps and then splits are merged with the usual log-sum-exp rescaling.
// Output of a split: part_o [S, Hq, splits, hd] (unnormalised), part_ml [S, Hq, splits, 2].
// A sequence uses min(splits, ceil(ctx / 64)) splits (blocks past that exit at once).
// F8: the cache holds e4m3 codes and per-vector scales (PagedKv), widened as it is read.
template <int HD, bool F8>
__global__ void __launch_bounds__(kWarps * 32)
    decode_split_kernel(const bf16_t* q, int q_stride, PagedKv kv, int Hq, int Hkv,
                        float scale_log2, int splits, float* part_o, float* part_ml) {
  constexpr int LPT = HD / 8;
  constexpr int TPW = 32 / LPT;
  const int kvh = blockIdx.x, s = blockIdx.y, split = blockIdx.z;
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int G = Hq / Hkv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tslot = lane / LPT, c = lane % LPT;
  const DecodeKeyRange range = decode_key_range(kv.ctx_lens[s], splits, split);
  if (split >= range.eff) return;
  const int t0 = range.t0, t1 = range.t1;

  float qr[kMaxGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < G) {
      const int4 v =
          reinterpret_cast<const int4*>(q + size_t(s) * q_stride + size_t(kvh * G + g) * HD)[c];
      unpack8(v, qr[g]);
#pragma unroll
      for (int i = 0; i < 8; ++i) qr[g][i] *= scale_log2;
    }
  }
  float acc[kMaxGroup][8], m[kMaxGroup], l[kMaxGroup];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -1e30f;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const int32_t* bt = kv.block_tables + size_t(s) * kv.max_blocks;
  for (int base = t0 + warp * TPW * kUnroll; base < t1; base += kWarps * TPW * kUnroll) {
    using Chunk = std::conditional_t<F8, uint2, int4>;  // 8 values of one key
    Chunk kr[kUnroll], vr[kUnroll];
    float ksc[kUnroll], vsc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tok = base + u * TPW + tslot;
      kr[u] = vr[u] = Chunk{};
      ksc[u] = vsc[u] = 0.0f;
      if (tok < t1) {
        const int64_t slot = int64_t(bt[tok / kv.block_size]) * kv.block_size + tok % kv.block_size;
        const size_t vec = size_t(slot) * Hkv + kvh;
        kr[u] = reinterpret_cast<const Chunk*>(kv.k)[vec * HD / 8 + c];
        vr[u] = reinterpret_cast<const Chunk*>(kv.v)[vec * HD / 8 + c];
        if constexpr (F8) {
          ksc[u] = kv.k_scale[vec];
          vsc[u] = kv.v_scale[vec];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * TPW >= t1) break;  // warp-uniform
      const bool valid = base + u * TPW + tslot < t1;
      float kf[8], vf[8];
      if constexpr (F8) {
        kv_fp8x8_to_float(kr[u], ksc[u], kf);
        kv_fp8x8_to_float(vr[u], vsc[u], vf);
      } else {
        unpack8(kr[u], kf);
        unpack8(vr[u], vf);
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) d += qr[g][i] * kf[i];
#pragma unroll
        for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        const float sc = valid ? d : -INFINITY;
        float cmax = sc;
#pragma unroll
        for (int o = LPT; o < 32; o <<= 1)
          cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
        const float mn = fmaxf(m[g], cmax);
        const float alpha = exp2f(m[g] - mn);
        const float p = valid ? exp2f(sc - mn) : 0.0f;
        l[g] = l[g] * alpha + p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * alpha + p * vf[i];
        m[g] = mn;
      }
    }
  }

  // Merge the token slots of the warp (lanes with the same chunk c), then the warps.
  __shared__ float sm_m[kWarps][kMaxGroup], sm_l[kWarps][kMaxGroup];
  __shared__ float sm_o[kWarps][kMaxGroup][HD];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int o = LPT; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
    }
    if (tslot == 0) {
#pragma unroll
      for (int i = 0; i < 8; ++i) sm_o[warp][g][c * 8 + i] = acc[g][i];
    }
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * HD; e += blockDim.x) {
    const int g = e / HD, d = e % HD;
    float M, L, O;
    merge_warp_partials<kWarps>(sm_m, sm_l, &sm_o[0][0][0], HD, g, d, M, L, O);
    const size_t row = (size_t(s) * Hq + kvh * G + g) * splits + split;
    part_o[row * HD + d] = O;
    if (d == 0) {
      part_ml[row * 2] = M;
      part_ml[row * 2 + 1] = L;
    }
  }
}

template <int HD>
void launch_split(const bf16_t* q, int q_stride, PagedKv kv, int S, int Hq, int Hkv,
                  float scale_log2, int splits, float* part_o, float* part_ml,
                  cudaStream_t stream) {
  dim3 grid(Hkv, S, splits);
  if (kv.fp8())
    decode_split_kernel<HD, true><<<grid, kWarps * 32, 0, stream>>>(
        q, q_stride, kv, Hq, Hkv, scale_log2, splits, part_o, part_ml);
  else
    decode_split_kernel<HD, false><<<grid, kWarps * 32, 0, stream>>>(
        q, q_stride, kv, Hq, Hkv, scale_log2, splits, part_o, part_ml);
}

DecodeKernel g_kernel = [] {
  const char* env = std::getenv("TANDEM_DECODE_ATTN");
  const std::string_view e = env ? env : "";
  if (e == "portable") return DecodeKernel::kPortable;
  if (e == "wide") return DecodeKernel::kWide;
  if (e == "narrow") return DecodeKernel::kNarrow;
  return DecodeKernel::kAuto;
}();

// Multiprocessors of the current device (queried once per device).
int current_sms() {
  static std::array<std::atomic<int>, 16> sms{};
  int dev = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
  auto& n = sms[size_t(std::clamp(dev, 0, 15))];
  if (n.load(std::memory_order_relaxed) == 0) {
    int v = 0;
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    n.store(v, std::memory_order_relaxed);
  }
  return n.load(std::memory_order_relaxed);
}

}  // namespace

DecodeMma pick_decode_mma(int items, int splits, int num_sms, bool fp8) {
  const int blocks = items * splits;
  // Fraction of the slots the grid's waves fill (slots: blocks resident at once).
  auto fill = [&](int slots) {
    const int waves = (blocks + slots - 1) / slots;
    return double(blocks) / (double(waves) * slots);
  };
  // Measured on the H200 at Qwen3-14B's heads (DecodeAttentionTiming, `bench --sections
  // batch`): with one split, narrow is faster wherever its waves are as full as wide's (40 /
  // 48 / 64 sequences: decode steps +3.5 / +3.4 / +1%; 128: +2%; 256: +3%) and slower where
  // they are not (96 sequences: 1.45 narrow waves, -2.4%). Split grids (batches of 2-32,
  // splits of at most a few 64-key tiles, as splits were then) lost 0.5-3.5% narrow or were
  // even, and a grid that fits one wide wave keeps the wide shape's extra warps.
  //
  // FP8 (DecodeAttentionTiming, contexts of 528): wide wherever one wide wave holds the grid
  // (batch 1 and 8: 6.2 / 15.9 us against 7.0 / 22.4 narrow), otherwise the shape whose waves
  // fill better, split or not: batch 32 (2 splits) and 64 narrow (29.2 / 33.3 us against
  // 32.6 / 41.6), 96, 128 and 256 wide (48.1 / 65.7 / 117.7 against 57.7 / 66.2 / 122.3).
  if (fp8) {
    if (blocks <= 3 * num_sms) return DecodeMma::kWide;
    return fill(5 * num_sms) > fill(3 * num_sms) ? DecodeMma::kNarrow : DecodeMma::kWide;
  }
  if (splits > 1 || blocks <= 2 * num_sms) return DecodeMma::kWide;
  return fill(4 * num_sms) >= fill(2 * num_sms) - 0.05 ? DecodeMma::kNarrow : DecodeMma::kWide;
}

void set_decode_attention_kernel(DecodeKernel k) {
  g_kernel = k;
}

size_t decode_attention_workspace(int S, int Hq, int hd, int splits) {
  // part_o, part_ml, then one split counter per (sequence, head) (ints, zero between calls).
  return size_t(S) * Hq * splits * (hd + 2) + size_t(S) * Hq;
}

int decode_attention_splits(int S, int Hkv, int num_sms) {
  // About one block an SM, at most 16 splits: each split's partial costs the merging block a
  // pass, so past that more splits cost more than they spread. H200, Qwen3-14B, against 2
  // blocks an SM and at most 32 (tok/s, with kDecodeMinSplitTokens 128 against 64): batch 1
  // at contexts 512 / 2,048 / 8,192 +1.1 / +5.1 / +3.6%, batch 8 +1.8 / +3.3 / +7.4%, batch 32
  // +4.6 / +4.5 / +2.1%; from batch 33 up both give one split.
  const int blocks = std::max(1, S * Hkv);
  return std::clamp((num_sms + blocks - 1) / blocks, 1, 16);
}

void decode_attention(const bf16_t* q, int q_stride, PagedKv kv, bf16_t* out, int out_stride, int S,
                      int Hq, int Hkv, int hd, float scale, int splits, float* workspace,
                      cudaStream_t stream) {
  if (S <= 0) return;
  if (Hq % Hkv != 0 || Hq / Hkv > kMaxGroup)
    cuda_fail("decode_attention", "query heads per KV head must divide and be <= 8", __FILE__,
              __LINE__);
  float* part_o = workspace;
  float* part_ml = workspace + size_t(S) * Hq * splits * hd;
  const float scale_log2 = scale * 1.4426950408889634f;
  if (decode_attention_mma_supports(hd, Hq / Hkv) && g_kernel != DecodeKernel::kPortable) {
    int* counters = reinterpret_cast<int*>(part_ml + size_t(S) * Hq * splits * 2);
    // Graph-safe: the shape depends on the launch's dimensions only.
    const DecodeMma shape = g_kernel == DecodeKernel::kNarrow ? DecodeMma::kNarrow
                            : g_kernel == DecodeKernel::kWide
                                ? DecodeMma::kWide
                                : pick_decode_mma(S * Hkv, splits, current_sms(), kv.fp8());
    decode_attention_mma(shape, q, q_stride, kv, out, out_stride, S, Hq, Hkv, hd, scale_log2,
                         splits, part_o, part_ml, counters, stream);
    return;
  }
#define TANDEM_DECODE_CASE(D)                                                                  \
  case D:                                                                                      \
    launch_split<D>(q, q_stride, kv, S, Hq, Hkv, scale_log2, splits, part_o, part_ml, stream); \
    break;
  switch (hd) {
    TANDEM_DECODE_CASE(16)
    TANDEM_DECODE_CASE(32)
    TANDEM_DECODE_CASE(64)
    TANDEM_DECODE_CASE(128)
    TANDEM_DECODE_CASE(256)
    default:
      cuda_fail("decode_attention", "unsupported head_dim", __FILE__, __LINE__);
  }
#undef TANDEM_DECODE_CASE
  TANDEM_CUDA_CHECK_LAUNCH();
  decode_combine_kernel<<<dim3(S, Hq), hd, 0, stream>>>(part_o, part_ml, kv.ctx_lens, out,
                                                        out_stride, Hq, hd, splits);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
