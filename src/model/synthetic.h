#pragma once
// Synthetic Qwen3 models: the real shapes of the released dense checkpoints (REFERENCE.md
// section 1) with random weights built directly on the GPU, so a benchmark of Qwen3-14B
// needs no 30 GB download. Named "synthetic:qwen3-<size>", size one of 0.6b 1.7b 4b 8b 14b
// 32b.
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"

namespace tandem::model {

inline constexpr const char* kSyntheticPrefix = "synthetic:";

bool is_synthetic(const std::string& model);

// The config of a synthetic model name. Throws Error(kNotFound) listing the known names.
ModelConfig synthetic_config(const std::string& model);

std::vector<std::string> synthetic_names();

}  // namespace tandem::model
