// The GPU sampler (sample.cu) against the double-precision reference of the host sampler's
// rules (tests/unit/engine/sample_reference.h, itself checked against engine::sample by the
// CPU suite): same rows, parameters, penalty windows and uniforms. Tokens must be equal
// except where the draw (or a top-p / min-p threshold) lies within a tiny relative distance
// of a boundary; those are counted and bounded. Plus the sampled distribution against the
// exact kept distribution, planted ties, masked tokens, and the time of 256 rows of 151,936.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "../engine/sample_reference.h"
#include "backend/cuda/sample.cuh"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

using tandem::testing::RefParams;

struct Case {
  RefParams p;
  std::vector<int32_t> window;  // penalty window; its last `outputs` are output tokens
  size_t outputs = 0;
  double uniform = 0;
};

// Distinct tokens of each window with their output counts (the runner's job on the host).
void build_rows(const std::vector<Case>& cases, std::vector<SampleRow>& rows,
                std::vector<PenaltyEntry>& pen) {
  rows.clear();
  pen.clear();
  for (const Case& c : cases) {
    SampleRow r;
    r.temperature = c.p.temperature;
    r.top_p = c.p.top_p;
    r.top_k = c.p.top_k;
    r.min_p = c.p.min_p;
    r.repetition_penalty = c.p.repetition_penalty;
    r.presence_penalty = c.p.presence_penalty;
    r.frequency_penalty = c.p.frequency_penalty;
    r.uniform = c.uniform;
    r.penalty_offset = int32_t(pen.size());
    std::map<int32_t, int> m;
    for (size_t i = 0; i < c.window.size(); ++i) m[c.window[i]] += i + c.outputs >= c.window.size();
    for (auto& [t, n] : m) pen.push_back({t, n});
    r.penalty_count = int32_t(pen.size()) - r.penalty_offset;
    rows.push_back(r);
  }
  if (pen.empty()) pen.push_back({0, 0});  // a valid pointer
}

std::vector<int32_t> run_gpu(std::vector<float> logits, int V, const std::vector<Case>& cases,
                             float* ms = nullptr, int repeats = 1) {
  std::vector<SampleRow> rows;
  std::vector<PenaltyEntry> pen;
  build_rows(cases, rows, pen);
  const int R = int(cases.size());
  Dev<float> dl(logits);
  Dev<SampleRow> dp(rows);
  Dev<PenaltyEntry> de(pen);
  Dev<int32_t> dout(static_cast<size_t>(R));
  cudaEvent_t a, b;
  TANDEM_CUDA_CHECK(cudaEventCreate(&a));
  TANDEM_CUDA_CHECK(cudaEventCreate(&b));
  sample_rows(dl.get(), R, V, dp.get(), de.get(), dout.get(), nullptr);  // warm-up / result
  std::vector<float> out = dout.floats();
  if (ms) {
    TANDEM_CUDA_CHECK(cudaEventRecord(a));
    for (int i = 0; i < repeats; ++i)
      sample_rows(dl.get(), R, V, dp.get(), de.get(), dout.get(), nullptr);
    TANDEM_CUDA_CHECK(cudaEventRecord(b));
    TANDEM_CUDA_CHECK(cudaEventSynchronize(b));
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(ms, a, b));
    *ms /= float(repeats);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  TANDEM_CUDA_CHECK(cudaGetLastError());
  std::vector<int32_t> got(out.begin(), out.end());
  return got;
}

