// The sampler reference of sample_reference.h (used by the GPU sampler's test) against
// engine::sample_with_draw on the same rows, parameters, penalty windows and draws.
#include "sample_reference.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/bf16.h"
#include "core/rng.h"
#include "engine/sampler.h"

namespace tandem::engine {
namespace {

uint64_t seed_for_test() {
  const char* e = std::getenv("TANDEM_TEST_SEED");
  const uint64_t v = e ? std::strtoull(e, nullptr, 10)
                       : uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("[ seed ] TANDEM_TEST_SEED=%llu\n", (unsigned long long)v);
  return v;
}

TEST(SampleReference, AgreesWithTheEngineSampler) {
  Rng rng(seed_for_test());
  const int vocabs[] = {1, 7, 1000, 32001};
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
  const int top_ks[] = {0, 1, 20, 5000};
  const float top_ps[] = {0.5f, 0.9f, 1.0f};
  const float min_ps[] = {0.0f, 0.05f};
  int cases = 0, mismatches = 0, near = 0;
  for (int V : vocabs)
    for (int rep = 0; rep < 3; ++rep) {
      // Plain floats, or bf16-rounded (many exact ties, as the model's logits have).
      std::vector<float> base(static_cast<size_t>(V));
      const double scale = 1.0 + 3.0 * rng.uniform();
      for (auto& x : base) x = float(scale * rng.normal());
      if (rep == 1)
        for (auto& x : base) x = round_bf16(x);
      for (float t : temps)
        for (int k : top_ks)
          for (float tp : top_ps)
            for (float mp : min_ps) {
              SamplingParams sp;
              sp.temperature = t;
              sp.top_k = k;
              sp.top_p = tp;
              sp.min_p = mp;
              // Penalties on every other case, with a window over prompt and output.
              std::vector<TokenId> prompt, output;
              if (cases % 2) {
                sp.repetition_penalty = 1.0f + 0.5f * float(rng.uniform());
                sp.presence_penalty = float(rng.uniform());
                sp.frequency_penalty = float(rng.uniform()) * 0.5f;
                for (int i = 0; i < 40; ++i) prompt.push_back(TokenId(rng.next() % uint64_t(V)));
                for (int i = 0; i < 25; ++i) output.push_back(TokenId(rng.next() % uint64_t(V)));
              }
              const double u = rng.uniform();
              std::vector<float> a = base;
              const TokenId got = sample_with_draw(a, sp, prompt, output, [&] { return u; }).token;

              testing::RefParams rp{sp.temperature,
                                    sp.top_p,
                                    sp.top_k,
                                    sp.min_p,
                                    sp.repetition_penalty,
                                    sp.presence_penalty,
                                    sp.frequency_penalty};
              std::vector<int32_t> window(prompt.begin(), prompt.end());
              window.insert(window.end(), output.begin(), output.end());
              std::vector<float> b = base;
              testing::reference_penalties(b, rp, window, output.size());
              const auto ref = testing::reference_sample(b, rp, u);
              ++cases;
              if (ref.margin < 1e-6) ++near;
              if (got != ref.token) {
                ++mismatches;
                EXPECT_LT(ref.margin, 1e-6)
                    << "V=" << V << " T=" << t << " k=" << k << " p=" << tp << " min_p=" << mp
                    << " u=" << u << ": engine " << got << ", reference " << ref.token;
              }
            }
    }
  std::printf("[ reference ] %d cases, %d within 1e-6 of a boundary, %d different tokens\n", cases,
              near, mismatches);
  EXPECT_LE(mismatches, cases / 100);
}

// A window longer than penalty_last_n: the engine passes the last n tokens; the reference
// over that window equals the engine sampler over the whole sequence with penalty_last_n.
TEST(SampleReference, PenaltyWindowIsTheLastNTokens) {
  Rng rng(seed_for_test());
  const int V = 300;
  for (int n : {0, 3, 10, 30, 100}) {
    std::vector<float> base(V);
    for (auto& x : base) x = float(2.0 * rng.normal());
    std::vector<TokenId> prompt, output;
    for (int i = 0; i < 20; ++i) prompt.push_back(TokenId(rng.next() % 40));
    for (int i = 0; i < 15; ++i) output.push_back(TokenId(rng.next() % 40));
    SamplingParams sp;
    sp.temperature = 0.0f;  // argmax of the penalised row: sensitive to every penalty
    sp.repetition_penalty = 3.0f;
    sp.presence_penalty = 2.0f;
    sp.frequency_penalty = 1.0f;
    sp.penalty_last_n = n;
    for (int t = 0; t < 40; ++t)
      base[size_t(t)] = 6.0f + float(rng.uniform());  // penalised ones lead
    std::vector<float> a = base;
    const TokenId got = sample_with_draw(a, sp, prompt, output, [] { return 0.5; }).token;
    std::vector<int32_t> all(prompt.begin(), prompt.end());
    all.insert(all.end(), output.begin(), output.end());
    const size_t len = std::min(size_t(n), all.size()), outs = std::min(size_t(n), output.size());
    std::vector<int32_t> window(all.end() - std::ptrdiff_t(len), all.end());
    testing::RefParams rp;
    rp.temperature = 0.0f;
    rp.repetition_penalty = 3.0f;
    rp.presence_penalty = 2.0f;
    rp.frequency_penalty = 1.0f;
    std::vector<float> b = base;
    testing::reference_penalties(b, rp, window, outs);
    EXPECT_EQ(a, b) << "n=" << n;
    EXPECT_EQ(got, testing::reference_sample(b, rp, 0.5).token) << "n=" << n;
  }
}

}  // namespace
}  // namespace tandem::engine
