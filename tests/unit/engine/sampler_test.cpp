// The sampler against a plain reference: softmax over the masked, tempered logits computed
// here the slow obvious way, and empirical frequencies from many seeded draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "engine/sampler.h"

using namespace tandem;
using engine::SamplingParams;
using engine::TokenId;

namespace {

std::vector<float> random_logits(size_t n, uint64_t seed, float scale) {
  Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(r.normal() * scale);
  return v;
}

// Reference distribution: penalised logits in, probabilities after temperature, top-k,
// top-p and min-p out (full sort, explicit masks).
std::vector<double> reference_probs(const std::vector<float>& l, const SamplingParams& p) {
  size_t n = l.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  std::vector<bool> keep(n, true);
  if (p.top_k > 0)
    for (size_t r = size_t(p.top_k); r < n; ++r) keep[idx[r]] = false;
  auto softmax = [&] {
    std::vector<double> pr(n, 0.0);
    double m = -1e300, z = 0;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) m = std::max(m, double(l[i]) / p.temperature);
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) z += pr[i] = std::exp(double(l[i]) / p.temperature - m);
    for (auto& x : pr) x /= z;
    return pr;
  };
  auto pr = softmax();
  double cum = 0;
  for (size_t r = 0; r < n; ++r) {
    size_t i = idx[r];
    if (!keep[i]) continue;
    if (r > 0 && cum >= p.top_p) keep[i] = false;
    cum += pr[i];
  }
  pr = softmax();
  double best = *std::max_element(pr.begin(), pr.end());
  for (size_t i = 0; i < n; ++i)
    if (pr[i] < p.min_p * best) keep[i] = false;
  return softmax();
}

void expect_distribution(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  auto want = reference_probs(logits, p);
  std::vector<int> got(logits.size(), 0);
  Rng rng(1234);
  for (int d = 0; d < draws; ++d) {
    auto row = logits;
    auto r = engine::sample(row, p, {}, {}, rng);
    got[size_t(r.token)]++;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    double f = double(got[i]) / draws, e = want[i];
    if (e == 0) {
      EXPECT_EQ(got[i], 0) << "token " << i << " is outside the kept set";
      continue;
    }
    double sigma = std::sqrt(e * (1 - e) / draws);
    EXPECT_NEAR(f, e, 5 * sigma + 1e-4) << "token " << i;
  }
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxAndLogprobsAreRawLogSoftmax) {
  auto l = random_logits(1003, 7, 3.0f);
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 5;
  Rng rng(1);
  auto row = l;
  auto r = engine::sample(row, p, {}, {}, rng);
  size_t am = size_t(std::max_element(l.begin(), l.end()) - l.begin());
  EXPECT_EQ(r.token, TokenId(am));
  double m = l[am], z = 0;
  for (float x : l) z += std::exp(double(x) - m);
  double lse = m + std::log(z);
  EXPECT_NEAR(r.logprob, l[am] - lse, 1e-5);
  ASSERT_EQ(r.top.size(), 5u);
  std::vector<float> sorted = l;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(r.top[size_t(i)].logprob, sorted[size_t(i)] - lse, 1e-5);
    EXPECT_EQ(l[size_t(r.top[size_t(i)].token)], sorted[size_t(i)]);
  }
}

TEST(Sampler, TemperatureMatchesSoftmax) {
  SamplingParams p;
  p.temperature = 0.7f;
  expect_distribution(random_logits(37, 3, 1.0f), p, 40000);
}

TEST(Sampler, TopKTopPMinPMatchReference) {
  auto l = random_logits(53, 11, 1.5f);
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_k = 17;
  p.top_p = 0.8f;
  expect_distribution(l, p, 40000);
  p = {};
  p.temperature = 0.9f;
  p.top_p = 0.6f;
  expect_distribution(l, p, 40000);
  p = {};
  p.min_p = 0.15f;
  expect_distribution(l, p, 40000);
  p = {};
  p.top_k = 9;
  p.min_p = 0.05f;
  p.temperature = 2.0f;
  expect_distribution(l, p, 40000);
}

