#pragma once
// Shared helpers of the model tests: test models on disk (cached in the build folder, they
// are deterministic) and single-sequence batches over a shuffled block table.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/runner.h"

namespace tandem::modeltest {

// A Qwen3-32B config.json (bf16, untied lm_head): memory checks refuse or pass it on its
// numbers alone, with no weights written.
nlohmann::json qwen3_32b_config();

// The `preset` test model with seed 0, written once under the build folder. "tiny-fp8" and
// "small-fp8" are those presets with FP8 linear weights (TestModelSpec::fp8).
std::filesystem::path test_model_dir(const std::string& preset);

// A paged-KV bookkeeping helper: each sequence gets blocks from a shuffled free list, so
// the runner cannot get away with assuming contiguous blocks.
class Paging {
 public:
  Paging(int num_blocks, int block_size, uint64_t seed);
  int add_sequence();  // returns its index
  // A step: for each (sequence, new tokens) pair, the tokens at the next positions.
  model::ForwardBatch step(const std::vector<std::pair<int, std::vector<model::TokenId>>>& work,
                           bool all_logits);

 private:
  int block_size_;
  std::vector<int32_t> free_;
  std::vector<std::vector<int32_t>> blocks_;
  std::vector<int32_t> len_;
};

}  // namespace tandem::modeltest
