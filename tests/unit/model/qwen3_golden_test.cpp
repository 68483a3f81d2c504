// The CPU forward pass against transformers' fp32 Qwen3ForCausalLM (goldens made by
// scripts/golden/make_model_goldens.py on the GPU machine): top-64 logits and logsumexp at
// every prompt position within 1e-3, and the same 64 greedy tokens.
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

void check_model(const fs::path& dir, const std::string& golden_name, int block_size) {
  json g = golden(golden_name);
  model::CpuRunnerOptions opt;
  opt.block_size = block_size;
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
      ++row;
    }
    const float* last = logits.data() + (row - 1) * size_t(V);
    next[s] = model::TokenId(std::max_element(last, last + V) - last);
  }
  EXPECT_LE(worst, 1e-3) << golden_name << ": max |logit - transformers|";
  std::printf("%s: max |logit diff| vs transformers fp32 = %.2e\n", golden_name.c_str(), worst);

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
  for (size_t s = 0; s < names.size(); ++s)
    EXPECT_EQ(got[s], g["prompts"][names[s]]["greedy"].get<std::vector<model::TokenId>>())
        << golden_name << " prompt " << names[s];
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
