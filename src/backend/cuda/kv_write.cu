#include "backend/cuda/check.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_write.cuh"

namespace tandem::cuda {
namespace {

__global__ void kv_write_kernel(const bf16_t* qkv, const int64_t* slots, bf16_t* kc, bf16_t* vc,
                                int Hq, int Hkv, int hd) {
  const int t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  const int n8 = Hkv * hd / 8;  // 16-byte words of K (and of V) per token
  const int4* row = reinterpret_cast<const int4*>(qkv + size_t(t) * (Hq + 2 * Hkv) * hd);
  const int4* k = row + Hq * hd / 8;
  const int4* v = k + n8;
  int4* kd = reinterpret_cast<int4*>(kc) + slot * n8;
  int4* vd = reinterpret_cast<int4*>(vc) + slot * n8;
  for (int c = threadIdx.x; c < n8; c += blockDim.x) {
    kd[c] = k[c];
    vd[c] = v[c];
  }
}

}  // namespace

void kv_write(const bf16_t* qkv, const int64_t* slots, bf16_t* k_cache, bf16_t* v_cache, int T,
              int Hq, int Hkv, int hd, cudaStream_t stream) {
  if (T <= 0) return;
  const int n8 = Hkv * hd / 8;
  const int threads = n8 >= 128 ? 128 : ((n8 + 31) / 32) * 32;
  kv_write_kernel<<<T, threads, 0, stream>>>(qkv, slots, k_cache, v_cache, Hq, Hkv, hd);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
