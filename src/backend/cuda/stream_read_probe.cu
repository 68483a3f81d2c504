#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/stream_read_probe.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256, kUnroll = 8;

// Grid-stride over n 16-byte words, kUnroll loads in flight a thread (32 KiB a block), each
// warp's loads one contiguous 512-byte run. EARLY: the first round is loaded before the wait
// for the previous kernel, and the next kernel is let in at the start of the last round.
template <bool EARLY>
__global__ void __launch_bounds__(kThreads)
    stream_read_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  auto full_round = [&](size_t at) { return at + (kUnroll - 1) * stride < n; };
  uint4 v[kUnroll];
  auto load = [&] {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);
  };
  unsigned acc = 0;
  auto fold = [&] {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  };
  if (EARLY && full_round(i)) load();
  grid_dependency_wait();
  if (!EARLY && full_round(i)) load();
  while (full_round(i)) {
    fold();
    i += kUnroll * stride;
    if (!full_round(i)) break;
    if (EARLY && !full_round(i + kUnroll * stride)) launch_dependents();
    load();
  }
  for (; i < n; i += stride) {
    const uint4 w = __ldcs(p + i);
    acc ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  // Without EARLY the next kernel's blocks may be placed once every block is past its reads:
  // triggering at the start would put them beside this kernel's four blocks an SM, and a
  // grid that is not all resident runs in two waves.
  launch_dependents();
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicXor(out, acc);
}

int sm_count() {
  static const int n = [] {
    int dev = 0, sms = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
  }();
  return n;
}

}  // namespace

void stream_read_probe(const void* p, size_t bytes, unsigned* out, cudaStream_t stream,
                       ReadLaunch how) {
  if (bytes % 16 || reinterpret_cast<uintptr_t>(p) % 16)
    cuda_fail("stream_read_probe", "bytes and address must be 16-byte multiples", __FILE__,
              __LINE__);
  if (bytes == 0) return;
  const size_t n = bytes / 16;
  const bool half = how == ReadLaunch::kPdlEarly || how == ReadLaunch::kPlainHalf;
  // Four blocks an SM (two for the early form), fewer where the range is small.
  const size_t most = size_t((half ? 2 : 4) * sm_count());
  const size_t want = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  const dim3 grid(unsigned(want < most ? want : most));
  const auto* words = static_cast<const uint4*>(p);
  switch (how) {
    case ReadLaunch::kPdl:
      launch_pdl(stream_read_kernel<false>, grid, dim3(kThreads), 0, stream, words, n, out);
      return;
    case ReadLaunch::kPdlEarly:
      launch_pdl(stream_read_kernel<true>, grid, dim3(kThreads), 0, stream, words, n, out);
      return;
    case ReadLaunch::kPlain:
    case ReadLaunch::kPlainHalf:
      stream_read_kernel<false><<<grid, kThreads, 0, stream>>>(words, n, out);
      TANDEM_CUDA_CHECK_LAUNCH();
      return;
  }
}

}  // namespace tandem::cuda
