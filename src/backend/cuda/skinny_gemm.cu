#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/skinny_gemm.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgmma.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBK = 64;               // K sub-slice: one 128-byte swizzled row
constexpr int kThreads = 256;         // two warpgroups
constexpr int kMaxSplits = 8;         // the portable cluster size
constexpr int kMaxSmem = 226 * 1024;  // dynamic; the barriers take a little static memory
constexpr int KS = 2;  // 64-wide K sub-slices a stage: 256-byte runs of each weight row

// The kernels built: tile width nw (wgmma N, weight rows a warpgroup) and mt, the 64-row
// X tiles a block multiplies (X rows padded to 64 mt; rows >= T read as zeros). Every X tile
// shares the stage's weights, so more rows cost compute and X copies but no weight reads.
// (Three X tiles beside 160-row weight tiles were built and measured: 1.2-1.4x slower than
// cuBLASLt + SwiGLU at 160-192 rows, so T stops at 128.)
__host__ __device__ constexpr bool built(int nw, int mt) {
  return (nw == 80 || nw == 144) && mt >= 1 && mt <= 2;
}
__host__ __device__ constexpr int stage_bytes(int nw, int mt) {
  return KS * (2 * nw + 64 * mt) * kBK * 2;
}
// As many stages as fit (at most 4): 288-row tiles two, 160-row tiles four at 64 rows.
__host__ __device__ constexpr int stages_for(int nw, int mt) {
  return (kMaxSmem - 1024) / stage_bytes(nw, mt) < 4 ? (kMaxSmem - 1024) / stage_bytes(nw, mt) : 4;
}

