#ifdef TANDEM_HAVE_CUDA
#include "model/cuda_weights.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/check.cuh"
#include "backend/cuda/fill.cuh"
#include "backend/cuda/fp8_quant.cuh"
#include "core/bf16.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/log.h"
#include "model/safetensors.h"

namespace tandem::model {

namespace {

// Bytes of an FP8 [N, K] weight: codes and padded block scales.
uint64_t fp8_bytes(uint64_t N, uint64_t K) {
  return N * K + uint64_t(fp8_blocks(int64_t(N))) * uint64_t(fp8_scale_stride(int64_t(K))) * 4;
}

}  // namespace

uint64_t CudaWeights::bytes_needed(const ModelConfig& c, bool fp8) {
  const uint64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const uint64_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  const uint64_t products =
      fp8 ? fp8_bytes(Q + 2 * KV, H) + fp8_bytes(H, Q) + fp8_bytes(2 * I, H) + fp8_bytes(H, I)
          : 2 * ((Q + 2 * KV) * H + H * Q + 2 * I * H + H * I);
  const uint64_t layer = products + 2 * (2 * H + 2 * D);
  return c.num_hidden_layers * layer + 2 * (V * H * (c.tie_word_embeddings ? 1 : 2) + H);
}

void CudaWeights::check_fp8_shapes(const ModelConfig& c) {
  const std::pair<const char*, int64_t> dims[] = {{"hidden_size", c.hidden_size},
                                                  {"intermediate_size", c.intermediate_size},
                                                  {"q heads x head_dim", c.q_size()},
                                                  {"kv heads x head_dim", c.kv_size()}};
  for (const auto& [name, v] : dims)
    if (v % kFp8Block)
      fail(ErrorKind::kUnsupported,
           "FP8 weights on CUDA need every product dimension in whole {}-blocks; {} is {}",
           kFp8Block, name, v);
}

CudaWeights& CudaWeights::operator=(CudaWeights&& o) noexcept {
  std::swap(embed, o.embed);
  std::swap(lm_head, o.lm_head);
  std::swap(final_norm, o.final_norm);
  std::swap(layers, o.layers);
  std::swap(bytes, o.bytes);
  std::swap(fp8, o.fp8);
  std::swap(allocs_, o.allocs_);
  return *this;
}

CudaWeights::~CudaWeights() {
  for (void* p : allocs_) cudaFree(p);
}

void* CudaWeights::alloc_bytes(size_t n) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess)
    fail(ErrorKind::kResource, "GPU out of memory allocating {:.1f} MiB of weights ({})",
         double(n) / (1 << 20), cudaGetErrorString(e));
  allocs_.push_back(p);
  bytes += n;
  return p;
}

cuda::Fp8Weight CudaWeights::alloc_fp8(size_t N, size_t K) {
  cuda::Fp8Weight w;
  w.lds = int(fp8_scale_stride(int64_t(K)));
  w.q = static_cast<uint8_t*>(alloc_bytes(N * K));
  const size_t sbytes = size_t(fp8_blocks(int64_t(N))) * size_t(w.lds) * 4;
  float* s = static_cast<float*>(alloc_bytes(sbytes));
  TANDEM_CUDA_CHECK(cudaMemset(s, 0, sbytes));  // the padding past ceil(K / 128) stays 0
  w.s = s;
  return w;
}

void CudaWeights::allocate(const ModelConfig& c, bool with_fp8) {
  const size_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const size_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  fp8 = with_fp8;
  embed = alloc(V * H);
  lm_head = c.tie_word_embeddings ? embed : alloc(V * H);
  final_norm = alloc(H);
  layers.resize(size_t(c.num_hidden_layers));
  for (auto& L : layers) {
    L.in_norm = alloc(H);
    L.q_norm = alloc(D);
    L.k_norm = alloc(D);
    L.post_norm = alloc(H);
    if (fp8) {
      L.qkv8 = alloc_fp8(Q + 2 * KV, H);
      L.o8 = alloc_fp8(H, Q);
      L.gate_up8 = alloc_fp8(2 * I, H);
      L.down8 = alloc_fp8(H, I);
    } else {
      L.qkv = alloc((Q + 2 * KV) * H);
      L.o = alloc(H * Q);
      L.gate_up = alloc(2 * I * H);
      L.down = alloc(H * I);
    }
  }
}

namespace {

// A bf16 staging buffer on the GPU for weights quantized to FP8 after they arrive.
class Staging {
 public:
  explicit Staging(size_t elems) {
    if (elems == 0) return;
    cudaError_t e = cudaMalloc(&p_, elems * 2);
    if (e != cudaSuccess)
      fail(ErrorKind::kResource, "GPU out of memory allocating {:.1f} MiB to quantize weights ({})",
           double(elems * 2) / (1 << 20), cudaGetErrorString(e));
  }
  ~Staging() { cudaFree(p_); }
  __nv_bfloat16* get() const { return p_; }

