// FP8 weights on the GPU, as loaded: an FP8 checkpoint's codes and scales land in the fused
// products byte for byte (scales widened to fp32 in padded rows), and a bf16 checkpoint
// quantized at load holds core/fp8.h's codes of its weights.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/rmsnorm.cuh"
#include "core/bf16.h"
#include "core/fp8.h"
#include "core/fs.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/cuda_runner.h"
#include "model/cuda_weights.h"
#include "model/fp8_weights.h"
#include "model/runner.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "model/testmodel.h"

#include <algorithm>
#include <cmath>
#include "core/error.h"
#include "core/paths.h"

namespace fs = std::filesystem;

namespace tandem::model {
namespace {

fs::path write_model(bool fp8) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("tandem-cuda-weights-" + std::string(fp8 ? "fp8-" : "") + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto tok = find_tokenizer_source();
  if (!tok) fail(ErrorKind::kNotFound, "tokenizer files not found (TANDEM_TOKENIZER_DIR)");
  TestModelSpec spec = test_model_preset("small");
  spec.fp8 = fp8;
  write_test_model(dir, spec, 0, *tok);
  return dir;
}

template <class T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

float scale_value(const TensorView& s, size_t i) {
  if (s.dtype == DType::kBF16) return bf16_to_float(bf16{static_cast<const uint16_t*>(s.data)[i]});
  return static_cast<const float*>(s.data)[i];
}

// The parts of one fused product (name, rows) against its device codes and scales.
void check_product(const Checkpoint& ck, const cuda::Fp8Weight& w,
                   const std::vector<std::pair<std::string, int64_t>>& parts, int64_t K) {
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.second;
  const auto q = download(w.q, size_t(rows * K));
  const auto s = download(w.s, size_t(fp8_blocks(rows) * w.lds));
  ASSERT_EQ(w.lds, fp8_scale_stride(K));
  int64_t row = 0;
  for (const auto& [name, n] : parts) {
    const TensorView codes = ck.get(name + ".weight");
    const TensorView sc = ck.get(name + ".weight_scale_inv");
    ASSERT_EQ(codes.bytes(), size_t(n * K)) << name;
    EXPECT_EQ(0, std::memcmp(codes.data, q.data() + row * K, size_t(n * K))) << name;
    const int64_t sr = fp8_blocks(n), scn = fp8_blocks(K);
    for (int64_t r = 0; r < sr; ++r)
      for (int64_t k = 0; k < w.lds; ++k) {
        const float want = k < scn ? scale_value(sc, size_t(r * scn + k)) : 0.0f;
        ASSERT_EQ(s[size_t((row / kFp8Block + r) * w.lds + k)], want)
            << name << " " << r << "," << k;
      }
    row += n;
  }
}

// Every layer's four products and its input norm against the checkpoint.
void check_layers(const fs::path& dir, const ModelConfig& c, const CudaWeights& w) {
  Checkpoint ck(dir);
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_size(), KV = c.kv_size();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto& L = w.layers[size_t(l)];
    EXPECT_EQ(L.qkv, nullptr);
    check_product(
        ck, L.qkv8,
        {{p + "self_attn.q_proj", Q}, {p + "self_attn.k_proj", KV}, {p + "self_attn.v_proj", KV}},
        H);
    check_product(ck, L.o8, {{p + "self_attn.o_proj", H}}, Q);
    check_product(ck, L.gate_up8, {{p + "mlp.gate_proj", I}, {p + "mlp.up_proj", I}}, H);
    check_product(ck, L.down8, {{p + "mlp.down_proj", H}}, I);
    const auto in_norm = download(reinterpret_cast<const uint16_t*>(L.in_norm), size_t(H));
    const TensorView t = ck.get(p + "input_layernorm.weight");
    EXPECT_EQ(0, std::memcmp(t.data, in_norm.data(), size_t(H) * 2));
  }
}

TEST(CudaWeights, Fp8CheckpointCodesAndScalesLoadAsTheyAre) {
  const fs::path dir = write_model(true);
  const ModelConfig c = load_config(dir);
  ASSERT_TRUE(c.fp8.has_value());
  const CudaWeights w = CudaWeights::from_checkpoint(dir.string(), c, false, true);
  ASSERT_TRUE(w.fp8);
  check_layers(dir, c, w);
  fs::remove_all(dir);
}

// The same after a runner has loaded them and run prefill and decode steps (nothing the
// forward does may write into them).
TEST(CudaWeights, Fp8CheckpointStaysIntactInARunner) {
  if (!cuda::Fp8Gemm::supported()) GTEST_SKIP() << "no block-scaled FP8 GEMM";
  const fs::path dir = write_model(true);
  const ModelConfig c = load_config(dir);
  CudaRunnerOptions o;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_model_len = 512;
  o.progress = false;
  auto r = make_cuda_runner(dir.string(), o);
  auto check_all = [&](const char* when) {
    SCOPED_TRACE(when);
    check_layers(dir, c, cuda_runner_weights(*r));
  };
  check_all("after loading");
  // A prefill of 37 tokens, then decode steps.
  ForwardBatch b;
  b.query_start = {0, 37};
  b.max_blocks = 4;
  b.block_tables = {3, 9, 1, 7};
  for (int t = 0; t < 37; ++t) {
    b.tokens.push_back(TokenId(1000 + 17 * t));
    b.positions.push_back(t);
    b.slot_mapping.push_back(int64_t(b.block_tables[size_t(t / 16)]) * 16 + t % 16);
  }
  b.context_lens = {37};
  b.logit_rows = {36};
  std::vector<float> logits(size_t(c.vocab_size));
  r->forward(b, logits);
  check_all("after a prefill");
  fs::remove_all(dir);
}

// The FP8 checkpoint's weights and those of its dequantized bf16 copy quantized at load: the
// bf16 tensors equal, the products' values within e4m3's rounding.
TEST(CudaWeights, Fp8CheckpointAgreesWithItsRequantizedCopy) {
  if (!cuda::Fp8Gemm::supported()) GTEST_SKIP() << "no block-scaled FP8 GEMM";
  const fs::path dir = write_model(true);
  const fs::path deq = dir.string() + "-bf16";
  {
    fs::create_directories(deq);
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename() != "model.safetensors" && e.path().filename() != "config.json")
        fs::copy_file(e.path(), deq / e.path().filename());
    auto cfg = nlohmann::json::parse(read_file(dir / "config.json"));
    cfg.erase("quantization_config");
    write_file(deq / "config.json", cfg.dump(2));
    const ModelConfig c = load_config(dir);
    Checkpoint ck(dir);
    std::vector<TensorBlob> blobs;
    for (const std::string& name : ck.names()) {
      if (name.ends_with("_scale_inv")) continue;
      const TensorView t = ck.get(name);
      TensorBlob b{name, "BF16", t.shape, {}};
      if (t.dtype == DType::kF8E4M3) {
        const Fp8Weight w = read_fp8_weight(ck, name, t.shape[0], t.shape[1], *c.fp8);
        std::vector<float> f(size_t(t.numel()));
        dequantize_fp8_weight(w, f.data());
        b.data.resize(f.size() * 2);
        for (size_t i = 0; i < f.size(); ++i) {
          const uint16_t v = float_to_bf16(f[i]).bits;
          std::memcpy(b.data.data() + 2 * i, &v, 2);
        }
      } else {
        b.data.assign(static_cast<const uint8_t*>(t.data),
                      static_cast<const uint8_t*>(t.data) + t.bytes());
      }
      blobs.push_back(std::move(b));
    }
    write_safetensors(deq / "model.safetensors", blobs);
  }
  const ModelConfig c = load_config(dir), cb = load_config(deq);
  const CudaWeights a = CudaWeights::from_checkpoint(dir.string(), c, false, true);
  const CudaWeights b = CudaWeights::from_checkpoint(deq.string(), cb, false, true);
  const size_t H = size_t(c.hidden_size), D = size_t(c.head_dim), V = size_t(c.vocab_size);
  auto same = [&](const __nv_bfloat16* x, const __nv_bfloat16* y, size_t n, const char* what) {
    EXPECT_EQ(download(reinterpret_cast<const uint16_t*>(x), n),
              download(reinterpret_cast<const uint16_t*>(y), n))
        << what;
  };
  same(a.embed, b.embed, V * H, "embed");
  same(a.lm_head, b.lm_head, V * H, "lm_head");
  same(a.final_norm, b.final_norm, H, "final_norm");
  auto close = [&](const cuda::Fp8Weight& x, const cuda::Fp8Weight& y, int64_t N, int64_t K,
                   const char* what, int l) {
    const auto qa = download(x.q, size_t(N * K)), qb = download(y.q, size_t(N * K));
    const auto sa = download(x.s, size_t(fp8_blocks(N) * x.lds));
    const auto sb = download(y.s, size_t(fp8_blocks(N) * y.lds));
    double num = 0, den = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double u = fp8_block_dequant(qa.data(), sa.data(), x.lds, K, n, k);
        const double v = fp8_block_dequant(qb.data(), sb.data(), y.lds, K, n, k);
        num += (u - v) * (u - v);
        den += u * u;
      }
    std::printf("[ model ] layer %d %s: checkpoint against its requantized copy rel %.2e\n", l,
                what, std::sqrt(num / den));
    // Requantizing e4m3 values (each block's largest at code 448) gives the same codes; the
    // scales move by the copy's bf16 rounding of 448 s (< 2^-8).
    EXPECT_EQ(qa, qb) << what << " layer " << l;
    EXPECT_LT(std::sqrt(num / den), 5e-3) << what << " layer " << l;
  };
  const int64_t Hh = c.hidden_size, I = c.intermediate_size, Q = c.q_size();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const auto &x = a.layers[size_t(l)], &y = b.layers[size_t(l)];
    same(x.in_norm, y.in_norm, H, "in_norm");
    same(x.post_norm, y.post_norm, H, "post_norm");
    same(x.q_norm, y.q_norm, D, "q_norm");
    same(x.k_norm, y.k_norm, D, "k_norm");
    close(x.qkv8, y.qkv8, Q + 2 * c.kv_size(), Hh, "qkv", l);
    close(x.o8, y.o8, Hh, Q, "o", l);
    close(x.gate_up8, y.gate_up8, 2 * I, Hh, "gate_up", l);
    close(x.down8, y.down8, Hh, I, "down", l);
  }
  fs::remove_all(dir);
  fs::remove_all(deq);
}

