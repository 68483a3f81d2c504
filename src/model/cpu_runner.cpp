#include "model/cpu_runner.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/log.h"
#include "model/config.h"
#include "model/fp8_weights.h"
#include "model/rope.h"
#include "model/safetensors.h"

namespace tandem::model {

namespace fs = std::filesystem;
using cpu::WeightRef;

uint64_t machine_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemTotal:") return kb * 1024;
  }
  return 0;
}

namespace {

double gib(uint64_t b) {
  return double(b) / double(1ull << 30);
}

struct Layer {
  WeightRef in_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down;
};

class CpuRunner final : public Runner {
 public:
  CpuRunner(const fs::path& dir, const CpuRunnerOptions& opt);
  int vocab_size() const override { return cfg_.vocab_size; }
  int max_model_len() const override { return max_len_; }
  KvLayout kv_layout() const override { return layout_; }
  std::string name() const override { return "cpu"; }
  void forward(const ForwardBatch& batch, std::span<float> logits) override;

 private:
  WeightRef weight(const std::string& name, std::vector<int64_t> shape);
  // A linear weight: as weight(), or an FP8 one dequantized into an owned fp32 copy.
  WeightRef linear(const std::string& name, int64_t n, int64_t k);
  void validate(const ForwardBatch& b, size_t logits_size) const;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::vector<std::unique_ptr<float[]>> dequantized_;  // FP8 weights as fp32
  std::vector<Layer> layers_;
  WeightRef embed_, final_norm_, lm_head_;
  RopeTable rope_;
  int max_len_ = 0;
  KvLayout layout_;
  std::vector<std::unique_ptr<float[]>> k_cache_, v_cache_;
  std::unique_ptr<cpu::ThreadPool> pool_;
};

WeightRef CpuRunner::weight(const std::string& name, std::vector<int64_t> shape) {
  TensorView t = ckpt_->get(name, shape, {DType::kBF16, DType::kF16, DType::kF32});
  WeightRef w;
  w.data = t.data;
  w.type = t.dtype == DType::kBF16  ? cpu::WType::kBF16
           : t.dtype == DType::kF16 ? cpu::WType::kF16
                                    : cpu::WType::kF32;
  w.n = shape[0];
  w.k = shape.size() > 1 ? shape[1] : shape[0];
  if (shape.size() == 1) w.n = 1;
  return w;
}

WeightRef CpuRunner::linear(const std::string& name, int64_t n, int64_t k) {
  if (ckpt_->get(name).dtype != DType::kF8E4M3) return weight(name, {n, k});
  if (!cfg_.fp8)
    fail(ErrorKind::kUnsupported,
         "{}: tensor '{}' is F8_E4M3 but config.json has no quantization_config (supported: "
         "fp8 with 128x128 blocks and a weight_scale_inv per weight)",
         ckpt_->dir().string(), name);
  Fp8Weight f = read_fp8_weight(*ckpt_, name, n, k, *cfg_.fp8);
  dequantized_.emplace_back(new float[size_t(n * k)]);
  dequantize_fp8_weight(f, dequantized_.back().get(), pool_.get());
  WeightRef w;
  w.data = dequantized_.back().get();
  w.type = cpu::WType::kF32;
  w.n = n;
  w.k = k;
  return w;
}

CpuRunner::CpuRunner(const fs::path& dir, const CpuRunnerOptions& opt) {
  cfg_ = load_config(dir);
  if (opt.weight_dtype == WeightDtype::kFp8 && !cfg_.fp8)
    fail(ErrorKind::kUnsupported,
         "{}: quantizing bf16 weights to FP8 (--quantization fp8) needs the CUDA backend; the "
         "CPU backend runs a checkpoint's own weights",
         dir.string());
  if (opt.weight_dtype == WeightDtype::kBf16 && cfg_.fp8)
    fail(ErrorKind::kUnsupported,
         "{} is an FP8 checkpoint; it runs with FP8 weights (quantization auto or fp8), not bf16",
         dir.string());
  if (opt.block_size != 16 && opt.block_size != 32)
    fail(ErrorKind::kInvalidArgument, "KV block size {} is not supported (supported: 16, 32)",
         opt.block_size);
  max_len_ = opt.max_model_len > 0 ? opt.max_model_len : cfg_.max_position_embeddings;
  if (max_len_ <= 0) fail(ErrorKind::kInvalidArgument, "max_model_len must be > 0");

  // Refuse a model that cannot fit before mapping anything. FP8 linear weights are held as
  // fp32 copies (4 bytes a parameter); their codes are read once from the mapping.
  const uint64_t limit = opt.memory_limit_bytes ? opt.memory_limit_bytes : machine_memory_bytes();
  const uint64_t wsize = cfg_.dtype == "float32" ? 4 : 2;
  const uint64_t linear_params = cfg_.fp8 ? uint64_t(cfg_.num_linear_params()) : 0;
  const uint64_t weight_bytes =
      (uint64_t(cfg_.num_params()) - linear_params) * wsize + linear_params * 4;
  const uint64_t slot_bytes = uint64_t(cfg_.num_hidden_layers) * 2 * uint64_t(cfg_.kv_size()) * 4;
  const int64_t blocks_per_seq = (max_len_ + opt.block_size - 1) / opt.block_size;
  int64_t num_blocks = opt.num_blocks;
  if (num_blocks <= 0) {
    num_blocks = 4 * blocks_per_seq;
    // Default cache: at most a quarter of the memory left after the weights.
    uint64_t room = limit > weight_bytes ? (limit - weight_bytes) / 4 : 0;
    int64_t fit = int64_t(room / (slot_bytes * uint64_t(opt.block_size)));
    num_blocks = std::max<int64_t>(std::min(num_blocks, fit), blocks_per_seq > 0 ? 1 : 0);
  }
  const uint64_t kv_bytes = uint64_t(num_blocks) * uint64_t(opt.block_size) * slot_bytes;
  if (limit > 0 && weight_bytes + kv_bytes > limit)
    fail(ErrorKind::kResource,
         "{}: the model needs {:.2f} GiB of weights ({} parameters, {}) plus {:.2f} GiB of KV "
         "cache, but this machine has {:.2f} GiB of RAM",
         dir.string(), gib(weight_bytes), cfg_.num_params(),
         cfg_.fp8 ? cfg_.dtype + ", FP8 linear weights dequantized to float32" : cfg_.dtype,
         gib(kv_bytes), gib(limit));

  ckpt_ = std::make_unique<Checkpoint>(dir);
  // What stays resident: the mapped tensors, except FP8 codes (clean file pages the kernel
  // may drop once they are dequantized), plus their fp32 copies.
  uint64_t fp8_codes = 0;
  for (const auto& name : ckpt_->names())
    if (TensorView t = ckpt_->get(name); t.dtype == DType::kF8E4M3) fp8_codes += t.bytes();
  const uint64_t resident = ckpt_->total_bytes() - fp8_codes + 4 * fp8_codes;
  if (limit > 0 && resident + kv_bytes > limit)
    fail(ErrorKind::kResource,
         "{}: the checkpoint needs {:.2f} GiB of tensors in memory{} plus {:.2f} GiB of KV "
         "cache, but this machine has {:.2f} GiB of RAM",
         dir.string(), gib(resident), fp8_codes ? " (FP8 weights dequantized to float32)" : "",
         gib(kv_bytes), gib(limit));
  pool_ = std::make_unique<cpu::ThreadPool>(opt.threads);

  const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size, D = cfg_.head_dim;
  const int64_t Q = cfg_.q_size(), KV = cfg_.kv_size(), V = cfg_.vocab_size;
  embed_ = weight("model.embed_tokens.weight", {V, H});
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    L.in_norm = weight(p + "input_layernorm.weight", {H});
    L.q = linear(p + "self_attn.q_proj.weight", Q, H);
    L.k = linear(p + "self_attn.k_proj.weight", KV, H);
    L.v = linear(p + "self_attn.v_proj.weight", KV, H);
    L.o = linear(p + "self_attn.o_proj.weight", H, Q);
    L.q_norm = weight(p + "self_attn.q_norm.weight", {D});
    L.k_norm = weight(p + "self_attn.k_norm.weight", {D});
    L.post_norm = weight(p + "post_attention_layernorm.weight", {H});
    L.gate = linear(p + "mlp.gate_proj.weight", I, H);
    L.up = linear(p + "mlp.up_proj.weight", I, H);
    L.down = linear(p + "mlp.down_proj.weight", H, I);
    layers_.push_back(L);
  }
  final_norm_ = weight("model.norm.weight", {H});
  // Tied models use the embedding as lm_head even when the file also lists lm_head.weight.
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : weight("lm_head.weight", {V, H});
  rope_ = rope_table(cfg_);
  ckpt_->prefetch();

