// config.json parsing: transformers 4.x and 5.x spellings, YaRN, and clear refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

using namespace tandem;
using nlohmann::json;

namespace {

json qwen3_8b_4x() {  // as Qwen/Qwen3-8B ships it (transformers 4.51)
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

ErrorKind kind_of(const json& j) {
  try {
    model::parse_config(j);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kInternal;  // "no error": never expected below
}

std::string message_of(const json& j) {
  try {
    model::parse_config(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, ParsesTransformers4Layout) {
  auto c = model::parse_config(qwen3_8b_4x());
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_size(), 4096);
  EXPECT_EQ(c.kv_size(), 1024);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_FALSE(c.yarn.has_value());
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});
  // 8B: ~8.19e9 parameters.
  EXPECT_NEAR(double(c.num_params()), 8.19e9, 0.01e9);
}

TEST(Config, ParsesTransformers5LayoutAndYarn) {
  json j = qwen3_8b_4x();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["eos_token_id"] = {151645, 151643};
  j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  auto c = model::parse_config(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_FALSE(c.yarn.has_value());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{151645, 151643}));

  j["rope_parameters"] = {{"rope_theta", 1e6},
                          {"rope_type", "yarn"},
                          {"factor", 4.0},
                          {"original_max_position_embeddings", 32768}};
  j["max_position_embeddings"] = 131072;
  c = model::parse_config(j);
  ASSERT_TRUE(c.yarn.has_value());
  EXPECT_DOUBLE_EQ(c.yarn->factor, 4.0);
  EXPECT_EQ(c.yarn->original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.yarn->beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.yarn->beta_slow, 1.0);

  // The 4.x spelling with the old `type` key.
  json k = qwen3_8b_4x();
  k["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 32768}};
  c = model::parse_config(k);
  ASSERT_TRUE(c.yarn.has_value());
  EXPECT_DOUBLE_EQ(c.yarn->factor, 2.0);
}

TEST(Config, DefaultsFollowQwen3Config) {
  json j = qwen3_8b_4x();
  j.erase("head_dim");
  j.erase("num_key_value_heads");
  auto c = model::parse_config(j);
  EXPECT_EQ(c.head_dim, 4096 / 32);
  EXPECT_EQ(c.num_key_value_heads, 32);
}

TEST(Config, RefusesWhatIsNotImplemented) {
  json j = qwen3_8b_4x();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
  EXPECT_NE(message_of(j).find("Qwen3ForCausalLM"), std::string::npos);

  j = qwen3_8b_4x();
  j["attention_bias"] = true;
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
  j = qwen3_8b_4x();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
  EXPECT_NE(message_of(j).find("yarn"), std::string::npos);
  j = qwen3_8b_4x();
  j["use_sliding_window"] = true;
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
  j = qwen3_8b_4x();
  j["hidden_act"] = "gelu";
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
  j = qwen3_8b_4x();
  j["quantization_config"] = {{"quant_method", "awq"}};
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);

  j = qwen3_8b_4x();
  j.erase("hidden_size");
  EXPECT_EQ(kind_of(j), ErrorKind::kInvalidArgument);
  EXPECT_NE(message_of(j).find("hidden_size"), std::string::npos);
  j = qwen3_8b_4x();
  j["num_key_value_heads"] = 5;
  EXPECT_EQ(kind_of(j), ErrorKind::kInvalidArgument);
  j = qwen3_8b_4x();
  j["hidden_size"] = "big";
  EXPECT_EQ(kind_of(j), ErrorKind::kInvalidArgument);
  j = qwen3_8b_4x();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}};
  EXPECT_EQ(kind_of(j), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(json::array()), ErrorKind::kInvalidArgument);
}

TEST(Config, ReadsFp8QuantizationConfig) {
  json j = qwen3_8b_4x();
  j["quantization_config"] = {{"activation_scheme", "dynamic"},
                              {"fmt", "e4m3"},
                              {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  auto c = model::parse_config(j);
  ASSERT_TRUE(c.fp8.has_value());
  EXPECT_EQ(c.fp8->block_n, 128);
  j["quantization_config"]["weight_block_size"] = {64, 64};
  EXPECT_EQ(kind_of(j), ErrorKind::kUnsupported);
}
