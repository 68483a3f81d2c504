#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/rmsnorm.cuh"

namespace tandem::cuda {
namespace {

// One block per row. The row is read twice (sum of squares, then scale); the second read
// hits L1/L2, so the kernel moves ~3 row-sizes through HBM (read x, delta; write x, out).
// With parts (nparts > 0), delta is the in-order sum of the fp32 partials, rounded to bf16.
__global__ void add_rmsnorm_kernel(bf16_t* x, const bf16_t* delta, const bf16_t* w, bf16_t* out,
                                   int dim, float eps, const float* parts = nullptr, int nparts = 0,
                                   size_t part_stride = 0) {
  __shared__ float scratch[32];
  launch_dependents();  // the next (PDL) kernel may launch; it waits for this one's output
  const int dim8 = dim / 8;
  int4* xr = reinterpret_cast<int4*>(x) + size_t(blockIdx.x) * dim8;
  const int4* dr =
      delta ? reinterpret_cast<const int4*>(delta) + size_t(blockIdx.x) * dim8 : nullptr;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < dim8; c += blockDim.x) {
    float v[8];
    unpack8(xr[c], v);
    if (dr) {
      float d[8];
      unpack8(dr[c], d);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = rbf(v[i] + d[i]);
      xr[c] = pack8(v);
    } else if (nparts > 0) {
      const float4* pr =
          reinterpret_cast<const float4*>(parts + size_t(blockIdx.x) * dim) + 2 * size_t(c);
      float d[8];
      {
        const float4 a = pr[0], b = pr[1];
        d[0] = a.x, d[1] = a.y, d[2] = a.z, d[3] = a.w, d[4] = b.x, d[5] = b.y, d[6] = b.z,
        d[7] = b.w;
      }
      for (int p = 1; p < nparts; ++p) {
        const float4* q = reinterpret_cast<const float4*>(reinterpret_cast<const float*>(pr) +
                                                          size_t(p) * part_stride);
        const float4 a = q[0], b = q[1];
        d[0] += a.x, d[1] += a.y, d[2] += a.z, d[3] += a.w, d[4] += b.x, d[5] += b.y, d[6] += b.z,
            d[7] += b.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = rbf(v[i] + rbf(d[i]));
      xr[c] = pack8(v);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  const float r = rsqrtf(block_sum(ss, scratch) / float(dim) + eps);
  const int4* wr = reinterpret_cast<const int4*>(w);
  int4* orow = reinterpret_cast<int4*>(out) + size_t(blockIdx.x) * dim8;
  for (int c = threadIdx.x; c < dim8; c += blockDim.x) {
    float v[8], g[8];
    unpack8(xr[c], v);  // this thread wrote xr[c] itself above: no barrier needed
    unpack8(wr[c], g);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = g[i] * rbf(v[i] * r);
    orow[c] = pack8(v);
  }
}

}  // namespace

void add_rmsnorm(bf16_t* x, const bf16_t* delta, const bf16_t* w, bf16_t* out, int T, int dim,
                 float eps, cudaStream_t stream) {
  if (T <= 0) return;
  const int dim8 = dim / 8;
  const int threads = dim8 >= 512 ? 512 : ((dim8 + 31) / 32) * 32;
  add_rmsnorm_kernel<<<T, threads, 0, stream>>>(x, delta, w, out, dim, eps);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void add_rmsnorm_parts(bf16_t* x, const float* parts, int nparts, size_t part_stride,
                       const bf16_t* w, bf16_t* out, int T, int dim, float eps,
                       cudaStream_t stream) {
  if (T <= 0) return;
  if (nparts < 1 || part_stride % 4 || reinterpret_cast<uintptr_t>(parts) % 16)
    cuda_fail("add_rmsnorm_parts", "need >= 1 partials, 16-byte aligned", __FILE__, __LINE__);
  const int dim8 = dim / 8;
  const int threads = dim8 >= 512 ? 512 : ((dim8 + 31) / 32) * 32;
  add_rmsnorm_kernel<<<T, threads, 0, stream>>>(x, nullptr, w, out, dim, eps, parts, nparts,
                                                part_stride);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
