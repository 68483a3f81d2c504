#include "golden_util.h"

#include <unistd.h>
#include <algorithm>

#include "core/error.h"
#include "core/paths.h"
#include "core/rng.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;

namespace tandem::modeltest {

nlohmann::json qwen3_32b_config() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", 5120},
          {"intermediate_size", 25600},
          {"num_hidden_layers", 64},
          {"num_attention_heads", 64},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"vocab_size", 151936},
          {"max_position_embeddings", 40960},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

fs::path test_model_dir(const std::string& preset) {
  fs::path dir = fs::path(TANDEM_BINARY_DIR) / "testdata" / (preset + "-seed0");
  if (fs::exists(dir / "model.safetensors")) return dir;
  auto tok = find_tokenizer_source();
  if (!tok) fail(ErrorKind::kNotFound, "run `make deps`: the npm tokenizer package is missing");
  fs::path tmp = dir;
  tmp += ".tmp" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp.parent_path());
  const bool fp8 = preset.ends_with("-fp8");
  auto spec = model::test_model_preset(fp8 ? preset.substr(0, preset.size() - 4) : preset);
  spec.fp8 = fp8;
  model::write_test_model(tmp, spec, 0, *tok);
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // a concurrent test may have won the race: fine, same bytes
  if (ec) fs::remove_all(tmp);
  return dir;
}

Paging::Paging(int num_blocks, int block_size, uint64_t seed) : block_size_(block_size) {
  for (int i = 0; i < num_blocks; ++i) free_.push_back(i);
  Rng r(seed);
  for (size_t i = free_.size(); i > 1; --i) std::swap(free_[i - 1], free_[r.next() % i]);
}

int Paging::add_sequence() {
  blocks_.emplace_back();
  len_.push_back(0);
  return int(len_.size()) - 1;
}

model::ForwardBatch Paging::step(
    const std::vector<std::pair<int, std::vector<model::TokenId>>>& work, bool all_logits) {
  model::ForwardBatch b;
  b.query_start.push_back(0);
  size_t max_blocks = 1;
  for (auto& [s, toks] : work) {
    auto& bl = blocks_[size_t(s)];
    int32_t need = (len_[size_t(s)] + int32_t(toks.size()) + block_size_ - 1) / block_size_;
    while (int32_t(bl.size()) < need) {
      if (free_.empty()) fail(ErrorKind::kResource, "test paging: out of blocks");
      bl.push_back(free_.back());
      free_.pop_back();
    }
    max_blocks = std::max(max_blocks, bl.size());
  }
  b.max_blocks = int32_t(max_blocks);
  for (auto& [s, toks] : work) {
    auto& bl = blocks_[size_t(s)];
    for (auto t : toks) {
      int32_t pos = len_[size_t(s)]++;
      if (all_logits) b.logit_rows.push_back(int32_t(b.tokens.size()));
      b.tokens.push_back(t);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t(bl[size_t(pos / block_size_)]) * block_size_ +
                               pos % block_size_);
    }
    if (!all_logits) b.logit_rows.push_back(int32_t(b.tokens.size()) - 1);
    b.query_start.push_back(int32_t(b.tokens.size()));
    b.context_lens.push_back(len_[size_t(s)]);
    for (size_t j = 0; j < max_blocks; ++j) b.block_tables.push_back(j < bl.size() ? bl[j] : -1);
  }
  return b;
}

}  // namespace tandem::modeltest
