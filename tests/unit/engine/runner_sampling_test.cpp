// The engine's dispatch of sampled steps to Runner::forward_sample: which steps go there,
// what the rows carry, and that the draws come from the sequences' RNGs exactly as on the
// host path (the mock samples on the host from the uniform it is given).
#include <gtest/gtest.h>

#include "harness.h"

namespace tandem::engine::testing {
namespace {

constexpr int kVocab = 97;

Request sampled_request(std::vector<TokenId> prompt, int max_tokens, uint64_t seed) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.9f;
  r.sampling.seed = seed;
  return r;
}

// A mix: plain sampling, top-k/top-p/min-p, penalties with and without a window, a greedy
// row with penalties, a greedy row without (fast greedy), and n = 2 (forks on its prompt).
std::vector<Request> mixed_requests() {
  std::vector<Request> v;
  v.push_back(sampled_request(make_prompt(1, 23, 41, kVocab), 14, 7));
  Request b = sampled_request(make_prompt(2, 9, 42, kVocab), 11, 8);
  b.sampling.top_k = 20;
  b.sampling.top_p = 0.8f;
  b.sampling.min_p = 0.02f;
  b.sampling.temperature = 1.3f;
  v.push_back(b);
  Request c = sampled_request(make_prompt(3, 31, 43, kVocab), 12, 9);
  c.sampling.repetition_penalty = 1.4f;
  c.sampling.presence_penalty = 0.5f;
  c.sampling.frequency_penalty = 0.3f;
  c.sampling.penalty_last_n = 8;
  v.push_back(c);
  Request d = sampled_request(make_prompt(4, 17, 44, kVocab), 10, 10);
  d.sampling.frequency_penalty = 0.7f;  // output only, whole history
  v.push_back(d);
  Request e = greedy_request(make_prompt(5, 12, 45, kVocab), 9);
  e.sampling.repetition_penalty = 2.0f;
  v.push_back(e);
  v.push_back(greedy_request(make_prompt(6, 14, 46, kVocab), 9));
  Request f = sampled_request(make_prompt(7, 20, 47, kVocab), 8, 11);
  f.n = 2;
  v.push_back(f);
  return v;
}

std::vector<Outcome> run_all(Harness& h, const std::vector<Request>& reqs) {
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const Request& r : reqs) hs.push_back(h.submit(r));
  h.run();
  std::vector<Outcome> out;
  for (size_t i = 0; i < reqs.size(); ++i) out.push_back(collect(*hs[i], reqs[i].n));
  return out;
}

TEST(RunnerSampling, SameTokensAsTheHostPathOnTheSameSeeds) {
  const auto reqs = mixed_requests();
  Harness host(kVocab, 16, 128, test_options(16, 512));
  host.runner.greedy = true;
  Harness dev(kVocab, 16, 128, test_options(16, 512));
  dev.runner.greedy = true;
  dev.runner.sampling = true;
  const auto a = run_all(host, reqs), b = run_all(dev, reqs);
  int off_argmax = 0;
  for (size_t i = 0; i < reqs.size(); ++i)
    for (int s = 0; s < reqs[i].n; ++s) {
      EXPECT_EQ(a[i].tokens[size_t(s)], b[i].tokens[size_t(s)])
          << "request " << i << " sample " << s;
      EXPECT_EQ(b[i].tokens[size_t(s)].size(), size_t(reqs[i].max_tokens));
      if (b[i].tokens[size_t(s)] != reference_tokens(reqs[i].prompt, reqs[i].max_tokens, kVocab))
        ++off_argmax;
    }
  EXPECT_GT(off_argmax, 2);  // the draws are really random
  EXPECT_EQ(host.runner.sample_forwards, 0);
  EXPECT_GT(dev.runner.sample_forwards, 0);
  // Only the steps where the n = 2 prompt completes (its row is needed to fork) brought
  // logits back; everything else was sampled on the runner.
  EXPECT_EQ(dev.runner.forwards - dev.runner.sample_forwards - dev.runner.greedy_forwards, 1);
}

TEST(RunnerSampling, GreedyStepsStillUseTheArgmaxPath) {
  Harness h(kVocab, 16, 64, test_options(8, 256));
  h.runner.greedy = true;
  h.runner.sampling = true;
  Request a = greedy_request(make_prompt(1, 30, 31, kVocab), 6);
  auto ha = h.submit(a);
  h.run();
  EXPECT_EQ(h.runner.greedy_forwards, h.runner.forwards);
  EXPECT_EQ(h.runner.sample_forwards, 0);
  EXPECT_EQ(collect(*ha, 1).tokens[0], reference_tokens(a.prompt, 6, kVocab));
}

TEST(RunnerSampling, LogprobRowsKeepTheHostPath) {
  Harness h(kVocab, 16, 64, test_options(8, 256));
  h.runner.sampling = true;
  Request a = sampled_request(make_prompt(1, 10, 31, kVocab), 5, 3);
  a.sampling.top_logprobs = 2;
  Request b = sampled_request(make_prompt(2, 12, 32, kVocab), 5, 4);
  auto ha = h.submit(a), hb = h.submit(b);
  h.run();
  EXPECT_EQ(h.runner.sample_forwards, 0);  // a shared every step with b
  std::vector<Event> evs;
  ha->drain(evs);
  int with_top = 0;
  for (const Event& e : evs)
    if (e.kind == Event::Kind::kToken && e.top.size() == 2) ++with_top;
  EXPECT_EQ(with_top, 5);
  // b alone now samples on the runner.
  Request c = sampled_request(make_prompt(3, 12, 33, kVocab), 4, 5);
  auto hc = h.submit(c);
  h.run();
  EXPECT_EQ(h.runner.sample_forwards, 4);  // one prefill step, three decodes
}

TEST(RunnerSampling, RowsCarryParametersDrawsAndPenaltyWindows) {
  Harness h(kVocab, 16, 64, test_options(8, 256));
  h.runner.sampling = true;
  Request a = sampled_request(make_prompt(1, 10, 31, kVocab), 6, 21);
  a.sampling.top_k = 5;
  a.sampling.top_p = 0.7f;
  a.sampling.min_p = 0.1f;
  a.sampling.repetition_penalty = 1.2f;
  a.sampling.presence_penalty = 0.25f;
  a.sampling.penalty_last_n = 12;
  auto ha = h.submit(a);
  Rng mirror = make_sequence_rng(a.sampling, 0);  // seeded: the fallback is unused
  std::vector<TokenId> seq = a.prompt;
  for (int step = 0; step < 6; ++step) {
    h.step();
    ASSERT_EQ(h.runner.last_rows.size(), 1u);
    const model::RowSampling& r = h.runner.last_rows[0];
    EXPECT_EQ(r.temperature, 0.9f);
    EXPECT_EQ(r.top_k, 5);
    EXPECT_EQ(r.top_p, 0.7f);
    EXPECT_EQ(r.min_p, 0.1f);
    EXPECT_EQ(r.repetition_penalty, 1.2f);
    EXPECT_EQ(r.presence_penalty, 0.25f);
    EXPECT_EQ(r.uniform, mirror.uniform());
    const int outs = step;  // output tokens before this step's
    EXPECT_EQ(r.penalty_count, std::min(12, int(seq.size())));
    EXPECT_EQ(r.penalty_output, std::min(12, outs));
    std::vector<Event> evs;
    ha->drain(evs);
    ASSERT_FALSE(evs.empty());
    seq.push_back(evs[0].token);
  }
}

}  // namespace
}  // namespace tandem::engine::testing
