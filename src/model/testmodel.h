#pragma once
// Deterministic random Qwen3 checkpoints in real formats, for tests and the demo server.
// The same preset and seed give the same bytes on every machine (see core/rng.h).
#include <cstdint>
#include <filesystem>
#include <string>

namespace tandem::model {

struct TestModelSpec {
  std::string preset;  // "tiny" or "small"
  int num_layers = 0;
  int hidden = 0;
  int intermediate = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab = 151936;
  bool tied = true;
  float embed_std = 0.5f;
  float lm_head_logit_std = 4.0f;  // untied lm_head: std chosen so logits have this spread
};

TestModelSpec test_model_preset(const std::string& name);  // throws on unknown names

// Writes config.json, generation_config.json, model.safetensors (bf16), tokenizer.json and
// tokenizer_config.json into `out`, which must not exist or be empty. Everything is built
// in a staging folder first, so a failure never leaves a half-written model.
void write_test_model(const std::filesystem::path& out, const TestModelSpec& spec, uint64_t seed,
                      const std::filesystem::path& tokenizer_dir);

}  // namespace tandem::model
