#include "backend/cuda/check.cuh"
#include "backend/cuda/kv_fp8.cuh"
#include "backend/cuda/kv_fp8_check.cuh"

namespace tandem::cuda {
namespace {

__global__ void decode_kernel(const uint8_t* codes, size_t n, float s, float* as_half,
                              float* as_bf16) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(codes[i]), __NV_E4M3);
  as_half[i] = __low2float(*reinterpret_cast<const __half2*>(&h));
  const uint32_t b = kv_fp8x2_to_bf16x2(uint16_t(codes[i]), s);
  as_bf16[i] = __uint_as_float(b << 16);  // the low bf16 widened
}

__global__ void encode_kernel(const float* x, const float* inv, size_t n, uint8_t* q) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) q[i] = kv_fp8_encode(x[i], inv[i]);
}

__global__ void scales_kernel(const float* amax, size_t n, float* inv, float* scale) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  inv[i] = kv_fp8_inv_scale(amax[i]);
  scale[i] = kv_fp8_scale(amax[i]);
}

// A device copy of a host array, freed on scope exit.
template <class T>
struct Buf {
  T* p = nullptr;
  size_t n;
  explicit Buf(size_t n_, const T* host = nullptr) : n(n_) {
    TANDEM_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    if (host && n) TANDEM_CUDA_CHECK(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  void to_host(T* host) const {
    if (n) TANDEM_CUDA_CHECK(cudaMemcpy(host, p, n * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

unsigned blocks(size_t n) {
  return unsigned((n + 255) / 256);
}

}  // namespace

void kv_fp8_check_decode(const uint8_t* codes, size_t n, float s, float* as_half, float* as_bf16) {
  if (!n) return;
  Buf<uint8_t> c(n, codes);
  Buf<float> h(n), b(n);
  decode_kernel<<<blocks(n), 256>>>(c.p, n, s, h.p, b.p);
  TANDEM_CUDA_CHECK_LAUNCH();
  h.to_host(as_half);
  b.to_host(as_bf16);
}

void kv_fp8_check_encode(const float* x, const float* inv, size_t n, uint8_t* q) {
  if (!n) return;
  Buf<float> dx(n, x), di(n, inv);
  Buf<uint8_t> dq(n);
  encode_kernel<<<blocks(n), 256>>>(dx.p, di.p, n, dq.p);
  TANDEM_CUDA_CHECK_LAUNCH();
  dq.to_host(q);
}

void kv_fp8_check_scales(const float* amax, size_t n, float* inv, float* scale) {
  if (!n) return;
  Buf<float> da(n, amax), di(n), ds(n);
  scales_kernel<<<blocks(n), 256>>>(da.p, n, di.p, ds.p);
  TANDEM_CUDA_CHECK_LAUNCH();
  di.to_host(inv);
  ds.to_host(scale);
}

}  // namespace tandem::cuda