 private:
  __nv_bfloat16* p_ = nullptr;
};

size_t largest_product(const ModelConfig& c) {
  const size_t H = c.hidden_size, I = c.intermediate_size;
  const size_t Q = c.q_size(), KV = c.kv_size();
  return std::max({(Q + 2 * KV) * H, H * Q, 2 * I * H, H * I});
}

}  // namespace

CudaWeights CudaWeights::synthetic(const ModelConfig& c, uint64_t seed, bool with_fp8) {
  if (with_fp8) check_fp8_shapes(c);
  CudaWeights w;
  w.allocate(c, with_fp8);
  const size_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const size_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  Staging stage(with_fp8 ? largest_product(c) : 0);
  uint64_t id = seed * 1000003ull;
  // Linear weights with std 1/sqrt(in) keep activations O(1) through the layers; norms near 1.
  auto rnd = [&](__nv_bfloat16* p, size_t n, float mean, float std) {
    cuda::fill_random(p, n, ++id, mean, std, nullptr);
  };
  // A product's weight: drawn in bf16 (the same draws as the bf16 model), then quantized.
  auto product = [&](__nv_bfloat16* p, const cuda::Fp8Weight& q, size_t N, size_t K, float std) {
    if (!with_fp8) return rnd(p, N * K, 0.0f, std);
    rnd(stage.get(), N * K, 0.0f, std);
    cuda::quantize_weight_fp8(stage.get(), int64_t(N), int(K), const_cast<uint8_t*>(q.q),
                              const_cast<float*>(q.s), q.lds, nullptr);
  };
  rnd(w.embed, V * H, 0.0f, 1.0f);
  if (!c.tie_word_embeddings) rnd(w.lm_head, V * H, 0.0f, 1.0f / std::sqrt(float(H)));
  rnd(w.final_norm, H, 1.0f, 0.1f);
  for (auto& L : w.layers) {
    rnd(L.in_norm, H, 1.0f, 0.1f);
    product(L.qkv, L.qkv8, Q + 2 * KV, H, 1.0f / std::sqrt(float(H)));
    rnd(L.q_norm, D, 1.0f, 0.1f);
    rnd(L.k_norm, D, 1.0f, 0.1f);
    product(L.o, L.o8, H, Q, 1.0f / std::sqrt(float(Q)));
    rnd(L.post_norm, H, 1.0f, 0.1f);
    product(L.gate_up, L.gate_up8, 2 * I, H, 1.0f / std::sqrt(float(H)));
    product(L.down, L.down8, H, I, 1.0f / std::sqrt(float(I)));
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
      uint16_t* out = static_cast<uint16_t*>(stage());
      if (t.dtype == DType::kBF16) {
        std::memcpy(out, static_cast<const uint16_t*>(t.data) + i0, m * 2);
      } else if (t.dtype == DType::kF32) {
        const float* in = static_cast<const float*>(t.data) + i0;
        for (size_t i = 0; i < m; ++i) out[i] = float_to_bf16(in[i]).bits;
      } else {
        fail(ErrorKind::kUnsupported, "tensor {}: dtype {} is not supported on CUDA (bf16, f32)",
             *t.name, dtype_name(t.dtype));
      }
      send(dst + i0, out, m * 2);
    }
  }
  // Writes the bytes of `t` as they are (FP8 codes).
  void put_raw(const TensorView& t, void* dst) {
    const size_t n = t.bytes();
    for (size_t i0 = 0; i0 < n; i0 += kChunk) {
      const size_t m = std::min(kChunk, n - i0);
      void* out = stage();
      std::memcpy(out, static_cast<const char*>(t.data) + i0, m);
      send(static_cast<char*>(dst) + i0, out, m);
    }
  }
  // Writes a [rows, cols] scale tensor (bf16, f16 or f32) as fp32 rows of stride lds.
  void put_scales(const TensorView& t, float* dst, int64_t rows, int64_t cols, int64_t lds) {
    if (size_t(rows * lds) * 4 > kChunk)
      fail(ErrorKind::kUnsupported, "tensor {}: {} x {} scales are too many", *t.name, rows, cols);
    float* out = static_cast<float*>(stage());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < lds; ++k) {
        float v = 0.0f;
        if (k < cols) {
          const int64_t i = r * cols + k;
          if (t.dtype == DType::kBF16)
            v = bf16_to_float(bf16{static_cast<const uint16_t*>(t.data)[i]});
          else if (t.dtype == DType::kF16)
            v = __half2float(__half_raw{static_cast<const uint16_t*>(t.data)[i]});
          else
            v = static_cast<const float*>(t.data)[i];
        }
        out[r * lds + k] = v;
      }
    send(dst, out, size_t(rows * lds) * 4);
  }
  cudaStream_t stream() const { return stream_; }
  void finish() { TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  void* stage() {
    TANDEM_CUDA_CHECK(cudaEventSynchronize(done_[cur_]));  // buffer free again
    return buf_[cur_];
  }
  void send(void* dst, const void* src, size_t m) {
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, m, cudaMemcpyHostToDevice, stream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(done_[cur_], stream_));
    cur_ ^= 1;
    copied_ += m;
    if (progress_ && copied_ * 10 / std::max<uint64_t>(total_, 1) > shown_) {
      shown_ = copied_ * 10 / std::max<uint64_t>(total_, 1);
      spdlog::info("loading weights to the GPU: {:3d}% ({:.2f} of {:.2f} GiB)", shown_ * 10,
                   double(copied_) / (1ull << 30), double(total_) / (1ull << 30));
    }
  }
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
                                         bool progress, bool with_fp8) {
  const bool fp8_file = c.fp8.has_value();
  if (fp8_file && !with_fp8)
    fail(ErrorKind::kUnsupported,
         "{} is an FP8 checkpoint: it runs with FP8 weights (bf16 would need dequantizing it)",
         dir);
  if (with_fp8) check_fp8_shapes(c);
  Checkpoint ck(dir);
  ck.prefetch();
  CudaWeights w;
  w.allocate(c, with_fp8);
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = c.q_size(), KV = c.kv_size(), D = c.head_dim;
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    return ck.get(name, std::move(shape), {DType::kBF16, DType::kF32});
  };
  Uploader up(bytes_needed(c, with_fp8), progress);
  Staging stage(with_fp8 && !fp8_file ? largest_product(c) : 0);
  // One product's weight from its parts (q/k/v or gate/up stacked along the output dim),
  // each [rows, K]: bf16 as it is; from an FP8 file, codes and scales as they are (every
  // part is whole 128-row blocks, so their block grids stack too); from bf16 into FP8,
  // staged and quantized on the GPU.
  auto product = [&](__nv_bfloat16* dst, const cuda::Fp8Weight& q8,
                     const std::vector<std::pair<std::string, int64_t>>& parts, int64_t K) {
    int64_t row = 0;
    for (const auto& [name, rows] : parts) {
      if (!with_fp8) {
        up.put(get(name + ".weight", {rows, K}), dst + row * K);
      } else if (fp8_file) {
        up.put_raw(ck.get(name + ".weight", {rows, K}, {DType::kF8E4M3}),
                   const_cast<uint8_t*>(q8.q) + row * K);
        const int64_t sr = fp8_blocks(rows), sc = fp8_blocks(K);
        up.put_scales(
            ck.get(name + ".weight_scale_inv", {sr, sc}, {DType::kBF16, DType::kF16, DType::kF32}),
            const_cast<float*>(q8.s) + (row / kFp8Block) * q8.lds, sr, sc, q8.lds);
      } else {
        up.put(get(name + ".weight", {rows, K}), stage.get() + row * K);
      }
      row += rows;
    }
    if (with_fp8 && !fp8_file)  // after the copies on the same stream; stage reused after it
      cuda::quantize_weight_fp8(stage.get(), row, int(K), const_cast<uint8_t*>(q8.q),
                                const_cast<float*>(q8.s), q8.lds, up.stream());
  };
  up.put(get("model.embed_tokens.weight", {V, H}), w.embed);
  if (!c.tie_word_embeddings) up.put(get("lm_head.weight", {V, H}), w.lm_head);
  up.put(get("model.norm.weight", {H}), w.final_norm);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto& L = w.layers[size_t(l)];
    up.put(get(p + "input_layernorm.weight", {H}), L.in_norm);
    product(
        L.qkv, L.qkv8,
        {{p + "self_attn.q_proj", Q}, {p + "self_attn.k_proj", KV}, {p + "self_attn.v_proj", KV}},
        H);
    up.put(get(p + "self_attn.q_norm.weight", {D}), L.q_norm);
    up.put(get(p + "self_attn.k_norm.weight", {D}), L.k_norm);
    product(L.o, L.o8, {{p + "self_attn.o_proj", H}}, Q);
    up.put(get(p + "post_attention_layernorm.weight", {H}), L.post_norm);
    product(L.gate_up, L.gate_up8, {{p + "mlp.gate_proj", I}, {p + "mlp.up_proj", I}}, H);
    product(L.down, L.down8, {{p + "mlp.down_proj", H}}, I);
  }
  up.finish();
  return w;
}

}  // namespace tandem::model
#endif  // TANDEM_HAVE_CUDA
