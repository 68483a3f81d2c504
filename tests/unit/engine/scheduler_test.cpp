// Table-driven scheduling: the batch of every step, as the mock runner saw it
// ("<first prompt token>@<first position>+<tokens>" per sequence, in batch order), for
// chunked prefill, decode-first, priorities, aging, preemption and cancel. Every test also
// checks the generated tokens against what each prompt gives alone.
#include <gtest/gtest.h>

#include <set>

#include "harness.h"

namespace tandem::engine::testing {
namespace {

using Steps = std::vector<std::vector<std::string>>;
constexpr int kVocab = 500;

void expect_reference(RequestHandle& h, const Request& r) {
  Outcome o = collect(h, r.n);
  const auto want = reference_tokens(r.prompt, r.max_tokens, kVocab);
  for (int s = 0; s < r.n; ++s) {
    EXPECT_EQ(o.tokens[size_t(s)], want) << "sample " << s;
    EXPECT_EQ(o.finish[size_t(s)].kind, Event::Kind::kFinish);
    EXPECT_EQ(o.finish[size_t(s)].reason, FinishReason::kLength);
    EXPECT_EQ(o.finish[size_t(s)].usage.prompt_tokens, int(r.prompt.size()));
    EXPECT_EQ(o.finish[size_t(s)].usage.completion_tokens, r.max_tokens);
  }
}

TEST(Scheduler, ChunkedPrefillAfterDecodes) {
  Harness h(kVocab, 16, 64, test_options(8, 64));
  Request a = greedy_request(make_prompt(1, 100, 1, kVocab), 3);
  Request b = greedy_request(make_prompt(2, 40, 2, kVocab), 3);
  auto ha = h.submit(a), hb = h.submit(b);
  const Steps want = {
      {"1@0+64"},              // the budget, in whole blocks
      {"1@64+36", "2@0+16"},   // A's last chunk; B gets what is left, rounded to a block
      {"1@100+1", "2@16+24"},  // A decodes first
      {"1@101+1", "2@40+1"},
      {"2@41+1"},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(h.step(), want[i]) << "step " << i;
    const StepTiming& t = h.core.last_timing();
    EXPECT_EQ(t.num_seqs, int(want[i].size()));
    EXPECT_EQ(t.num_decodes, i >= 2 ? int(want[i].size()) - (i == 2) : 0) << "step " << i;
  }
  EXPECT_EQ(h.core.last_timing().num_tokens, 1);
  EXPECT_EQ(h.core.total_timing().num_tokens, 64 + 52 + 25 + 2 + 1);
  EXPECT_FALSE(h.core.has_work());
  expect_reference(*ha, a);
  expect_reference(*hb, b);
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
}

TEST(Scheduler, InteractiveBeforeBulk) {
  EngineOptions opt = test_options(8, 32);
  opt.bulk_prompt_threshold = 50;
  Harness h(kVocab, 16, 64, opt);
  Request a = greedy_request(make_prompt(1, 80, 3, kVocab), 2);  // bulk by length
  Request b = greedy_request(make_prompt(2, 30, 4, kVocab), 2);  // interactive, arrives later
  Request c = greedy_request(make_prompt(3, 10, 5, kVocab), 1);  // asked to be bulk
  c.priority = Priority::kBulk;
  auto ha = h.submit(a), hb = h.submit(b), hc = h.submit(c);
  const Steps want = {
      {"2@0+30"},                      // b first; a's chunk would not fit the 2 left
      {"2@30+1", "1@0+16", "3@0+10"},  // b decodes, then the bulk ones in arrival order
      {"1@16+32"},
      {"1@48+32"},
      {"1@80+1"},
  };
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(h.step(), want[i]) << "step " << i;
  h.run();
  expect_reference(*ha, a);
  expect_reference(*hb, b);
  expect_reference(*hc, c);
}

// Two new interactive prompts each step fill the budget; a bulk request waits until it
// has aged `bulk_aging_steps`, then runs ahead of newer interactive ones.
Steps run_aging(int aging_steps, int steps) {
  EngineOptions opt = test_options(16, 16);
  opt.bulk_aging_steps = aging_steps;
  Harness h(kVocab, 16, 64, opt);
  Request x = greedy_request(make_prompt(9, 8, 6, kVocab), 1);
  x.priority = Priority::kBulk;
  h.submit(x);
  Steps seen;
  for (int k = 0; k < steps; ++k) {
    for (int j = 0; j < 2; ++j)
      h.submit(greedy_request(make_prompt(100 + 2 * k + j, 8, uint32_t(k * 2 + j), kVocab), 1));
    seen.push_back(h.step());
  }
  return seen;
}

TEST(Scheduler, AgingPromotesStarvedBulk) {
  const Steps want = {
      {"100@0+8", "101@0+8"},
      {"102@0+8", "103@0+8"},
      {"104@0+8", "105@0+8"},
      {"9@0+8", "106@0+8"},  // aged 3 steps: ahead of every newer interactive prompt
  };
  EXPECT_EQ(run_aging(3, 4), want);
  // Without aging it would still be waiting.
  const Steps starved = run_aging(1000, 6);
  for (const auto& s : starved)
    for (const auto& seq : s) EXPECT_NE(seq.substr(0, 2), "9@");
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOutAndRecomputes) {
  // 4 blocks of 16: two 20-token prompts fill them; at position 32 the older one needs a
  // third block and the newer one is preempted; its blocks get evicted, so it recomputes
  // all 33 of its tokens (prompt + 13 generated) once the older one is done.
  Harness h(kVocab, 16, 4, test_options(8, 64));
  Request a = greedy_request(make_prompt(1, 20, 7, kVocab), 30);
  Request b = greedy_request(make_prompt(2, 20, 8, kVocab), 30);
  auto ha = h.submit(a), hb = h.submit(b);
  Steps seen;
  while (h.core.has_work()) seen.push_back(h.step());
  ASSERT_EQ(seen.size(), 47u);
  EXPECT_EQ(seen[0], (std::vector<std::string>{"1@0+20", "2@0+20"}));
  EXPECT_EQ(seen[12], (std::vector<std::string>{"1@31+1", "2@31+1"}));
  EXPECT_EQ(seen[13], std::vector<std::string>{"1@32+1"});  // b preempted
  EXPECT_EQ(seen[29], std::vector<std::string>{"1@48+1"});  // a's last token
  EXPECT_EQ(seen[30], std::vector<std::string>{"2@0+33"});  // b recomputed
  EXPECT_EQ(seen[46], std::vector<std::string>{"2@48+1"});
  EXPECT_EQ(h.core.stats().preemptions, 1u);
  expect_reference(*ha, a);
  expect_reference(*hb, b);
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
}

TEST(Scheduler, InteractivePreemptsRunningBulk) {
  // Bulk work holds every block; a new interactive prompt takes the newest bulk's blocks.
  Harness h(kVocab, 16, 4, test_options(8, 64));
  Request b1 = greedy_request(make_prompt(1, 20, 9, kVocab), 20);
  Request b2 = greedy_request(make_prompt(2, 20, 10, kVocab), 20);
  b1.priority = b2.priority = Priority::kBulk;
  auto h1 = h.submit(b1), h2 = h.submit(b2);
  EXPECT_EQ(h.step(), (std::vector<std::string>{"1@0+20", "2@0+20"}));
  Request i = greedy_request(make_prompt(3, 20, 11, kVocab), 2);
  auto hi = h.submit(i);
  EXPECT_EQ(h.step(), (std::vector<std::string>{"1@20+1", "3@0+20"}));
  EXPECT_EQ(h.core.stats().preemptions, 1u);
  h.run();
  expect_reference(*h1, b1);
  expect_reference(*h2, b2);
  expect_reference(*hi, i);
}

TEST(Scheduler, CancelFreesBlocksBeforeTheNextStep) {
  Harness h(kVocab, 16, 64, test_options(8, 64));
  Request a = greedy_request(make_prompt(1, 20, 12, kVocab), 50);
  Request b = greedy_request(make_prompt(2, 40, 13, kVocab), 50);
  auto ha = h.submit(a), hb = h.submit(b);
  EXPECT_EQ(h.step(), (std::vector<std::string>{"1@0+20", "2@0+40"}));
  EXPECT_EQ(h.step(), (std::vector<std::string>{"1@20+1", "2@40+1"}));
  EXPECT_EQ(h.core.block_manager().num_used(), 2 + 3);
  h.core.cancel(ha->id());
  EXPECT_TRUE(ha->finished());
  EXPECT_EQ(h.core.block_manager().num_used(), 3);
  EXPECT_EQ(h.step(), std::vector<std::string>{"2@41+1"});
  Outcome o = collect(*ha, 1);
  ASSERT_EQ(o.finishes, 1);
  EXPECT_EQ(o.finish[0].reason, FinishReason::kCancelled);
  EXPECT_EQ(o.finish[0].usage.completion_tokens, 2);
  EXPECT_EQ(o.tokens[0], reference_tokens(a.prompt, 2, kVocab));
  h.core.cancel(ha->id());  // finished ids are ignored
  h.core.cancel(12345);
  h.run();
  expect_reference(*hb, b);
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
}

TEST(Scheduler, CancelWhileWaitingEndsEverySample) {
  Harness h(kVocab, 16, 64, test_options(1, 64));
  Request a = greedy_request(make_prompt(1, 20, 14, kVocab), 5);
  Request b = greedy_request(make_prompt(2, 20, 15, kVocab), 5);
  b.n = 3;
  auto ha = h.submit(a), hb = h.submit(b);
  h.step();  // a runs; b waits for a seat
  h.core.cancel(hb->id());
  Outcome o = collect(*hb, 3);
  EXPECT_EQ(o.finishes, 3);
  for (auto& f : o.finish) EXPECT_EQ(f.reason, FinishReason::kCancelled);
  h.run();
  expect_reference(*ha, a);
}

TEST(Scheduler, SamplesForkAndShareThePromptBlocks) {
  Harness h(kVocab, 16, 64, test_options(8, 64));
  Request r = greedy_request(make_prompt(5, 40, 16, kVocab), 4);
  r.n = 3;
  auto hr = h.submit(r);
  EXPECT_EQ(h.step(), std::vector<std::string>{"5@0+40"});
  // Parent: 3 blocks; each sibling: the 2 full prompt blocks shared + its own tail block,
  // where it recomputes the 8 tail prompt tokens and its first token.
  EXPECT_EQ(h.core.block_manager().num_used(), 3);
  EXPECT_EQ(h.step(), (std::vector<std::string>{"5@40+1", "5@32+9", "5@32+9"}));
  EXPECT_EQ(h.core.block_manager().num_used(), 5);
  h.run();
  expect_reference(*hr, r);
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
}

// Random samples of one prompt diverge after the fork; each must have read back exactly
// its own context (shared prompt blocks, its own tail block) at every step, under
// preemption too (a small cache).
TEST(Scheduler, ForkedSamplesEachReadTheirOwnContext) {
  for (int blocks : {64, 8}) {
    Harness h(kVocab, 16, blocks, test_options(8, 64));
    Request r = greedy_request(make_prompt(5, 40, 17, kVocab), 20);
    r.n = 4;
    r.sampling.temperature = 3.0f;
    r.sampling.seed = 99;
    auto hr = h.submit(r);
    h.run();
    Outcome o = collect(*hr, 4);
    ASSERT_EQ(o.finishes, 4);
    std::set<std::vector<TokenId>> distinct;
    for (int s = 0; s < 4; ++s) {
      const auto& out = o.tokens[size_t(s)];
      ASSERT_EQ(out.size(), 20u);
      distinct.insert(out);
      auto ctx = r.prompt;
      for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_TRUE(h.runner.contexts_read.contains(context_hash(ctx)))
            << "blocks " << blocks << " sample " << s << " token " << k;
        ctx.push_back(out[k]);
      }
    }
    EXPECT_EQ(distinct.size(), 4u);
    EXPECT_EQ(h.core.block_manager().num_used(), 0);
    if (blocks == 8) {
      EXPECT_GT(h.core.stats().preemptions, 0u);
    }
  }
}

}  // namespace
}  // namespace tandem::engine::testing