TEST(CudaSample, MatchesTheReferenceOnTheSameDraws) {
  Rng rng(test_seed() + 501);
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
  const int top_ks[] = {0, 1, 20, 5000};
  const float top_ps[] = {0.5f, 0.9f, 1.0f};
  const float min_ps[] = {0.0f, 0.05f};
  int total = 0, near = 0, mismatches = 0;
  for (int V : {1000, 32001, 151936}) {
    std::vector<Case> cases;
    for (float t : temps)
      for (int k : top_ks)
        for (float tp : top_ps)
          for (float mp : min_ps) {
            Case c;
            c.p.temperature = t;
            c.p.top_k = k;
            c.p.top_p = tp;
            c.p.min_p = mp;
            if (cases.size() % 3 == 1) {  // penalties over a window of prompt + output
              c.p.repetition_penalty = 1.0f + float(rng.uniform());
              c.p.presence_penalty = float(rng.uniform());
              c.p.frequency_penalty = 0.5f * float(rng.uniform());
              const int n = 1 + int(rng.next() % 200);
              for (int i = 0; i < n; ++i) c.window.push_back(int32_t(rng.next() % 300));
              c.outputs = size_t(rng.next() % uint64_t(n + 1));
            }
            c.uniform = rng.uniform();
            cases.push_back(c);
          }
    const int R = int(cases.size());
    std::vector<float> l(size_t(R) * V);
    for (int r = 0; r < R; ++r) {
      float* row = l.data() + size_t(r) * V;
      // Flat to peaked rows; every other one rounded to bf16 (many exact ties, as the
      // model's logits have); a few masked (-inf) tokens.
      const double scale = 0.5 + 5.0 * rng.uniform();
      for (int i = 0; i < V; ++i) row[i] = float(scale * rng.normal());
      if (r % 2)
        for (int i = 0; i < V; ++i) row[i] = round_bf16(row[i]);
      for (int i = 0; i < 5; ++i) row[rng.next() % uint64_t(V)] = -INFINITY;
    }
    const auto got = run_gpu(l, V, cases);
    for (int r = 0; r < R; ++r) {
      const Case& c = cases[size_t(r)];
      std::vector<float> row(l.begin() + size_t(r) * V, l.begin() + size_t(r + 1) * V);
      tandem::testing::reference_penalties(row, c.p, c.window, c.outputs);
      const auto ref = tandem::testing::reference_sample(row, c.p, c.uniform);
      ++total;
      if (ref.margin < 1e-5) ++near;
      if (got[size_t(r)] != ref.token) {
        ++mismatches;
        EXPECT_LT(ref.margin, 1e-5)
            << "V=" << V << " row " << r << " T=" << c.p.temperature << " k=" << c.p.top_k
            << " p=" << c.p.top_p << " min_p=" << c.p.min_p << " u=" << c.uniform << ": gpu "
            << got[size_t(r)] << ", reference " << ref.token << " (margin " << ref.margin << ")";
      }
    }
  }
  std::printf("[ sample ] %d rows, %d within 1e-5 of a boundary, %d different tokens\n", total,
              near, mismatches);
  EXPECT_LE(mismatches, std::max(1, total / 100));
}

// Many draws from one row: with stratified uniforms (i + 0.5) / N, each token's count must
// be N times its exact kept probability within 1 (the draw maps a uniform through the
// cumulative sums), and no token outside the kept set may appear.
TEST(CudaSample, DistributionMatchesTheKeptProbabilities) {
  Rng rng(test_seed() + 502);
  const int V = 32001, N = 4096;
  std::vector<float> base(V);
  for (auto& x : base) x = round_bf16(float(2.5 * rng.normal()));
  struct Setting {
    float t, p, min_p;
    int k;
  };
  for (Setting s : {Setting{1.0f, 1.0f, 0.0f, 0}, Setting{0.8f, 0.9f, 0.02f, 50},
                    Setting{1.2f, 0.95f, 0.0f, 0}, Setting{0.6f, 1.0f, 0.0f, 300}}) {
    std::vector<Case> cases(N);
    std::vector<float> l(size_t(N) * V);
    for (int i = 0; i < N; ++i) {
      cases[size_t(i)].p.temperature = s.t;
      cases[size_t(i)].p.top_p = s.p;
      cases[size_t(i)].p.min_p = s.min_p;
      cases[size_t(i)].p.top_k = s.k;
      cases[size_t(i)].uniform = (i + 0.5) / N;
      std::copy(base.begin(), base.end(), l.begin() + size_t(i) * V);
    }
    const auto got = run_gpu(l, V, cases);
    const auto ref = tandem::testing::reference_sample(base, cases[0].p, 0.5);
    std::map<int32_t, int> count;
    for (int32_t t : got) count[t]++;
    std::map<int32_t, double> want;
    for (size_t i = 0; i < ref.order.size(); ++i) want[ref.order[i]] = ref.probability[i] * N;
    double worst = 0;
    for (auto& [t, n] : count) {
      ASSERT_TRUE(want.contains(t)) << "token " << t << " is outside the kept set";
      worst = std::max(worst, std::fabs(n - want[t]));
    }
    for (auto& [t, e] : want) worst = std::max(worst, std::fabs(count[t] - e));
    std::printf("[ sample ] T=%.1f k=%d p=%.2f min_p=%.2f: %zu kept, worst count error %.2f\n", s.t,
                s.k, s.p, s.min_p, ref.kept, worst);
    EXPECT_LE(worst, 1.01);
  }
}