TEST(Sampler, TopPOverALargeFlatVocabulary) {
  // A flat distribution makes the nucleus larger than the first 1024 candidates.
  auto l = random_logits(5001, 5, 0.05f);
  SamplingParams p;
  p.top_p = 0.9f;
  auto want = reference_probs(l, p);
  size_t kept = size_t(std::count_if(want.begin(), want.end(), [](double x) { return x > 0; }));
  EXPECT_GT(kept, 1024u);
  Rng rng(3);
  for (int d = 0; d < 400; ++d) {
    auto row = l;
    auto r = engine::sample(row, p, {}, {}, rng);
    ASSERT_GT(want[size_t(r.token)], 0.0);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  auto l = random_logits(997, 9, 1.0f);
  SamplingParams p;
  p.seed = 42;
  p.top_p = 0.95f;
  auto run = [&](SamplingParams q) {
    Rng rng = engine::make_sequence_rng(q, 0);
    std::vector<TokenId> out;
    for (int i = 0; i < 50; ++i) {
      auto row = l;
      out.push_back(engine::sample(row, q, {}, {}, rng).token);
    }
    return out;
  };
  EXPECT_EQ(run(p), run(p));
  auto q = p;
  q.seed = 43;
  EXPECT_NE(run(p), run(q));
}

TEST(Sampler, PenaltiesFollowHfAndOpenAiRules) {
  auto l = random_logits(101, 13, 2.0f);
  std::vector<TokenId> prompt = {3, 5, 5, 90, 7};
  std::vector<TokenId> output = {5, 8, 8, 8, 100, 3};
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.25f;
  auto want = l;
  std::map<TokenId, int> out_count;
  for (auto t : output) out_count[t]++;
  std::set<TokenId> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  for (auto t : seen) {
    float& x = want[size_t(t)];
    x = x > 0 ? x / 1.3f : x * 1.3f;
  }
  for (auto [t, c] : out_count) want[size_t(t)] -= 0.25f * float(c) + 0.4f;
  auto row = l;
  Rng rng(0);
  auto r = engine::sample(row, p, prompt, output, rng);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_FLOAT_EQ(row[i], want[i]) << i;
  EXPECT_EQ(r.token, TokenId(std::max_element(want.begin(), want.end()) - want.begin()));
  // The reported log-probability stays that of the raw logits.
  double m = *std::max_element(l.begin(), l.end()), z = 0;
  for (float x : l) z += std::exp(double(x) - m);
  EXPECT_NEAR(r.logprob, l[size_t(r.token)] - (m + std::log(z)), 1e-5);

  // penalty_last_n = 3 looks at output {8, 100, 3} only.
  p.penalty_last_n = 3;
  p.repetition_penalty = 1.0f;
  row = l;
  engine::sample(row, p, prompt, output, rng);
  for (size_t i = 0; i < l.size(); ++i) {
    float w = l[i];
    if (i == 8 || i == 100 || i == 3) w -= 0.25f + 0.4f;
    EXPECT_FLOAT_EQ(row[i], w) << i;
  }
}

TEST(Sampler, BadInputIsAnError) {
  std::vector<float> l = {1, 2, 3};
  Rng rng(0);
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(engine::sample(l, p, {}, {}, rng), Error);
  p = {};
  p.top_p = 0;
  EXPECT_THROW(engine::sample(l, p, {}, {}, rng), Error);
  p = {};
  p.repetition_penalty = 1.2f;
  std::vector<TokenId> out = {7};
  EXPECT_THROW(engine::sample(l, p, {}, out, rng), Error);
  p = {};
  std::vector<float> nan = {1, std::nanf(""), 2};
  EXPECT_THROW(engine::sample(nan, p, {}, {}, rng), Error);
  std::vector<float> empty;
  EXPECT_THROW(engine::sample(empty, p, {}, {}, rng), Error);
}
