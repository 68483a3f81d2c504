#pragma once
// Deterministic random Qwen3 checkpoints in real formats, for tests and the demo server.
// The same preset and seed give the same bytes on every machine (see core/rng.h).
//
// FP8 variant (spec.fp8): the same bf16 weights as the plain model of that preset and
// seed, with the seven linear weights of every layer (q/k/v/o_proj, gate/up/down_proj)
// stored as Qwen3-*-FP8 checkpoints store them: `<name>` F8_E4M3 [out, in] codes plus
// `<name>_scale_inv` BF16 [ceil(out / 128), ceil(in / 128)], read back as
// W[i, j] = e4m3(codes[i, j]) * scale[i / 128][j / 128]. For each 128 x 128 block (partial
// at the edges) of the bf16 weight's values w, with amax = max |w| over the block:
//   s = bf16_round(amax / 448),  codes = e4m3_rn_satfinite(w / s)
// (core/fp8.h's float_to_fp8_e4m3; an all-zero block has s = 0 and zero codes). config.json
// gains quantization_config {"activation_scheme": "dynamic", "fmt": "e4m3",
// "quant_method": "fp8", "weight_block_size": [128, 128]} and keeps "torch_dtype":
// "bfloat16"; embeddings, lm_head and norms are the plain model's bf16 tensors.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/safetensors_writer.h"

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
  bool fp8 = false;                // linear weights as block-scaled FP8 (see above)
};

TestModelSpec test_model_preset(const std::string& name);  // throws on unknown names

// Writes config.json, generation_config.json, model.safetensors (bf16, or FP8 linear
// weights with spec.fp8), tokenizer.json and
// tokenizer_config.json into `out`, which must not exist or be empty. Everything is built
// in a staging folder first, so a failure never leaves a half-written model.
void write_test_model(const std::filesystem::path& out, const TestModelSpec& spec, uint64_t seed,
                      const std::filesystem::path& tokenizer_dir);

// What every test model shares (the scripted and embedding models build on it):
// config.json of a spec, and a model folder written from a config and tensors (the pinned
// tokenizer files copied after their sha256 is checked), published only when complete.
nlohmann::ordered_json test_model_config(const TestModelSpec& spec);
void write_model_folder(const std::filesystem::path& out, const nlohmann::ordered_json& config,
                        std::vector<TensorBlob>& tensors,
                        const std::filesystem::path& tokenizer_dir);

}  // namespace tandem::model