// Exact ties decide by id: a row of equal values keeps ids 0..k-1 in order; masked tokens
// (-inf) are never drawn; temperature 0 is the argmax of the penalised row.
TEST(CudaSample, TiesMaskedTokensAndGreedyRows) {
  const int V = 1000;
  std::vector<Case> cases;
  std::vector<float> l;
  auto add = [&](Case c, std::vector<float> row) {
    cases.push_back(std::move(c));
    l.insert(l.end(), row.begin(), row.end());
  };
  std::vector<int32_t> want;
  for (double u : {0.0, 0.2999, 0.5, 0.9999}) {  // 20 equal ones: id floor(20 u)
    Case c;
    c.p.top_k = 20;
    c.uniform = u;
    add(c, std::vector<float>(V, 0.25f));
    want.push_back(int32_t(std::floor(20 * u)));
  }
  {  // all but three masked: the draw stays among the three
    std::vector<float> row(V, -INFINITY);
    row[700] = 1.0f, row[3] = 1.0f, row[999] = 0.5f;
    Case c;
    c.uniform = 0.999999;
    add(c, row);
    want.push_back(999);
  }
  {  // greedy with a repetition penalty: the leader is penalised below the runner-up
    std::vector<float> row(V, 0.0f);
    row[10] = 4.0f, row[20] = 3.0f;
    Case c;
    c.p.temperature = 0.0f;
    c.p.repetition_penalty = 2.0f;
    c.window = {10, 10, 5};
    c.outputs = 1;
    add(c, row);
    want.push_back(20);
  }
  {  // top_p over an exact tie group: half of four equal tokens (the first two ids)
    std::vector<float> row(V, -30.0f);
    for (int i : {40, 41, 42, 43}) row[size_t(i)] = 2.0f;
    Case c;
    c.p.top_p = 0.5f;
    c.uniform = 0.99;
    add(c, row);
    want.push_back(41);
  }
  const auto got = run_gpu(l, V, cases);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "case " << i;
}

// 256 rows of the Qwen3 vocabulary (~156 MB of fp32 logits); the aim is < 1 ms on an H200.
TEST(CudaSample, TimeOf256RowsOfTheQwen3Vocabulary) {
  Rng rng(test_seed() + 503);
  const int V = 151936, R = 256;
  std::vector<float> l(size_t(R) * V);
  for (auto& x : l) x = round_bf16(float(3.0 * rng.normal()));
  struct Setting {
    const char* name;
    float t, p;
    int k;
  };
  for (Setting s : {Setting{"T=1 (no truncation)", 1.0f, 1.0f, 0},
                    Setting{"T=0.7 top_p=0.8 top_k=20 (Qwen3)", 0.7f, 0.8f, 20},
                    Setting{"T=0.6 top_p=0.95", 0.6f, 0.95f, 0}}) {
    std::vector<Case> cases(R);
    for (auto& c : cases) {
      c.p.temperature = s.t;
      c.p.top_p = s.p;
      c.p.top_k = s.k;
      c.uniform = rng.uniform();
    }
    float ms = 0;
    run_gpu(l, V, cases, &ms, 10);
    std::printf("[ sample ] %d x %d, %s: %.3f ms\n", R, V, s.name, ms);
    EXPECT_LT(ms, 20.0);  // a sanity bound; the figure is what matters
  }
}

}  // namespace
}  // namespace tandem::cuda::test