// Tile layout: warpgroup w multiplies tile rows [w NW, (w + 1) NW). Plain form: tile row r is
// weight row c0 + r. SwiGLU form: each warpgroup's rows are NW / 2 gate rows, then the up
// rows of the same output columns, so a thread holds gate and up of a column together.
// Everything arrives by TMA: X (`xm`, T rows; the rows up to 64 MT read as zeros) and the
// weights (`wa`: all rows, or the gate rows; `wb`: the up rows).
// A stage holds KS consecutive 64-wide K sub-slices, so each weight row is read in runs of
// 128 KS contiguous bytes; the depth STAGES follows from NW and MT (stages_for).
// NORM (SwiGLU form only): X rows are unnormalised and W holds the norm weight folded in
// (rmsnorm.cuh); each block also sums the squares of the X rows it streams, and the epilogue
// scales row m's gate and up sums by rsqrt(mean(x_m^2) + eps) before the SwiGLU.
template <int NW, int MT, bool SWIGLU, bool NORM>
__global__ void __launch_bounds__(kThreads, 1)
    skinny_kernel(const __grid_constant__ CUtensorMap xm, const __grid_constant__ CUtensorMap wa,
                  const __grid_constant__ CUtensorMap wb, bf16_t* __restrict__ Y, int ldy, int T,
                  int N, int K, int iters_per_split, int rot, float eps, int accumulate) {
#ifdef TANDEM_WGMMA
  static_assert(SWIGLU || !NORM, "the fused norm is built for the SwiGLU form");
  extern __shared__ unsigned char smem_raw[];
  constexpr int STAGES = stages_for(NW, MT);
  constexpr int kRowsX = 64 * MT;              // X rows in a stage
  __shared__ uint64_t full[STAGES];            // stage s has landed (phase = use count & 1)
  __shared__ float row_ss[NORM ? kRowsX : 1];  // NORM: this block's sums of squares by X row
  launch_dependents();
  constexpr int BN = 2 * NW;                   // weight rows in the tile
  constexpr int kCols = SWIGLU ? BN / 2 : BN;  // output columns of the tile
  constexpr int kHalf = NW / 2;                // SwiGLU: output columns a warpgroup
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup, warp within it
  const int g = lane >> 2, q = lane & 3;
  const int c0 = blockIdx.x * kCols;
  const int num_iters = (K + KS * kBK - 1) / (KS * kBK);
  const int it_begin = blockIdx.y * iters_per_split;
  const int nk = min(num_iters, it_begin + iters_per_split) - it_begin;
  // Blocks start `rot` slices apart (each still reads its whole range), so that at any moment
  // the blocks read different column offsets of their rows.
  const int r0 = nk > 0 ? int((long(blockIdx.x) * rot) % nk) : 0;
  auto slice = [&](int it) { return it_begin + (it + r0 < nk ? it + r0 : it + r0 - nk); };
  // Stages aligned to the 128-byte swizzle's 1024-byte atom: weights, then X.
  bf16_t* const sw =
      reinterpret_cast<bf16_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  bf16_t* const sx = sw + STAGES * KS * BN * kBK;

  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) mbar_init(&full[st], 1);
    mbar_init_fence();
  }
  __syncthreads();
  // One thread copies a stage: the weights (two boxes of NW rows, or four of NW / 2 for
  // SwiGLU) and X; the weights may go before the wait for the kernel that writes X.
  constexpr uint32_t kStageBytes = KS * (BN + kRowsX) * kBK * sizeof(bf16_t);
  auto load_w = [&](int it, int stage) {
    mbar_arrive_expect(&full[stage], kStageBytes);
#pragma unroll
    for (int j = 0; j < KS; ++j) {
      const int k0 = (slice(it) * KS + j) * kBK;
      bf16_t* dst = sw + (stage * KS + j) * BN * kBK;
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        if constexpr (SWIGLU) {
          tma_load_2d(dst + w * NW * kBK, &wa, k0, c0 + w * kHalf, &full[stage]);
          tma_load_2d(dst + (w * NW + kHalf) * kBK, &wb, k0, c0 + w * kHalf, &full[stage]);
        } else {
          tma_load_2d(dst + w * NW * kBK, &wa, k0, c0 + w * NW, &full[stage]);
        }
      }
    }
  };
  auto load_x = [&](int it, int stage) {
#pragma unroll
    for (int j = 0; j < KS; ++j)
      tma_load_2d(sx + (stage * KS + j) * kRowsX * kBK, &xm, (slice(it) * KS + j) * kBK, 0,
                  &full[stage]);
  };

  if (tid == 0) {
    for (int st = 0; st < STAGES - 1 && st < nk; ++st) load_w(st, st);
    grid_dependency_wait();
    for (int st = 0; st < STAGES - 1 && st < nk; ++st) load_x(st, st);
  }
  grid_dependency_wait();  // before this block writes Y

  constexpr int kTpr = kThreads / kRowsX, kCpt = 8 / kTpr;  // NORM: threads a row, chunks each
  float ss = 0.0f;
  float acc[MT][NW / 2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < NW / 2; ++i) acc[mt][i] = 0.0f;
  for (int it = 0; it < nk; ++it) {
    mbar_wait(&full[it % STAGES], (it / STAGES) & 1);
    __syncthreads();  // every warp is done with the stage refilled next
    const int nxt = it + STAGES - 1;
    if (nxt < nk && tid == 0) {
      load_w(nxt, nxt % STAGES);
      load_x(nxt, nxt % STAGES);
    }
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < KS; ++j) {
      const bf16_t* tw = sw + ((it % STAGES) * KS + j) * BN * kBK + wg * NW * kBK;
      const bf16_t* tx = sx + ((it % STAGES) * KS + j) * kRowsX * kBK;
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)  // 16 k = 32 bytes into the swizzled rows
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          Wgmma<NW>::run(acc[mt], wgmma_desc(tx + mt * 64 * kBK + 16 * kk),
                         wgmma_desc(tw + 16 * kk), 1);
    }
    wgmma_commit();
    if constexpr (NORM) {
      // Thread t sums its share of X row t / kTpr: kCpt of the 8 16-byte chunks of each
      // 128-byte sub-slice row (the swizzle moves chunks within a row, never across rows).
#pragma unroll
      for (int j = 0; j < KS; ++j) {
        const int4* row = reinterpret_cast<const int4*>(
            sx + ((it % STAGES) * KS + j) * kRowsX * kBK + (tid / kTpr) * kBK);
#pragma unroll
        for (int c = 0; c < kCpt; ++c) {
          float v[8];
          unpack8(row[(tid % kTpr) * kCpt + c], v);
#pragma unroll
          for (int i = 0; i < 8; ++i) ss = fmaf(v[i], v[i], ss);
        }
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_hold(acc[mt]);
  }

  if constexpr (NORM) {
#pragma unroll
    for (int o = 1; o < kTpr; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (tid % kTpr == 0) row_ss[tid / kTpr] = ss;
    __syncthreads();  // (split K: the cluster barrier below also publishes row_ss)
  }
  // Row m's norm factor from its sum of squares over all of K.
  auto row_scale = [&](float sum) { return NORM ? rsqrtf(sum / float(K) + eps) : 1.0f; };
  // A plain output pair, with the pair already at y added in fp32 when accumulating (the
  // residual add: the rounding cuBLASLt does with beta = 1).
  auto plain_out = [&](float a, float b, const bf16_t* y) {
    if (accumulate) {
      const float2 old = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(y));
      a += old.x, b += old.y;
    }
    return __floats2bfloat162_rn(a, b);
  };

  // acc[mt][4j + e]: X row 64 mt + 16 wq + g (+8 for e >= 2), warpgroup column 8j + 2q +
  // (e & 1). for_rows(fn) calls fn(mt, h, m) for each X row m < T this thread holds.
  auto for_rows = [&](auto&& fn) {
#pragma unroll
    for (int i = 0; i < 2 * MT; ++i) {
      const int m = 64 * (i >> 1) + 16 * wq + g + 8 * (i & 1);
      if (m < T) fn(i >> 1, i & 1, m);
    }
  };
  const int S = gridDim.y;
  if (S == 1) {
    for_rows([&](int mt, int h, int m) {
      const float rs = row_scale(NORM ? row_ss[m] : 0.0f);
#pragma unroll
      for (int j = 0; j < (SWIGLU ? NW / 16 : NW / 8); ++j) {
        const int lc = 8 * j + 2 * q;
        const int n = c0 + (SWIGLU ? wg * kHalf : wg * NW) + lc;
        if (n >= N) continue;
        __nv_bfloat162 v;
        if constexpr (SWIGLU) {
          const int u = 4 * (j + NW / 16);  // the up column's accumulators
          v = __floats2bfloat162_rn(
              swiglu_bf16(rs * acc[mt][4 * j + 2 * h], rs * acc[mt][u + 2 * h]),
              swiglu_bf16(rs * acc[mt][4 * j + 2 * h + 1], rs * acc[mt][u + 2 * h + 1]));
        } else {
          v = plain_out(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1],
                        Y + size_t(m) * ldy + n);
        }
        *reinterpret_cast<__nv_bfloat162*>(Y + size_t(m) * ldy + n) = v;
      }
    });
    return;
  }

  // Split K: the S blocks of a tile form a cluster. Each leaves its fp32 partial [T, BN] in
  // its own shared memory; then block r adds rows [r T / S, (r + 1) T / S) of all S partials
  // in rank order (a fixed order: the result does not depend on timing) and writes them.
  __syncthreads();  // every warp is done with the pipeline buffers
  float* red = reinterpret_cast<float*>(sw);
  for_rows([&](int mt, int h, int m) {
#pragma unroll
    for (int j = 0; j < NW / 8; ++j)
      *reinterpret_cast<float2*>(red + size_t(m) * BN + wg * NW + 8 * j + 2 * q) =
          make_float2(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
  });
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int rank = int(cluster.block_rank());
  const int m_lo = rank * T / S, m_hi = (rank + 1) * T / S;
  const int pairs = (m_hi - m_lo) * (kCols / 2);
  for (int idx = tid; idx < pairs; idx += kThreads) {
    const int m = m_lo + idx / (kCols / 2), oc = 2 * (idx % (kCols / 2));
    // Tile column of output column oc (SwiGLU: its gate column; up is kHalf further).
    const int p = SWIGLU ? (oc / kHalf) * NW + oc % kHalf : oc;
    float2 s0 = make_float2(0.0f, 0.0f), s1 = s0;
    for (int sp = 0; sp < S; ++sp) {
      const float* src = cluster.map_shared_rank(red, sp) + size_t(m) * BN + p;
      const float2 v0 = *reinterpret_cast<const float2*>(src);
      s0.x += v0.x, s0.y += v0.y;
      if constexpr (SWIGLU) {
        const float2 v1 = *reinterpret_cast<const float2*>(src + kHalf);
        s1.x += v1.x, s1.y += v1.y;
      }
    }
    const int n = c0 + oc;
    if (n >= N) continue;
    __nv_bfloat162 v;
    float rs = 1.0f;
    if constexpr (NORM) {
      float sum = 0.0f;
      for (int sp = 0; sp < S; ++sp) sum += cluster.map_shared_rank(row_ss, sp)[m];
      rs = row_scale(sum);
    }
    if constexpr (SWIGLU)
      v = __floats2bfloat162_rn(swiglu_bf16(rs * s0.x, rs * s1.x),
                                swiglu_bf16(rs * s0.y, rs * s1.y));
    else
      v = plain_out(s0.x, s0.y, Y + size_t(m) * ldy + n);
    *reinterpret_cast<__nv_bfloat162*>(Y + size_t(m) * ldy + n) = v;
  }
  cluster.sync();  // partials stay readable until every block of the cluster is done
#endif
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, bf16_t*, int, int, int, int, int,
                          int, float, int);

