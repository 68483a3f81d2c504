#pragma once
// The settings that pick one token from a row of logits, as every layer passes them along:
// the engine's request (engine::SamplingParams), the runner's row (model::RowSampling) and
// the GPU sampler's row (cuda::SampleRow) each extend this one struct, so a hand-over between
// layers is one assignment. Plain C++17: device code includes it too.
#include <cstdint>

namespace tandem {

struct SamplingKnobs {
  float temperature = 1.0f;         // 0 (below 1e-5) = greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 = off
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // multiplicative, HF style; 1 = off
  float presence_penalty = 0.0f;    // additive, OpenAI style
  float frequency_penalty = 0.0f;
};

}  // namespace tandem
