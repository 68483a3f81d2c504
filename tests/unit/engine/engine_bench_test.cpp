// The engine bench on the mock runner: counts and rates that follow from the scenario
// (timings themselves belong to the GPU run, not to a unit test).
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_bench.h"
#include "mock_runner.h"

namespace tandem::engine::testing {
namespace {

TEST(Percentile, NearestRank) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({5}, 99), 5.0);
  EXPECT_EQ(percentile({4, 1, 3, 2}, 50), 2.0);
  EXPECT_EQ(percentile({4, 1, 3, 2}, 99), 4.0);
  EXPECT_EQ(percentile({4, 1, 3, 2}, 0), 1.0);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentile(v, 99), 99.0);
  EXPECT_EQ(percentile(v, 50), 50.0);
}

TEST(EngineBench, RandomScenarioCountsEveryToken) {
  MockRunner runner(1000, 16, 128);
  EngineBenchOptions o;
  o.concurrency = {1, 3, 7};
  o.prompt_len = 37;
  o.output_len = 5;
  o.requests_per_client = 2;
  o.engine.max_num_seqs = 4;  // raised to C by the bench
  o.engine.max_num_batched_tokens = 64;
  auto rows = run_engine_bench(runner, o);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.scenario, "random");
    EXPECT_EQ(r.requests, r.concurrency * 2);
    EXPECT_EQ(r.output_tokens, uint64_t(r.concurrency * 2 * 5));
    EXPECT_GT(r.steps, 0u);
    EXPECT_GT(r.output_tok_s, 0.0);
    EXPECT_LE(r.ttft_p50_ms, r.ttft_p99_ms);
    EXPECT_LE(r.itl_p50_ms, r.itl_p99_ms);
    EXPECT_GE(r.engine_cpu_fraction, 0.0);
    EXPECT_LE(r.engine_cpu_fraction, 1.0);
    EXPECT_EQ(r.prefix_hit_rate, 0.0);  // random prompts share nothing
    EXPECT_GE(r.mean_step.num_seqs, 1);
  }
  // One client, two requests one after the other: a 37-token prefill step (it fits the
  // 64-token budget) that yields the first token, then 4 decode steps, twice.
  EXPECT_EQ(rows[0].steps, 2u * 5u);
  EXPECT_EQ(rows[0].prompt_steps, 2u);
  EXPECT_EQ(rows[0].decode_only_steps, 8u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.prompt_steps + r.decode_only_steps, r.steps);
    // Every prompt token rides in a step with prompt tokens, at most 64 tokens a step.
    EXPECT_GE(r.prompt_steps * 64, uint64_t(r.requests) * 37);
    EXPECT_GE(r.prompt_forward_share, 0.0);
    EXPECT_LE(r.prompt_forward_share, 1.0);
  }
  const std::string table = format_engine_bench(rows);
  EXPECT_NE(table.find("random"), std::string::npos);
  EXPECT_NE(table.find("per step"), std::string::npos);
  EXPECT_NE(table.find("decode-only steps"), std::string::npos);
}

TEST(EngineBench, SharedPrefixScenarioHitsTheCache) {
  MockRunner runner(1000, 16, 256);
  EngineBenchOptions o;
  o.concurrency = {1, 4};
  o.shared_prefix_len = 64;
  o.question_len = 9;
  o.output_len = 3;
  o.requests_per_client = 3;
  o.engine.max_num_batched_tokens = 256;
  auto rows = run_engine_bench(runner, o);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.scenario, "shared-prefix");
    EXPECT_EQ(r.output_tokens, uint64_t(r.concurrency * 3 * 3));
    // Every prompt is 64 shared + 9 fresh tokens; the 4 shared blocks come from the cache.
    EXPECT_DOUBLE_EQ(r.prefix_hit_rate, 64.0 / 73.0);
    EXPECT_GT(r.cold_ttft_ms, 0.0);
  }
}

