#pragma once
// config.json of a Qwen3 dense checkpoint (Qwen3ForCausalLM), as written by transformers
// 4.x (`rope_theta`, `rope_scaling`, `torch_dtype`) or 5.x (`rope_parameters`, `dtype`).
// Values the model code does not implement are refused when the file is read, with a
// message that lists what is supported.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::model {

// rope_scaling / rope_parameters with rope_type "yarn" (transformers' _compute_yarn_parameters).
struct YarnScaling {
  double factor = 1.0;
  int original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;  // default 0.1 * ln(factor) + 1
  std::optional<double> mscale, mscale_all_dim;
  bool truncate = true;
};

// quantization_config of Qwen3-*-FP8 checkpoints (read here; executed by the FP8 path).
struct Fp8Quantization {
  std::string fmt = "e4m3";
  std::string activation_scheme = "dynamic";
  int block_n = 128, block_k = 128;  // weight_block_size [out, in]
};

struct ModelConfig {
  std::string architecture = "Qwen3ForCausalLM";
  std::string model_type = "qwen3";
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // default hidden_size / num_attention_heads
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int max_window_layers = 0;
  double rope_theta = 1000000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // only false is supported
  std::string hidden_act = "silu";
  std::string dtype = "bfloat16";   // torch_dtype (4.x) or dtype (5.x)
  std::optional<YarnScaling> yarn;  // nullopt: plain RoPE
  std::optional<Fp8Quantization> fp8;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;  // eos_token_id may be a number or a list

  int q_size() const { return num_attention_heads * head_dim; }
  int kv_size() const { return num_key_value_heads * head_dim; }
  // Parameters of the checkpoint (embedding and lm_head counted once when tied).
  int64_t num_params() const;
  // Parameters of the seven linear weights of every layer (q/k/v/o, gate/up/down): the
  // ones an FP8 checkpoint quantizes.
  int64_t num_linear_params() const;
};

// Parses and validates a config.json object; `where` names the source in errors.
ModelConfig parse_config(const nlohmann::json& j, const std::string& where = "config.json");
// Reads `dir`/config.json. Throws Error(kNotFound) when missing, kInvalidArgument when
// malformed, kUnsupported for architectures or values the model code does not implement.
ModelConfig load_config(const std::filesystem::path& dir);

}  // namespace tandem::model