TEST(CudaWeights, Bf16CheckpointQuantizedAtLoadFollowsTheHostRule) {
  const fs::path dir = write_model(false);
  const ModelConfig c = load_config(dir);
  const CudaWeights w = CudaWeights::from_checkpoint(dir.string(), c, false, true);
  Checkpoint ck(dir);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  // Layer 1's gate/up: the fused [2I, H] weight quantized as one matrix.
  const auto& L = w.layers[1];
  std::vector<float> f(size_t(2 * I * H));
  for (int part = 0; part < 2; ++part) {
    const TensorView t =
        ck.get(std::string("model.layers.1.mlp.") + (part ? "up_proj" : "gate_proj") + ".weight");
    for (int64_t i = 0; i < I * H; ++i)
      f[size_t(part * I * H + i)] = bf16_to_float(bf16{static_cast<const uint16_t*>(t.data)[i]});
  }
  const int64_t lds = fp8_scale_stride(H);
  std::vector<uint8_t> q(f.size());
  std::vector<float> s(size_t(fp8_blocks(2 * I) * lds), 0.0f);
  fp8_block_quantize(f.data(), 2 * I, H, q.data(), s.data(), lds);
  EXPECT_EQ(download(L.gate_up8.q, q.size()), q);
  EXPECT_EQ(download(L.gate_up8.s, s.size()), s);
  fs::remove_all(dir);
}

