#ifdef TANDEM_HAVE_CUDA
#include "model/cuda_weights.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

#include "backend/cuda/check.cuh"
#include "backend/cuda/fill.cuh"
#include "core/bf16.h"
#include "core/error.h"
#include "core/log.h"
#include "model/safetensors.h"

namespace tandem::model {

uint64_t CudaWeights::bytes_needed(const ModelConfig& c) {
  const uint64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const uint64_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  const uint64_t layer = (Q + 2 * KV) * H + H * Q + 2 * I * H + H * I + 2 * H + 2 * D;
  return 2 * (c.num_hidden_layers * layer + V * H * (c.tie_word_embeddings ? 1 : 2) + H);
}

CudaWeights& CudaWeights::operator=(CudaWeights&& o) noexcept {
  std::swap(embed, o.embed);
  std::swap(lm_head, o.lm_head);
  std::swap(final_norm, o.final_norm);
  std::swap(layers, o.layers);
  std::swap(bytes, o.bytes);
  std::swap(allocs_, o.allocs_);
  return *this;
}

CudaWeights::~CudaWeights() {
  for (void* p : allocs_) cudaFree(p);
}

__nv_bfloat16* CudaWeights::alloc(size_t elems) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, elems * 2);
  if (e != cudaSuccess)
    fail(ErrorKind::kResource, "GPU out of memory allocating {:.1f} MiB of weights ({})",
         double(elems * 2) / (1 << 20), cudaGetErrorString(e));
  allocs_.push_back(p);
  bytes += elems * 2;
  return static_cast<__nv_bfloat16*>(p);
}

void CudaWeights::allocate(const ModelConfig& c) {
  const size_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const size_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  embed = alloc(V * H);
  lm_head = c.tie_word_embeddings ? embed : alloc(V * H);
  final_norm = alloc(H);
  layers.resize(size_t(c.num_hidden_layers));
  for (auto& L : layers) {
    L.in_norm = alloc(H);
    L.qkv = alloc((Q + 2 * KV) * H);
    L.q_norm = alloc(D);
    L.k_norm = alloc(D);
    L.o = alloc(H * Q);
    L.post_norm = alloc(H);
    L.gate_up = alloc(2 * I * H);
    L.down = alloc(H * I);
  }
}