  layout_.num_layers = cfg_.num_hidden_layers;
  layout_.num_kv_heads = cfg_.num_key_value_heads;
  layout_.head_dim = cfg_.head_dim;
  layout_.block_size = opt.block_size;
  layout_.num_blocks = int(num_blocks);
  layout_.dtype = opt.kv_cache_dtype;
  // Uninitialised on purpose: the pages are only touched when K/V is written.
  const size_t per_layer = size_t(num_blocks) * size_t(opt.block_size) * size_t(KV);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    k_cache_.emplace_back(new float[per_layer]);
    v_cache_.emplace_back(new float[per_layer]);
  }
}

void CpuRunner::validate(const ForwardBatch& b, size_t logits_size) const {
  auto bad = [](const std::string& why) {
    fail(ErrorKind::kInvalidArgument, "cpu runner: invalid batch: {}", why);
  };
  const int64_t T = b.num_tokens(), S = b.num_seqs(), bs = layout_.block_size;
  if (T == 0) bad("no tokens");
  if (int64_t(b.positions.size()) != T || int64_t(b.slot_mapping.size()) != T)
    bad("tokens, positions and slot_mapping differ in length");
  if (S <= 0 || b.query_start[0] != 0 || b.query_start[size_t(S)] != T)
    bad("query_start must run from 0 to the number of tokens");
  if (int64_t(b.context_lens.size()) != S) bad("context_lens has the wrong length");
  if (b.max_blocks <= 0 || int64_t(b.block_tables.size()) != S * b.max_blocks)
    bad("block_tables must be num_seqs x max_blocks");
  for (auto t : b.tokens)
    if (t < 0 || t >= cfg_.vocab_size)
      bad(fmt::format("token id {} outside the vocabulary [0, {})", t, cfg_.vocab_size));
  for (int64_t s = 0; s < S; ++s) {
    int32_t q0 = b.query_start[size_t(s)], q1 = b.query_start[size_t(s) + 1];
    int32_t ctx = b.context_lens[size_t(s)];
    if (q1 < q0) bad("query_start is not increasing");
    if (ctx > max_len_ || ctx > int64_t(b.max_blocks) * bs)
      bad(fmt::format("sequence {}: context length {} exceeds the limit", s, ctx));
    for (int64_t j = 0; j < (ctx + bs - 1) / bs; ++j) {
      int32_t blk = b.block_tables[size_t(s * b.max_blocks + j)];
      if (blk < 0 || blk >= layout_.num_blocks)
        bad(fmt::format("sequence {}: block {} of its table is {} (have {})", s, j, blk,
                        layout_.num_blocks));
    }
    for (int32_t r = q0; r < q1; ++r) {
      int32_t pos = b.positions[size_t(r)];
      if (pos < 0 || pos >= ctx || (r > q0 && pos != b.positions[size_t(r) - 1] + 1))
        bad(
            fmt::format("sequence {}: position {} of row {} is not consecutive within "
                        "context length {}",
                        s, pos, r, ctx));
      int64_t slot = int64_t(b.block_tables[size_t(s * b.max_blocks + pos / bs)]) * bs + pos % bs;
      if (b.slot_mapping[size_t(r)] != slot)
        bad(fmt::format("row {}: slot {} does not match the block table (slot {})", r,
                        b.slot_mapping[size_t(r)], slot));
    }
  }
  for (auto r : b.logit_rows)
    if (r < 0 || r >= T) bad(fmt::format("logit row {} outside [0, {})", r, T));
  if (logits_size < b.logit_rows.size() * size_t(cfg_.vocab_size)) bad("logits buffer too small");
}

