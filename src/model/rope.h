#pragma once
// Rotary embedding frequencies for a config: plain RoPE or YaRN (as transformers'
// _compute_default_rope_parameters / _compute_yarn_parameters compute them).
#include <vector>

#include "model/config.h"

namespace tandem::model {

struct RopeTable {
  std::vector<float> inv_freq;    // [head_dim / 2]
  float attention_factor = 1.0f;  // multiplies cos and sin (YaRN's mscale), 1 for plain
};

RopeTable rope_table(const ModelConfig& c);

}  // namespace tandem::model
