// StepSampler: the path a step takes (runner argmax, runner sampling, host) and the tokens
// each path gives, against engine::sample on the same rows and draws.
#include "engine/step_sampler.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/fast_greedy.h"
#include "engine/sampler.h"

namespace tandem::engine {
namespace {

constexpr int kVocab = 997;  // odd, so no row is a multiple of a vector width

// Random logits for each row (seeded by row), with every sampling entry point the engine
// can ask for. The runner-side sampler is engine::sample_with_draw on the draw it is given.
class RowRunner : public model::Runner {
 public:
  bool greedy = false, sampling = false;
  int forwards = 0, greedy_forwards = 0, sample_forwards = 0;

  static std::vector<float> row(int r) {
    std::mt19937 g(uint32_t(1000 + r));
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> v(kVocab);
    for (float& x : v) x = d(g);
    return v;
  }
  int vocab_size() const override { return kVocab; }
  int max_model_len() const override { return 1024; }
  model::KvLayout kv_layout() const override { return {}; }
  std::string name() const override { return "rows"; }
  bool supports_greedy() const override { return greedy; }
  bool supports_sampling() const override { return sampling; }
  void forward(const model::ForwardBatch& b, std::span<float> logits) override {
    ++forwards;
    ASSERT_EQ(logits.size(), b.logit_rows.size() * size_t(kVocab));
    for (size_t k = 0; k < b.logit_rows.size(); ++k) {
      const auto r = row(int(k));
      std::copy(r.begin(), r.end(), logits.begin() + std::ptrdiff_t(k * kVocab));
    }
  }
  void forward_greedy(const model::ForwardBatch& b, std::span<TokenId> tokens) override {
    ++greedy_forwards;
    for (size_t k = 0; k < b.logit_rows.size(); ++k) tokens[k] = fast_argmax(row(int(k)));
  }
  void forward_sample(const model::ForwardBatch& b, std::span<const model::RowSampling> rows,
                      std::span<const TokenId> penalty, std::span<TokenId> tokens) override {
    ++sample_forwards;
    for (size_t k = 0; k < b.logit_rows.size(); ++k) {
      const model::RowSampling& rs = rows[k];
      SamplingParams p;
      static_cast<SamplingKnobs&>(p) = rs;
      auto win = penalty.subspan(size_t(rs.penalty_offset), size_t(rs.penalty_count));
      auto r = row(int(k));
      tokens[k] = sample_with_draw(r, p, win.first(size_t(rs.penalty_count - rs.penalty_output)),
                                   win.last(size_t(rs.penalty_output)), [&] { return rs.uniform; })
                      .token;
    }
  }
};

struct Rows {
  std::vector<Sequence> seqs;
  std::vector<SamplingParams> params;
  std::vector<SampleRow> rows;
  model::ForwardBatch batch;

  // One sequence per entry of `ps`, each with a prompt and a few output tokens, forked,
  // greedy_only as the engine sets it, seeded RNGs.
  explicit Rows(std::vector<SamplingParams> ps) : seqs(ps.size()), params(std::move(ps)) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = seqs[i];
      for (int t = 0; t < 9 + int(i); ++t) s.tokens.push_back(TokenId((t * 37 + int(i)) % kVocab));
      s.num_prompt = 6;
      s.forked = true;
      s.greedy_only = fast_greedy_applies(params[i]);
      s.rng = Rng(77 + i);
      rows.push_back({&s, &params[i], int(i), {}});
      batch.logit_rows.push_back(int32_t(i));
    }
  }
};

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}
SamplingParams random_params(float rep = 1.0f) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.repetition_penalty = rep;
  p.presence_penalty = 0.3f;
  return p;
}

// What the host sampler gives for row i with a fresh copy of its sequence's RNG.
std::vector<TokenId> reference(const Rows& r) {
  std::vector<TokenId> out;
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    auto row = RowRunner::row(int(i));
    Rng rng(77 + i);
    out.push_back(sample(row, r.params[i], r.seqs[i].prompt(), r.seqs[i].output(), rng).token);
  }
  return out;
}

