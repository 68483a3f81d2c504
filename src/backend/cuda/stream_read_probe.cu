#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/stream_read_probe.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256, kUnroll = 8;

// Grid-stride over n 16-byte words, kUnroll loads in flight a thread (32 KiB a block), each
// warp's loads one contiguous 512-byte run.
__global__ void __launch_bounds__(kThreads)
    stream_read_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  grid_dependency_wait();
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  unsigned acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // The next kernel's blocks may be placed once every block is past its reads: triggering
  // at the start would put them beside this kernel's, and a grid that is not all resident
  // runs in two waves.
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

void stream_read_probe(const void* p, size_t bytes, unsigned* out, cudaStream_t stream, bool pdl) {
  if (bytes % 16 || reinterpret_cast<uintptr_t>(p) % 16)
    cuda_fail("stream_read_probe", "bytes and address must be 16-byte multiples", __FILE__,
              __LINE__);
  if (bytes == 0) return;
  const size_t n = bytes / 16;
  // Four blocks an SM, fewer where the range is small.
  const size_t want = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  const dim3 grid(unsigned(want < size_t(4 * sm_count()) ? want : size_t(4 * sm_count())));
  const auto* words = static_cast<const uint4*>(p);
  if (pdl) {
    launch_pdl(stream_read_kernel, grid, dim3(kThreads), 0, stream, words, n, out);
  } else {
    stream_read_kernel<<<grid, kThreads, 0, stream>>>(words, n, out);
    TANDEM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tandem::cuda