// A 2-D bf16 tensor map over `rows` rows of K elements `ld` apart at W, read in boxes of
// 64 x box_rows with the 128-byte swizzle; rows and columns past the end read as zeros.
CUtensorMap operand_map(const bf16_t* W, int rows, int K, int ld, int box_rows) {
  const uint64_t dims[2] = {uint64_t(K), uint64_t(rows)};
  const uint64_t strides[1] = {uint64_t(ld) * sizeof(bf16_t)};
  const uint32_t box[2] = {uint32_t(kBK), uint32_t(box_rows)};
  return tensor_map("skinny_gemm", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, W, 2, dims, strides, box,
                    CU_TENSOR_MAP_SWIZZLE_128B);
}

int tiles_x(int T) {
  return (T + 63) / 64;
}

size_t smem_bytes(int nw, int mt) {
  const size_t pipe = size_t(stages_for(nw, mt)) * stage_bytes(nw, mt);
  const size_t partial = size_t(64 * mt) * 2 * nw * sizeof(float);  // split-K partial
  return std::max(pipe, partial) + 1024;                            // + alignment slack
}

// The kernel for (NW, MT, swiglu, norm), its dynamic shared memory allowance raised once.
template <int NW, int MT, bool SWIGLU, bool NORM>
KernelFn kernel_for() {
  static const KernelFn k = [] {
    KernelFn f = skinny_kernel<NW, MT, SWIGLU, NORM>;
    TANDEM_CUDA_CHECK(
        cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return f;
  }();
  return k;
}

template <bool SW, bool NORM>
KernelFn kernel_sw(int nw, int mt) {
  if (nw == 144) return mt == 1 ? kernel_for<144, 1, SW, NORM>() : kernel_for<144, 2, SW, NORM>();
  return mt == 1 ? kernel_for<80, 1, SW, NORM>() : kernel_for<80, 2, SW, NORM>();
}

// Only for built(p.nw, mt); norm only with swiglu.
KernelFn kernel(const SkinnyPlan& p, int mt, bool swiglu, bool norm = false) {
  if (!swiglu) return kernel_sw<false, false>(p.nw, mt);
  return norm ? kernel_sw<true, true>(p.nw, mt) : kernel_sw<true, false>(p.nw, mt);
}

// Launch configuration: one block per tile and K split, the splits of a tile one cluster,
// programmatic dependent launch where enabled. `attrs` must outlive the returned config.
cudaLaunchConfig_t config(const SkinnyPlan& p, int N, int K, int mt, bool swiglu,
                          cudaStream_t stream, cudaLaunchAttribute (&attrs)[2], int& per_split) {
  const int cols = swiglu ? p.nw : 2 * p.nw;
  const int num_iters = (K + KS * kBK - 1) / (KS * kBK);
  per_split = (num_iters + p.splits - 1) / p.splits;
  const int splits = (num_iters + per_split - 1) / per_split;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((N + cols - 1) / cols, splits);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem_bytes(p.nw, mt);
  cfg.stream = stream;
  int n = 0;
  if (pdl_enabled()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (splits > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = 1;
    attrs[n].val.clusterDim.y = unsigned(splits);
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = unsigned(n);
  return cfg;
}

__global__ void probe_kernel(int* out) {
#ifdef TANDEM_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}
}  // namespace

bool skinny_supported() {
  // Whether the code this GPU runs was built with the wgmma instructions (sm_90a).
  static const bool ok = [] {
    int* d = nullptr;
    int h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return false;
    probe_kernel<<<1, 1>>>(d);
    const bool fine = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    cudaGetLastError();
    return fine && h == 1;
  }();
  return ok;
}

SkinnyPlan skinny_plan(int rows, int K, int T, int sms, bool swiglu) {
  // Measured on the H200 at Qwen3-14B's decode shapes (SkinnyGemmTiming sweeps, products
  // kept apart): for the SwiGLU product at 8-128 rows, 288-row tiles in two stages of
  // 128-wide K slices, K split until about half the SMs stream (160-row tiles in four stages
  // where 288-row tiles would outnumber the SMs), neighbouring blocks one slice apart. For
  // the plain products (qkv, o, down, lm_head), 160-row tiles with K split until about 0.6
  // of the SMs stream were the fastest or within 2-4% of it. More blocks at once read slower.
  const int mt = tiles_x(std::clamp(T, 1, kSkinnyMaxTokens));
  SkinnyPlan p{swiglu ? 144 : 80, 1, 1};
  if ((rows + 2 * p.nw - 1) / (2 * p.nw) > sms) p.nw = 80;
  const int tiles = (rows + 2 * p.nw - 1) / (2 * p.nw);
  const int num_iters = (K + KS * kBK - 1) / (KS * kBK);
  const int want = swiglu ? sms * 9 / 20 : sms * 3 / 5;
  while (tiles * p.splits < want && p.splits < kMaxSplits && 2 * (p.splits + 1) <= num_iters)
    ++p.splits;
  // The clusters of a split plan must all fit at once.
  while (p.splits > 1) {
    cudaLaunchAttribute attrs[2];
    int per = 0;
    cudaLaunchConfig_t cfg = config(p, rows, K, mt, false, nullptr, attrs, per);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel(p, mt, false), &cfg) == cudaSuccess &&
        clusters >= tiles)
      break;
    cudaGetLastError();
    --p.splits;
  }
  return p;
}

bool skinny_plan_fits(const SkinnyPlan& p, int T) {
  return T >= 1 && T <= kSkinnyMaxTokens && built(p.nw, tiles_x(T));
}

void skinny_gemm(const bf16_t* X, int ldx, const bf16_t* W, bf16_t* Y, int ldy, int T, int N, int K,
                 bool swiglu, const SkinnyPlan& plan, cudaStream_t stream, float norm_eps,
                 bool accumulate) {
  const bool norm = norm_eps >= 0.0f;
  if (T < 1 || T > kSkinnyMaxTokens || N % 2 || K % 8 || ldx % 8 || ldy % 2 || (norm && !swiglu) ||
      (accumulate && swiglu) || reinterpret_cast<uintptr_t>(X) % 16 ||
      reinterpret_cast<uintptr_t>(W) % 16 || !skinny_plan_fits(plan, T) || plan.splits < 1 ||
      plan.rot < 0 || plan.splits > kMaxSplits)
    cuda_fail("skinny_gemm", "unsupported shape or plan", __FILE__, __LINE__);
  if (!skinny_supported())  // the kernel body exists only in sm_90a code
    cuda_fail("skinny_gemm", "this GPU runs no sm_90a code", __FILE__, __LINE__);
  const int mt = tiles_x(T);
  cudaLaunchAttribute attrs[2];
  int per_split = 0;
  cudaLaunchConfig_t cfg = config(plan, N, K, mt, swiglu, stream, attrs, per_split);
  const CUtensorMap xm = operand_map(X, T, K, ldx, 64 * mt);
  const CUtensorMap wa = operand_map(W, N, K, K, swiglu ? plan.nw / 2 : plan.nw);
  const CUtensorMap wb = swiglu ? operand_map(W + size_t(N) * K, N, K, K, plan.nw / 2) : wa;
  TANDEM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel(plan, mt, swiglu, norm), xm, wa, wb, Y, ldy, T,
                                       N, K, per_split, plan.rot, norm ? norm_eps : 0.0f,
                                       accumulate ? 1 : 0));
}

}  // namespace tandem::cuda