void CpuRunner::forward(const ForwardBatch& b, std::span<float> logits) {
  validate(b, logits.size());
  auto& pool = *pool_;
  const int64_t T = b.num_tokens(), H = cfg_.hidden_size, I = cfg_.intermediate_size;
  const int64_t D = cfg_.head_dim, Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const int64_t Q = cfg_.q_size(), KV = cfg_.kv_size(), QKV = Q + 2 * KV;
  const double eps = cfg_.rms_norm_eps;
  const float scale = float(1.0 / std::sqrt(double(D)));

  std::vector<float> x(size_t(T * H)), h(size_t(T * H)), qkv(size_t(T * QKV)), attn(size_t(T * Q)),
      gu(size_t(T * 2 * I)), act(size_t(T * I));
  cpu::embedding(b.tokens, embed_, x.data());
  cpu::AttnBatch ab{b.positions, b.query_start, b.block_tables, b.max_blocks};

  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    cpu::rmsnorm(x.data(), T, H, H, L.in_norm, eps, h.data(), H);
    float* q = qkv.data();
    float* k = q + Q;
    float* v = k + KV;
    cpu::matmul(h.data(), T, H, L.q, q, QKV, pool);
    cpu::matmul(h.data(), T, H, L.k, k, QKV, pool);
    cpu::matmul(h.data(), T, H, L.v, v, QKV, pool);
    for (int64_t t = 0; t < T; ++t) {  // per-head norms over head_dim, before RoPE
      cpu::rmsnorm(q + t * QKV, Hq, D, D, L.q_norm, eps, q + t * QKV, D);
      cpu::rmsnorm(k + t * QKV, Hkv, D, D, L.k_norm, eps, k + t * QKV, D);
    }
    cpu::rope(q, T, Hq, D, QKV, b.positions, rope_.inv_freq, rope_.attention_factor);
    cpu::rope(k, T, Hkv, D, QKV, b.positions, rope_.inv_freq, rope_.attention_factor);
    cpu::PagedKv kv{k_cache_[l].get(),
                    v_cache_[l].get(),
                    layout_.num_blocks,
                    layout_.block_size,
                    Hkv,
                    D,
                    layout_.dtype == KvCacheDtype::kFp8};
    cpu::kv_store(kv, k, QKV, v, QKV, b.slot_mapping);
    cpu::attention(q, QKV, Hq, kv, ab, scale, attn.data(), Q, pool);
    cpu::matmul(attn.data(), T, Q, L.o, x.data(), H, pool, /*accumulate=*/true);

    cpu::rmsnorm(x.data(), T, H, H, L.post_norm, eps, h.data(), H);
    cpu::matmul(h.data(), T, H, L.gate, gu.data(), 2 * I, pool);
    cpu::matmul(h.data(), T, H, L.up, gu.data() + I, 2 * I, pool);
    cpu::silu_mul(gu.data(), T, I, act.data());
    cpu::matmul(act.data(), T, I, L.down, x.data(), H, pool, /*accumulate=*/true);
  }

  const int64_t R = int64_t(b.logit_rows.size());
  std::vector<float> xn(size_t(R * H));
  for (int64_t r = 0; r < R; ++r)
    cpu::rmsnorm(x.data() + int64_t(b.logit_rows[size_t(r)]) * H, 1, H, H, final_norm_, eps,
                 xn.data() + r * H, H);
  cpu::matmul(xn.data(), R, H, lm_head_, logits.data(), cfg_.vocab_size, pool);
}

}  // namespace

std::unique_ptr<Runner> make_cpu_runner(const fs::path& model_dir, const CpuRunnerOptions& opt) {
  return std::make_unique<CpuRunner>(model_dir, opt);
}

}  // namespace tandem::model