std::vector<TokenId> run(StepSampler& ss, RowRunner& runner, Rows& r, SamplePath want) {
  EXPECT_EQ(ss.prepare(runner, r.batch, r.rows), want);
  ss.forward(runner, r.batch);
  ss.sample(r.rows);
  std::vector<TokenId> out;
  for (const SampleRow& row : r.rows) out.push_back(row.result.token);
  return out;
}

TEST(StepSampler, AllGreedyRowsTakeTheRunnersArgmax) {
  RowRunner runner;
  runner.greedy = runner.sampling = true;
  Rows r({greedy(), greedy(), greedy()});
  StepSampler ss(kVocab, 8, 2);
  EXPECT_EQ(run(ss, runner, r, SamplePath::kRunnerArgmax), reference(r));
  EXPECT_EQ(runner.greedy_forwards, 1);
  EXPECT_EQ(runner.forwards + runner.sample_forwards, 0);
}

TEST(StepSampler, RandomRowsTakeTheRunnersSamplerWithOneDrawEach) {
  RowRunner runner;
  runner.greedy = runner.sampling = true;
  Rows r({random_params(), greedy(), random_params(1.3f)});
  const auto want = reference(r);
  StepSampler ss(kVocab, 8, 2);
  EXPECT_EQ(run(ss, runner, r, SamplePath::kRunnerSample), want);
  EXPECT_EQ(runner.sample_forwards, 1);
  // Exactly one draw from each random row's RNG, none from the greedy row's.
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    Rng fresh(77 + i);
    if (r.params[i].temperature > 0) fresh.uniform();
    EXPECT_EQ(r.seqs[i].rng.next(), fresh.next()) << "row " << i;
  }
}

TEST(StepSampler, LogprobsOrAnUnforkedPromptBringTheLogitsToTheHost) {
  for (int variant = 0; variant < 2; ++variant) {
    RowRunner runner;
    runner.greedy = runner.sampling = true;
    Rows r({greedy(), random_params(), random_params(1.2f)});
    if (variant == 0)
      r.params[1].top_logprobs = 3;
    else
      r.seqs[0].forked = false;
    const auto want = reference(r);
    StepSampler ss(kVocab, 8, 3);
    EXPECT_EQ(run(ss, runner, r, SamplePath::kHost), want) << "variant " << variant;
    EXPECT_EQ(runner.forwards, 1);
    if (variant == 0) {
      EXPECT_EQ(r.rows[1].result.top.size(), 3u);
    }
  }
}

TEST(StepSampler, RunnerWithoutSamplingSamplesOnTheHost) {
  RowRunner runner;
  Rows r({random_params(), greedy(), random_params(1.1f), greedy(), random_params()});
  StepSampler ss(kVocab, 2, 2);  // fewer rows than the cap: the buffer grows past it
  EXPECT_EQ(run(ss, runner, r, SamplePath::kHost), reference(r));
}

TEST(StepSampler, SiblingsSampleFromTheParentsUntouchedRow) {
  RowRunner runner;
  Rows r({random_params(1.5f), random_params()});
  r.seqs[0].forked = false;
  StepSampler ss(kVocab, 4, 1);
  ASSERT_EQ(ss.prepare(runner, r.batch, r.rows), SamplePath::kHost);
  ss.forward(runner, r.batch);
  Sequence sibling = r.seqs[0];
  sibling.rng = Rng(5);
  const SampleResult sib = ss.sample_sibling(0, r.params[0], sibling);
  auto row = RowRunner::row(0);
  Rng rng(5);
  EXPECT_EQ(sib.token, sample(row, r.params[0], sibling.prompt(), sibling.output(), rng).token);
  ss.sample(r.rows);
  EXPECT_EQ(r.rows[0].result.token, reference(r)[0]);  // the parent's row was not edited
}

}  // namespace
}  // namespace tandem::engine
