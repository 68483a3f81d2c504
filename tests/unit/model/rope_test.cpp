// Rotary frequencies against transformers' (tests/golden/model/rope.json, made by
// scripts/golden/make_model_goldens.py): plain and YaRN at Qwen3's head_dim 128.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "model/config.h"
#include "model/rope.h"

using namespace tandem;
using nlohmann::json;

TEST(Rope, MatchesTransformersInvFreqAndAttentionFactor) {
  json g = json::parse(read_file(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/model/rope.json"));
  int cases = 0;
  for (auto& [name, c] : g.items()) {
    ASSERT_FALSE(c.contains("error")) << name << ": " << c["error"];
    json cfg = {{"architectures", {"Qwen3ForCausalLM"}},
                {"model_type", "qwen3"},
                {"hidden_size", 1024},
                {"intermediate_size", 3072},
                {"num_hidden_layers", 1},
                {"num_attention_heads", 16},
                {"num_key_value_heads", 8},
                {"head_dim", 128},
                {"vocab_size", 151936},
                {"rope_theta", 1000000.0},
                {"max_position_embeddings", c["max_position_embeddings"]},
                {"rope_scaling", c["rope_scaling"]}};
    auto mc = model::parse_config(cfg);
    auto t = model::rope_table(mc);
    auto want = c["inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(t.inv_freq.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(t.inv_freq[i], want[i], 2e-6 * want[i] + 1e-12) << name << " i=" << i;
    EXPECT_NEAR(t.attention_factor, c["attention_scaling"].get<double>(), 1e-6) << name;
    ++cases;
  }
  EXPECT_GE(cases, 4);
}