TEST(EngineBench, NullRunnerMeasuresTheEngineAlone) {
  for (bool greedy : {false, true}) {
    auto runner = make_null_runner(5003, 16, 512, greedy);
    EXPECT_EQ(runner->supports_greedy(), greedy);
    EngineBenchOptions o;
    o.concurrency = {5};
    o.prompt_len = 70;
    o.output_len = 6;
    o.requests_per_client = 1;
    auto rows = run_engine_bench(*runner, o);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].output_tokens, 30u);
    EXPECT_EQ(rows[0].steps, 6u);  // all five prompts in the first step, then 5 decodes
    EXPECT_EQ(rows[0].mean_step.num_seqs, 5);
  }
  EXPECT_THROW(make_null_runner(0, 16, 8, false), Error);
}

// Spread starts: client i starts i/C into the ramp, so the run cannot end before the last
// client has started, every request still completes, and the engine idles (no step) while
// no client has work.
// Four clients, two short requests each.
EngineBenchOptions four_clients() {
  EngineBenchOptions o;
  o.concurrency = {4};
  o.prompt_len = 9;
  o.output_len = 3;
  o.requests_per_client = 2;
  return o;
}

TEST(EngineBench, RampSpreadsClientStarts) {
  MockRunner runner(1000, 16, 128);
  EngineBenchOptions o = four_clients();
  o.ramp_ms = 80;
  auto rows = run_engine_bench(runner, o);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].output_tokens, uint64_t(4 * 2 * 3));
  EXPECT_GE(rows[0].wall_s, 0.060);  // the last client starts 60 ms in
  // The first client's two requests run alone before the second client starts (20 ms), so
  // some steps carry a single sequence; started together, every step would carry several.
  EXPECT_LT(rows[0].mean_step.num_seqs, 4);
  o.ramp_ms = -1;
  EXPECT_THROW(run_engine_bench(runner, o), Error);
}

// The steady window runs from the last client's first request to the first client's last
// answer. Started together with two requests each, the clients move in lockstep and finish
// in one step, so the window holds every token; spread so far that the first client is
// done before the last one starts, there is no window.
TEST(EngineBench, SteadyWindowCoversOnlyTheFullLoop) {
  MockRunner runner(1000, 16, 128);
  EngineBenchOptions o = four_clients();
  auto rows = run_engine_bench(runner, o);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].steady_tokens, rows[0].output_tokens);
  EXPECT_GT(rows[0].steady_s, 0.0);
  EXPECT_LE(rows[0].steady_s, rows[0].wall_s);
  EXPECT_NEAR(rows[0].steady_tok_s, double(rows[0].steady_tokens) / rows[0].steady_s, 1e-6);
  EXPECT_DOUBLE_EQ(rows[0].steady_seqs, 4.0);  // every step carries all four
  o.requests_per_client = 1;
  o.ramp_ms = 200;  // the first client's 3 tokens take far less than the 150 ms to the last
  rows = run_engine_bench(runner, o);
  EXPECT_EQ(rows[0].steady_tokens, 0u);
  EXPECT_EQ(rows[0].steady_s, 0.0);
  EXPECT_EQ(rows[0].steady_tok_s, 0.0);
  EXPECT_NE(format_engine_bench(rows).find("steady window"), std::string::npos);
}

TEST(EngineBench, RejectsBadOptions) {
  MockRunner runner(1000, 16, 8);  // 128 tokens of cache
  EngineBenchOptions o;
  o.concurrency = {2};
  o.prompt_len = 100;
  o.output_len = 40;  // 140 > 128
  EXPECT_THROW(run_engine_bench(runner, o), Error);
  o.output_len = 4;
  o.concurrency = {0};
  EXPECT_THROW(run_engine_bench(runner, o), Error);
  o.concurrency = {};
  EXPECT_THROW(run_engine_bench(runner, o), Error);
}

}  // namespace
}  // namespace tandem::engine::testing