// Each FP8 product of the checkpoint against the bf16 product of its dequantized weights
// (exact in fp32, rounded to bf16 for cuBLASLt), on the same random rows.
TEST(CudaWeights, Fp8CheckpointProductsMatchDequantizedBf16Products) {
  if (!cuda::Fp8Gemm::supported()) GTEST_SKIP() << "no block-scaled FP8 GEMM";
  const fs::path dir = write_model(true);
  const ModelConfig c = load_config(dir);
  const CudaWeights w = CudaWeights::from_checkpoint(dir.string(), c, false, true);
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_size();
  const int64_t QKV = Q + 2 * c.kv_size();
  cuda::Fp8Gemm f(64, int(std::max({H, Q, I})));
  cuda::Gemm g(0);
  Rng rng(11);
  struct P {
    const char* name;
    const cuda::Fp8Weight* w;
    int64_t N, K;
  };
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const auto& L = w.layers[size_t(layer)];
    for (const P& p : {P{"qkv", &L.qkv8, QKV, H}, P{"o", &L.o8, H, Q},
                       P{"gate_up", &L.gate_up8, 2 * I, H}, P{"down", &L.down8, H, I}}) {
      // The dequantized weight, from the device codes and scales.
      const auto q = download(p.w->q, size_t(p.N * p.K));
      const auto s = download(p.w->s, size_t(fp8_blocks(p.N) * p.w->lds));
      std::vector<uint16_t> wb(size_t(p.N * p.K));
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t k = 0; k < p.K; ++k)
          wb[size_t(n * p.K + k)] =
              float_to_bf16(fp8_block_dequant(q.data(), s.data(), p.w->lds, p.K, n, k)).bits;
      for (int T : {1, 2, 16}) {
        std::vector<uint16_t> xb(size_t(T * p.K));
        for (auto& v : xb) v = float_to_bf16(float(rng.normal())).bits;
        void *dx, *dw, *y8, *y16;
        ASSERT_EQ(cudaMalloc(&dx, xb.size() * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dw, wb.size() * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&y8, size_t(T + 4) * p.N * 2), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&y16, size_t(T) * p.N * 2), cudaSuccess);
        cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(dw, wb.data(), wb.size() * 2, cudaMemcpyHostToDevice);
        auto* X = static_cast<const __nv_bfloat16*>(dx);
        // qkv with the layer's input norm folded in (the runner's call), against the norm
        // kernel then the bf16 product.
        const __nv_bfloat16* nw = std::string(p.name) == "qkv" ? L.in_norm : nullptr;
        f.linear(X, int(p.K), *p.w, static_cast<__nv_bfloat16*>(y8), int(p.N), T, int(p.N),
                 int(p.K), nullptr, false, nw, float(c.rms_norm_eps));
        const __nv_bfloat16* Xn = X;
        void* dh = nullptr;
        if (nw) {
          ASSERT_EQ(cudaMalloc(&dh, xb.size() * 2), cudaSuccess);
          cuda::rmsnorm(X, nw, static_cast<__nv_bfloat16*>(dh), T, int(p.K), float(c.rms_norm_eps),
                        nullptr);
          Xn = static_cast<const __nv_bfloat16*>(dh);
        }
        g.cublas_linear(Xn, static_cast<const __nv_bfloat16*>(dw), static_cast<__nv_bfloat16*>(y16),
                        T, int(p.N), int(p.K), nullptr);
        cudaFree(dh);
        const auto a = download(static_cast<const uint16_t*>(y8), size_t(T * p.N));
        const auto b = download(static_cast<const uint16_t*>(y16), size_t(T * p.N));
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          const double d = double(bf16_to_float(bf16{a[i]})) - bf16_to_float(bf16{b[i]});
          num += d * d;
          den += double(bf16_to_float(bf16{b[i]})) * bf16_to_float(bf16{b[i]});
        }
        std::printf("[ model ] layer %d %s T=%d: fp8 against dequantized bf16 rel error %.2e\n",
                    layer, p.name, T, std::sqrt(num / den));
        EXPECT_LT(std::sqrt(num / den), T <= f.gemv_max_tokens() ? 1e-2 : 5e-2)
            << p.name << " T=" << T;
        cudaFree(dx);
        cudaFree(dw);
        cudaFree(y8);
        cudaFree(y16);
      }
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::model
