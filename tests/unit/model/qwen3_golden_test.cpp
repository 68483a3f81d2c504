// The CPU forward pass against transformers' fp32 Qwen3ForCausalLM (goldens made by
// scripts/golden/make_model_goldens.py on the GPU machine): top-64 logits and logsumexp at
// every prompt position within 1e-3, and the same 64 greedy tokens. The FP8 model's golden
// runs the weights dequantized in torch.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "golden_util.h"
#include "model/cpu_runner.h"

namespace fs = std::filesystem;
using namespace tandem;
using nlohmann::json;

namespace {

json golden(const std::string& name) {
  return json::parse(
      read_file(fs::path(TANDEM_SOURCE_DIR) / "tests/golden/model" / (name + ".json")));
}

// The tiny model with YaRN rope scaling in its config (same weights), as the script does.
fs::path tiny_yarn_dir() {
  fs::path tiny = modeltest::test_model_dir("tiny");
  fs::path dir = fs::path(TANDEM_BINARY_DIR) / "testdata" / "tiny-yarn-seed0";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (auto f :
       {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    fs::copy_file(tiny / f, dir / f);
  json cfg = json::parse(read_file(tiny / "config.json"));
  cfg["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  cfg["max_position_embeddings"] = 131072;
  write_file(dir / "config.json", cfg.dump(2));
  return dir;
}

// With an FP8 cache (kv) the logits may move by `tol`; the argmax must still be transformers'
// wherever its top logit leads the second by more than 2 tol, and greedy decoding must agree
// for the first `greedy_prefix` tokens of each prompt (64: all; the random test models have
// near-flat logits, so any change of the cache's numbers soon changes a greedy choice).
void check_model(const fs::path& dir, const std::string& golden_name, int block_size,
                 model::KvCacheDtype kv = model::KvCacheDtype::kBf16, double tol = 1e-3,
                 int greedy_prefix = 64) {
  json g = golden(golden_name);
  model::CpuRunnerOptions opt;
  opt.block_size = block_size;
  opt.kv_cache_dtype = kv;
  opt.num_blocks = 256;
  opt.max_model_len = 4096;
  auto runner = model::make_cpu_runner(dir, opt);
  const int V = runner->vocab_size();
  modeltest::Paging paging(opt.num_blocks, block_size, 77);

  // Prefill every prompt in one batch (several sequences of different lengths).
  std::vector<std::pair<int, std::vector<model::TokenId>>> work;
  std::vector<std::string> names;
  for (auto& [name, p] : g["prompts"].items()) {
    names.push_back(name);
    work.push_back({paging.add_sequence(), p["ids"].get<std::vector<model::TokenId>>()});
  }
  auto batch = paging.step(work, /*all_logits=*/true);
  std::vector<float> logits(batch.logit_rows.size() * size_t(V));
  runner->forward(batch, logits);

  double worst = 0;
  int clear = 0, clear_missed = 0;  // positions with a clear top-1, and those we missed
  size_t row = 0;
  std::vector<model::TokenId> next(names.size());
  for (size_t s = 0; s < names.size(); ++s) {
    auto& gp = g["prompts"][names[s]];
    for (auto& pos : gp["positions"]) {
      const float* l = logits.data() + row * size_t(V);
      double m = -1e30, z = 0;
      for (int i = 0; i < V; ++i) m = std::max(m, double(l[i]));
      for (int i = 0; i < V; ++i) z += std::exp(double(l[i]) - m);
      worst = std::max(worst, std::abs(m + std::log(z) - pos["lse"].get<double>()));
      for (size_t k = 0; k < pos["ids"].size(); ++k) {
        double d = std::abs(double(l[pos["ids"][k].get<int>()]) - pos["logits"][k].get<double>());
        worst = std::max(worst, d);
      }
      if (pos["logits"].size() >= 2 &&
          pos["logits"][0].get<double>() - pos["logits"][1].get<double>() > 2 * tol) {
        ++clear;
        if (std::max_element(l, l + V) - l != pos["ids"][0].get<int>()) ++clear_missed;
      }
      ++row;
    }
    const float* last = logits.data() + (row - 1) * size_t(V);
    next[s] = model::TokenId(std::max_element(last, last + V) - last);
  }
  EXPECT_LE(worst, tol) << golden_name << ": max |logit - transformers|";
  EXPECT_EQ(clear_missed, 0) << golden_name << ": positions with a clear top-1 that differ";
  std::printf(
      "%s (%s KV cache): max |logit diff| vs transformers fp32 = %.2e; top-1 of %d "
      "clear positions missed: %d\n",
      golden_name.c_str(), model::kv_cache_dtype_name(kv), worst, clear, clear_missed);

  // 64 greedy tokens per prompt, all sequences decoding together.
  std::vector<std::vector<model::TokenId>> got(names.size());
  for (int step = 0; step < 64; ++step) {
    work.clear();
    for (size_t s = 0; s < names.size(); ++s) {
      got[s].push_back(next[s]);
      work.push_back({int(s), {next[s]}});
    }
    auto b = paging.step(work, false);
    std::vector<float> lg(b.logit_rows.size() * size_t(V));
    runner->forward(b, lg);
    for (size_t s = 0; s < names.size(); ++s) {
      const float* l = lg.data() + s * size_t(V);
      next[s] = model::TokenId(std::max_element(l, l + V) - l);
    }
  }
  for (size_t s = 0; s < names.size(); ++s) {
    const auto want = g["prompts"][names[s]]["greedy"].get<std::vector<model::TokenId>>();
    size_t same = 0;
    while (same < want.size() && same < got[s].size() && got[s][same] == want[same]) ++same;
    std::printf("%s prompt %s: first %zu of %zu greedy tokens as transformers'\n",
                golden_name.c_str(), names[s].c_str(), same, want.size());
    EXPECT_GE(same, size_t(std::min<int>(greedy_prefix, int(want.size()))))
        << golden_name << " prompt " << names[s];
  }
}

}  // namespace

TEST(Qwen3Golden, TinyMatchesTransformers) {
  check_model(modeltest::test_model_dir("tiny"), "tiny", 16);
}

TEST(Qwen3Golden, TinyYarnMatchesTransformers) {
  check_model(tiny_yarn_dir(), "tiny-yarn", 32);
}

TEST(Qwen3Golden, SmallMatchesTransformers) {
  check_model(modeltest::test_model_dir("small"), "small", 32);
}

// The small model with FP8 linear weights, against transformers running the weights that
// its codes and scales stand for (dequantized in torch, fp32).
TEST(Qwen3Golden, SmallFp8MatchesTransformers) {
  if (!fs::exists(fs::path(TANDEM_SOURCE_DIR) / "tests/golden/model/small-fp8.json"))
    GTEST_SKIP() << "tests/golden/model/small-fp8.json does not exist yet: make it with "
                    "scripts/golden/make_model_goldens.py --only small-fp8 on the GPU machine";
  check_model(modeltest::test_model_dir("small-fp8"), "small-fp8", 32);
}

// An FP8 cache (e4m3 codes, a scale per vector) keeps the reference near transformers' bf16-
// free answer: what the format costs in accuracy, measured.
TEST(Qwen3Golden, TinyWithFp8CacheStaysNearTransformers) {
  check_model(modeltest::test_model_dir("tiny"), "tiny", 16, model::KvCacheDtype::kFp8, 1.0, 0);
}
TEST(Qwen3Golden, SmallWithFp8CacheStaysNearTransformers) {
  check_model(modeltest::test_model_dir("small"), "small", 32, model::KvCacheDtype::kFp8, 1.0, 0);
}