CudaWeights CudaWeights::synthetic(const ModelConfig& c, uint64_t seed) {
  CudaWeights w;
  w.allocate(c);
  const size_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const size_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  uint64_t id = seed * 1000003ull;
  // Linear weights with std 1/sqrt(in) keep activations O(1) through the layers; norms near 1.
  auto rnd = [&](__nv_bfloat16* p, size_t n, float mean, float std) {
    cuda::fill_random(p, n, ++id, mean, std, nullptr);
  };
  rnd(w.embed, V * H, 0.0f, 1.0f);
  if (!c.tie_word_embeddings) rnd(w.lm_head, V * H, 0.0f, 1.0f / std::sqrt(float(H)));
  rnd(w.final_norm, H, 1.0f, 0.1f);
  for (auto& L : w.layers) {
    rnd(L.in_norm, H, 1.0f, 0.1f);
    rnd(L.qkv, (Q + 2 * KV) * H, 0.0f, 1.0f / std::sqrt(float(H)));
    rnd(L.q_norm, D, 1.0f, 0.1f);
    rnd(L.k_norm, D, 1.0f, 0.1f);
    rnd(L.o, H * Q, 0.0f, 1.0f / std::sqrt(float(Q)));
    rnd(L.post_norm, H, 1.0f, 0.1f);
    rnd(L.gate_up, 2 * I * H, 0.0f, 1.0f / std::sqrt(float(H)));
    rnd(L.down, H * I, 0.0f, 1.0f / std::sqrt(float(I)));
  }
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

namespace {

// Copies host tensors to the GPU through two pinned buffers, converting to bf16.
class Uploader {
 public:
  Uploader(uint64_t total, bool progress) : total_(total), progress_(progress) {
    for (auto& b : buf_) TANDEM_CUDA_CHECK(cudaMallocHost(&b, kChunk));
    TANDEM_CUDA_CHECK(cudaStreamCreate(&stream_));
    for (auto& e : done_) TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~Uploader() {
    cudaStreamSynchronize(stream_);
    for (auto& e : done_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
    for (auto& b : buf_) cudaFreeHost(b);
  }
  // Writes `t` (elements [0, numel)) to dst as bf16.
  void put(const TensorView& t, __nv_bfloat16* dst) {
    const size_t n = size_t(t.numel());
    const size_t per = kChunk / 2;
    for (size_t i0 = 0; i0 < n; i0 += per) {
      const size_t m = std::min(per, n - i0);
      TANDEM_CUDA_CHECK(cudaEventSynchronize(done_[cur_]));  // buffer free again
      uint16_t* out = static_cast<uint16_t*>(buf_[cur_]);
      if (t.dtype == DType::kBF16) {
        std::memcpy(out, static_cast<const uint16_t*>(t.data) + i0, m * 2);
      } else if (t.dtype == DType::kF32) {
        const float* in = static_cast<const float*>(t.data) + i0;
        for (size_t i = 0; i < m; ++i) out[i] = float_to_bf16(in[i]).bits;
      } else {
        fail(ErrorKind::kUnsupported, "tensor {}: dtype {} is not supported on CUDA (bf16, f32)",
             *t.name, dtype_name(t.dtype));
      }
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst + i0, out, m * 2, cudaMemcpyHostToDevice, stream_));
      TANDEM_CUDA_CHECK(cudaEventRecord(done_[cur_], stream_));
      cur_ ^= 1;
      copied_ += m * 2;
      if (progress_ && copied_ * 10 / std::max<uint64_t>(total_, 1) > shown_) {
        shown_ = copied_ * 10 / std::max<uint64_t>(total_, 1);
        spdlog::info("loading weights to the GPU: {:3d}% ({:.2f} of {:.2f} GiB)", shown_ * 10,
                     double(copied_) / (1ull << 30), double(total_) / (1ull << 30));
      }
    }
  }
  void finish() { TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  static constexpr size_t kChunk = size_t(64) << 20;
  void* buf_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  cudaStream_t stream_ = nullptr;
  int cur_ = 0;
  uint64_t total_, copied_ = 0, shown_ = 0;
  bool progress_;
};

}  // namespace

CudaWeights CudaWeights::from_checkpoint(const std::string& dir, const ModelConfig& c,
                                         bool progress) {
  Checkpoint ck(dir);
  ck.prefetch();
  CudaWeights w;
  w.allocate(c);
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    return ck.get(name, std::move(shape), {DType::kBF16, DType::kF32});
  };
  Uploader up(bytes_needed(c), progress);
  up.put(get("model.embed_tokens.weight", {V, H}), w.embed);
  if (!c.tie_word_embeddings) up.put(get("lm_head.weight", {V, H}), w.lm_head);
  up.put(get("model.norm.weight", {H}), w.final_norm);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto& L = w.layers[size_t(l)];
    up.put(get(p + "input_layernorm.weight", {H}), L.in_norm);
    up.put(get(p + "self_attn.q_proj.weight", {Q, H}), L.qkv);
    up.put(get(p + "self_attn.k_proj.weight", {KV, H}), L.qkv + Q * H);
    up.put(get(p + "self_attn.v_proj.weight", {KV, H}), L.qkv + (Q + KV) * H);
    up.put(get(p + "self_attn.q_norm.weight", {D}), L.q_norm);
    up.put(get(p + "self_attn.k_norm.weight", {D}), L.k_norm);
    up.put(get(p + "self_attn.o_proj.weight", {H, Q}), L.o);
    up.put(get(p + "post_attention_layernorm.weight", {H}), L.post_norm);
    up.put(get(p + "mlp.gate_proj.weight", {I, H}), L.gate_up);
    up.put(get(p + "mlp.up_proj.weight", {I, H}), L.gate_up + I * H);
    up.put(get(p + "mlp.down_proj.weight", {H, I}), L.down);
  }
  up.finish();
  return w;
}

}  // namespace tandem::model
#endif  // TANDEM_HAVE_CUDA