namespace tandem::engine::testing {
namespace {

// With decode_step_tokens (the knee) set, a prompt that arrives while another sequence
// decodes rides along in block-sized chunks up to the knee, when its TTFT target allows
// (here: a target far away); with a target already missed it takes the whole budget.
// knee < 0 leaves it to the runner, which asks for 32.
Steps run_ride_along(double ttft_target_ms, int knee = 32) {
  EngineOptions opt = test_options(8, 64);
  opt.decode_step_tokens = knee;
  opt.ttft_target_ms = ttft_target_ms;
  Harness h(kVocab, 16, 64, opt, /*runner_knee=*/32);
  Request a = greedy_request(make_prompt(1, 20, 11, kVocab), 8);
  Request b = greedy_request(make_prompt(2, 60, 12, kVocab), 3);
  auto ha = h.submit(a);
  Steps seen = {h.step()};  // no decodes yet: the whole budget
  auto hb = h.submit(b);
  while (h.core.has_work()) seen.push_back(h.step());
  expect_reference(*ha, a);
  expect_reference(*hb, b);
  EXPECT_EQ(h.core.block_manager().num_used(), 0);
  return seen;
}

TEST(Scheduler, PrefillRidesAlongDecodesUpToTheKnee) {
  const Steps want = {
      {"1@0+20"},
      {"1@20+1", "2@0+16"},  // 1 decode + 31 spare tokens: one 16-token block
      {"1@21+1", "2@16+16"},
      {"1@22+1", "2@32+28"},  // the rest fits under the knee
      {"1@23+1", "2@60+1"},
      {"1@24+1", "2@61+1"},
      {"1@25+1"},
      {"1@26+1"},
  };
  EXPECT_EQ(run_ride_along(1e9), want);
  EXPECT_EQ(run_ride_along(1e9, -1), want);  // the runner's knee, the same
  const Steps whole = {
      {"1@0+20"}, {"1@20+1", "2@0+60"}, {"1@21+1", "2@60+1"}, {"1@22+1", "2@61+1"},
      {"1@23+1"}, {"1@24+1"},           {"1@25+1"},           {"1@26+1"},
  };
  EXPECT_EQ(run_ride_along(1e9, 0), whole);  // 0: off, whatever the runner says
}

TEST(Scheduler, PrefillTakesTheBudgetWhenItsTargetIsDue) {
  const Steps want = {
      {"1@0+20"}, {"1@20+1", "2@0+60"}, {"1@21+1", "2@60+1"}, {"1@22+1", "2@61+1"},
      {"1@23+1"}, {"1@24+1"},           {"1@25+1"},           {"1@26+1"},
  };
  EXPECT_EQ(run_ride_along(0.0), want);
}

}  // namespace
}  // namespace tandem::engine::testing
