// Batch invariance on the CPU backend: 64 concurrent greedy requests on the `tiny` test
// model (mixed prompt lengths, chunked prefill beside decodes, a shared prefix served by
// the cache, a cache small enough to preempt) give exactly the tokens each gives alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/paths.h"
#include "engine/engine_core.h"
#include "model/cpu_runner.h"
#include "model/testmodel.h"

namespace fs = std::filesystem;

namespace tandem::engine {
namespace {

fs::path tiny_model() {
  const fs::path dir =
      fs::temp_directory_path() / ("tandem_engine_tiny_" + std::to_string(::getpid()));
  if (!fs::exists(dir / "model.safetensors")) {
    fs::remove_all(dir);
    auto tok = find_tokenizer_source();
    if (!tok) throw std::runtime_error("run `make deps` first: the npm tokenizer is missing");
    model::write_test_model(dir, model::test_model_preset("tiny"), 5, *tok);
  }
  return dir;
}

struct RunResult {
  std::vector<std::vector<TokenId>> tokens;
  EngineStats stats;
};

RunResult run_requests(model::Runner& runner, const std::vector<Request>& reqs, bool together,
                       int max_num_batched_tokens) {
  EngineOptions opt;
  opt.max_num_seqs = 64;
  opt.max_num_batched_tokens = max_num_batched_tokens;
  opt.kv_watermark = 0.0;
  EngineCore core(runner, opt);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  RunResult out;
  out.tokens.resize(reqs.size());
  auto collect = [&](size_t i) {
    std::vector<Event> evs;
    hs[i]->drain(evs);
    for (auto& e : evs)
      if (e.kind == Event::Kind::kToken) out.tokens[i].push_back(e.token);
  };
  for (size_t i = 0; i < reqs.size(); ++i) {
    core.validate(reqs[i]);
    hs.push_back(std::make_shared<RequestHandle>(i + 1));
    core.add(i + 1, reqs[i], hs.back());
    if (!together) {
      while (core.has_work()) core.step();
      collect(i);
    }
  }
  while (core.has_work()) core.step();
  if (together)
    for (size_t i = 0; i < reqs.size(); ++i) collect(i);
  out.stats = core.stats();
  return out;
}

TEST(BatchInvarianceCpu, SixtyFourConcurrentGreedyRequestsMatchAlone) {
  model::CpuRunnerOptions ro;
  ro.block_size = 16;
  ro.num_blocks = 24;  // 384 token slots for ~2400 tokens of work: preemption happens
  ro.threads = 2;
  ro.max_model_len = 256;
  auto runner = model::make_cpu_runner(tiny_model(), ro);
  const int vocab = runner->vocab_size();

  std::mt19937 g(2024);
  std::vector<TokenId> shared(40);
  for (auto& t : shared) t = TokenId(g() % uint32_t(vocab));
  std::vector<Request> reqs;
  for (int i = 0; i < 64; ++i) {
    Request r;
    const int len = 3 + int(g() % 61);
    if (i % 8 == 0) r.prompt = shared;  // served from the cache after the first
    for (int k = 0; k < len; ++k) r.prompt.push_back(TokenId(g() % uint32_t(vocab)));
    r.max_tokens = 2 + int(g() % 5);
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    reqs.push_back(std::move(r));
  }
  const RunResult alone = run_requests(*runner, reqs, false, 512);
  const RunResult together = run_requests(*runner, reqs, true, 128);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(alone.tokens[i].size(), size_t(reqs[i].max_tokens));
    EXPECT_EQ(together.tokens[i], alone.tokens[i]) << "request " << i;
  }
  EXPECT_GT(together.stats.prefix_cache_hits, 0u);
  EXPECT_GT(together.stats.preemptions, 0u);
}

}  // namespace
}  // namespace tandem::engine
