#pragma once
// Hopper warpgroup MMA (wgmma.mma_async, sm_90a): D[64, N] (+)= A[64, 16] B[16, N] with A and B
// read from shared memory through descriptors, bf16 in, fp32 accumulate in registers. Both
// operands are K-major tiles of 128-byte rows (64 bf16) in the 128-byte swizzle (16-byte
// chunk c of row r stored at chunk c ^ (r % 8)), as TMA writes them with
// CU_TENSOR_MAP_SWIZZLE_128B, 1024-byte aligned. Device code only; the instructions exist only
// when compiling for sm_90a (elsewhere these helpers compile to nothing and must not be
// called). Accumulator layout: warp w of the group holds rows 16w + lane / 4 (+8), columns
// 8j + 2 (lane % 4) (+1) in d[4j .. 4j + 3].
#include <cstdint>

namespace tandem::cuda {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TANDEM_WGMMA 1
#endif

// Descriptor of a K-major, 128-byte-swizzled tile at `smem` (8-row groups 1024 bytes apart).
__device__ __forceinline__ uint64_t wgmma_desc(const void* smem) {
  const uint64_t a = uint64_t(__cvta_generic_to_shared(smem));
  return ((a & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Descriptor of an MN-major tile in the 128-byte swizzle: each K row (16-bit elements) holds 64
// consecutive MN elements in 128 bytes, 8-row K groups 1024 bytes apart, and the next 64 MN
// elements `mn_stride` bytes further (the instruction's transpose bit must be set).
__device__ __forceinline__ uint64_t wgmma_desc_mn(const void* smem, uint32_t mn_stride) {
  const uint64_t a = uint64_t(__cvta_generic_to_shared(smem));
  return ((a & 0x3FFFF) >> 4) | (uint64_t((mn_stride & 0x3FFFF) >> 4) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef TANDEM_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef TANDEM_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef TANDEM_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of accumulator registers across wgmma waits.
template <int R>
__device__ __forceinline__ void wgmma_hold(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for A fragments in registers that an issued wgmma still reads: they stay live and
// unchanged (not reused by the compiler) until after the wait.
template <int R>
__device__ __forceinline__ void wgmma_hold(uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// The shapes the kernels use: SS (both operands from descriptors, K-major) for N = 64, 80,
// 128 and 144, and RS (A from registers, B MN-major) for N = 128. Each thread holds R = N / 2
// accumulator floats; TANDEM_WG_REGS_R is the instruction's "%0, ..., %(R-1)" list and
// TANDEM_WG_OUTS_R(d) the matching "+f" operands, followed by the instruction's own inputs.
#define TANDEM_WG_R0_31                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, "         \
  "%8, %9, %10, %11, %12, %13, %14, %15, "   \
  "%16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31"
#define TANDEM_WG_R32_39 "%32, %33, %34, %35, %36, %37, %38, %39"
#define TANDEM_WG_R40_63                     \
  "%40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define TANDEM_WG_R64_71 "%64, %65, %66, %67, %68, %69, %70, %71"
#define TANDEM_WG_REGS_32 TANDEM_WG_R0_31
#define TANDEM_WG_REGS_40 TANDEM_WG_R0_31 ", " TANDEM_WG_R32_39
#define TANDEM_WG_REGS_64 TANDEM_WG_REGS_40 ", " TANDEM_WG_R40_63
#define TANDEM_WG_REGS_72 TANDEM_WG_REGS_64 ", " TANDEM_WG_R64_71
#define TANDEM_WG_O8(d, i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TANDEM_WG_OUTS_32(d) \
  TANDEM_WG_O8(d, 0), TANDEM_WG_O8(d, 8), TANDEM_WG_O8(d, 16), TANDEM_WG_O8(d, 24)
#define TANDEM_WG_OUTS_40(d) TANDEM_WG_OUTS_32(d), TANDEM_WG_O8(d, 32)
#define TANDEM_WG_OUTS_64(d) \
  TANDEM_WG_OUTS_40(d), TANDEM_WG_O8(d, 40), TANDEM_WG_O8(d, 48), TANDEM_WG_O8(d, 56)
#define TANDEM_WG_OUTS_72(d) TANDEM_WG_OUTS_64(d), TANDEM_WG_O8(d, 64)

#ifdef TANDEM_WGMMA
// D (+)= A B: descriptors a (operand IA) and b (IB), scale-d predicate from `accumulate` (IP).
#define TANDEM_WGMMA_SS(N, R, IA, IB, IP)                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP                                        \
               ", 0;\n"                                                                        \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" TANDEM_WG_REGS_##R \
               "}, %" #IA ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                    \
               : TANDEM_WG_OUTS_##R(d)                                                         \
               : "l"(a), "l"(b), "r"(accumulate))
// D (+)= A B: A from registers a[0..3] (operands IA .. IA + 3 written out), B MN-major.
#define TANDEM_WGMMA_RS(N, R, IA0, IA1, IA2, IA3, IB, IP)                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP                                        \
               ", 0;\n"                                                                        \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" TANDEM_WG_REGS_##R \
               "}, {%" #IA0 ", %" #IA1 ", %" #IA2 ", %" #IA3 "}, %" #IB ", p, 1, 1, 1;\n}\n"   \
               : TANDEM_WG_OUTS_##R(d)                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))
#else
#define TANDEM_WGMMA_SS(N, R, IA, IB, IP) (void)0
#define TANDEM_WGMMA_RS(N, R, IA0, IA1, IA2, IA3, IB, IP) (void)0
#endif

template <int N>
struct Wgmma;

template <>
struct Wgmma<64> {
  __device__ static __forceinline__ void run(float (&d)[32], uint64_t a, uint64_t b,
                                             int accumulate) {
    TANDEM_WGMMA_SS(64, 32, 32, 33, 34);
  }
};
template <>
struct Wgmma<80> {
  __device__ static __forceinline__ void run(float (&d)[40], uint64_t a, uint64_t b,
                                             int accumulate) {
    TANDEM_WGMMA_SS(80, 40, 40, 41, 42);
  }
};
template <>
struct Wgmma<128> {
  __device__ static __forceinline__ void run(float (&d)[64], uint64_t a, uint64_t b,
                                             int accumulate) {
    TANDEM_WGMMA_SS(128, 64, 64, 65, 66);
  }
};
template <>
struct Wgmma<144> {
  __device__ static __forceinline__ void run(float (&d)[72], uint64_t a, uint64_t b,
                                             int accumulate) {
    TANDEM_WGMMA_SS(144, 72, 72, 73, 74);
  }
};

// D[64, N] += A[64, 16] B[16, N] with A from registers and B MN-major in shared memory
// (wgmma_desc_mn; the instruction's transpose-B bit set). A's fragment per warp is
// mma.m16n8k16's: a[0] = row r, columns 2q, 2q + 1; a[1] = row r + 8; a[2] = row r, columns
// 8 + 2q, 9 + 2q; a[3] = row r + 8, those columns (r = 16 warp + lane / 4, q = lane % 4), which
// is where the accumulator layout above keeps the same elements of a product.
template <int N>
struct WgmmaRegA;

template <>
struct WgmmaRegA<128> {
  __device__ static __forceinline__ void run(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                             int accumulate) {
    TANDEM_WGMMA_RS(128, 64, 64, 65, 66, 67, 68, 69);
  }
};

#undef TANDEM_WGMMA_SS
#undef TANDEM_WGMMA_RS

}  // namespace tandem::cuda
