// The greedy shortcut against the sampler it stands in for.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "engine/fast_greedy.h"
#include "engine/sampler.h"

namespace tandem::engine {
namespace {

TEST(FastGreedy, SameTokenAsTheSamplerOnRandomRowsWithTies) {
  std::mt19937 g(77);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + int(g() % 1000) + (trial % 3 == 0 ? 151936 - 1000 : 0);
    std::vector<float> row(static_cast<size_t>(n));
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (auto& v : row) v = d(g);
    if (trial % 2) {  // ties at the maximum, possibly in the unrolled tail
      const float top = 50.0f;
      for (int k = 0; k < 3; ++k) row[g() % row.size()] = top;
    }
    auto copy = row;
    Rng rng(1);
    const TokenId want = sample(copy, greedy, {}, {}, rng).token;
    EXPECT_EQ(fast_argmax(row), want) << "trial " << trial << " n " << n;
  }
}

TEST(FastGreedy, NonFiniteRowsGoBackToTheSampler) {
  std::vector<float> row(37, 1.0f);
  row[30] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(fast_argmax(row), -1);
  row[30] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_argmax(row), -1);
  row[30] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_argmax(row), -1);
  row[30] = 2.0f;
  EXPECT_EQ(fast_argmax(row), 30);
  EXPECT_EQ(fast_argmax({}), -1);
}

TEST(FastGreedy, AppliesOnlyWhenNothingElseIsAsked) {
  SamplingParams p;
  EXPECT_FALSE(fast_greedy_applies(p));  // temperature 1
  p.temperature = 0.0f;
  EXPECT_TRUE(fast_greedy_applies(p));
  SamplingParams k1;
  k1.top_k = 1;
  EXPECT_TRUE(fast_greedy_applies(k1));
  auto q = p;
  q.top_logprobs = 0;
  EXPECT_FALSE(fast_greedy_applies(q));
  q = p;
  q.repetition_penalty = 1.1f;
  EXPECT_FALSE(fast_greedy_applies(q));
  q = p;
  q.presence_penalty = 0.5f;
  EXPECT_FALSE(fast_greedy_applies(q));
  q = p;
  q.frequency_penalty = -0.5f;
  EXPECT_FALSE(fast_greedy_applies(q));
}

}  // namespace
}  // namespace tandem::engine
