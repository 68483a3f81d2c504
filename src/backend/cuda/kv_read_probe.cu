#include "backend/cuda/check.cuh"
#include "backend/cuda/kv_read_probe.cuh"

namespace tandem::cuda {
namespace {

// Grid (Hkv, S), 128 threads: thread t reads 16-byte column t % CH of keys t / CH, + 128/CH,
// ... (the decode kernel's copy pattern), 4 keys' loads in flight before they are summed.
template <int HD>
__global__ void __launch_bounds__(128) kv_read_probe_kernel(PagedKv kv, int Hkv, float* out) {
  constexpr int CH = HD / 8, kStep = 128 / CH, kUnroll = 4;
  const int kvh = blockIdx.x, s = blockIdx.y;
  const int ctx = kv.ctx_lens[s], bs = kv.block_size;
  const int32_t* bt = kv.block_tables + size_t(s) * kv.max_blocks;
  const int c = threadIdx.x % CH;
  const uint4* kb =
      reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(kv.k) + size_t(kvh) * HD) +
      c;
  const uint4* vb =
      reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(kv.v) + size_t(kvh) * HD) +
      c;
  const size_t row = size_t(Hkv) * HD / 8;  // uint4s per slot
  unsigned acc = 0;
  for (int key0 = threadIdx.x / CH; key0 < ctx; key0 += kStep * kUnroll) {
    uint4 a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tok = key0 + u * kStep;
      if (tok < ctx) {
        const size_t slot = size_t(bt[tok / bs]) * bs + tok % bs;
        a[u] = __ldcs(kb + slot * row);
        b[u] = __ldcs(vb + slot * row);
      } else {
        a[u] = b[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= a[u].x ^ a[u].w ^ b[u].y ^ b[u].z;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out + size_t(s) * Hkv + kvh, float(acc & 0xff));
}

}  // namespace

void kv_read_probe(PagedKv kv, int S, int Hkv, int hd, float* out, cudaStream_t stream) {
  if (S <= 0) return;
  if (hd == 128)
    kv_read_probe_kernel<128><<<dim3(Hkv, S), 128, 0, stream>>>(kv, Hkv, out);
  else if (hd == 64)
    kv_read_probe_kernel<64><<<dim3(Hkv, S), 128, 0, stream>>>(kv, Hkv, out);
  else
    cuda_fail("kv_read_probe", "head_dim must be 64 or 128", __FILE__, __LINE__);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
