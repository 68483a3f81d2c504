#pragma once
// An independent reference of the sampler's rules (src/engine/sampler.h) for checking the
// GPU sampler: a full sort of the row in the order "larger logit first, then smaller id",
// weights and cumulative sums in double, then top-k, top-p over what top-k kept, min-p and
// the draw. The draw walks the kept tokens in that order, except without top-k and top-p
// (top_k 0, top_p 1), where the host sampler walks them by increasing id (no sort needed). No
// engine code: the GPU test (gputest_cuda) includes it too, and sample_reference_test.cpp checks it
// against engine::sample_with_draw.
//
// Besides the token it reports `margin`: how close (relative to the mass involved) the draw,
// the top-p threshold or the min-p threshold came to a boundary where another token would
// have been picked. Two correct implementations that round differently (float vs double
// weights, another summation order) may only disagree when the margin is tiny.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace tandem::testing {

struct RefParams {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
};

struct RefResult {
  int32_t token = -1;
  double margin = std::numeric_limits<double>::infinity();
  size_t kept = 0;                  // tokens in the final candidate set
  std::vector<int32_t> order;       // the kept tokens, in order
  std::vector<double> probability;  // their probabilities (sum 1)
};

// window: the penalty window (the last tokens of prompt + output); its last `outputs`
// entries are output tokens. Applies the penalties to `logits` in place.
inline void reference_penalties(std::span<float> logits, const RefParams& p,
                                std::span<const int32_t> window, size_t outputs) {
  const bool rep = p.repetition_penalty != 1.0f;
  const bool add = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!rep && !add) return;
  std::map<int32_t, int> out_count;  // distinct tokens of the window -> output occurrences
  for (size_t i = 0; i < window.size(); ++i) {
    const bool is_out = i + outputs >= window.size();
    if (!rep && !is_out) continue;
    out_count[window[i]] += is_out ? 1 : 0;
  }
  for (auto& [t, c] : out_count) {
    float& l = logits[size_t(t)];
    if (rep) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (c > 0) l -= p.frequency_penalty * float(c) + p.presence_penalty;
  }
}

// `logits` after penalties. uniform in [0, 1).
inline RefResult reference_sample(std::span<const float> logits, const RefParams& p,
                                  double uniform) {
  RefResult r;
  const size_t V = logits.size();
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)];  // stable: equal logits keep id order
  });
  if (p.temperature < 1e-5f || p.top_k == 1) {
    r.token = idx[0];
    r.kept = 1;
    r.order = {idx[0]};
    r.probability = {1.0};
    return r;
  }
  const double m = logits[size_t(idx[0])], inv_t = 1.0 / double(p.temperature);
  std::vector<double> w(V);
  for (size_t i = 0; i < V; ++i) w[i] = std::exp((double(logits[size_t(idx[i])]) - m) * inv_t);
  auto rel = [](double a, double b, double scale) { return std::fabs(a - b) / scale; };
  size_t n = p.top_k > 0 ? std::min(V, size_t(p.top_k)) : V;
  if (p.top_p < 1.0f) {
    double z = 0;
    for (size_t i = 0; i < n; ++i) z += w[i];
    const double nucleus = double(p.top_p) * z;
    double cum = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || cum < nucleus)) cum += w[keep++];
    // Moving the threshold across cum (before or after the last kept) changes the set.
    r.margin = std::min(r.margin, rel(cum, nucleus, z));
    r.margin = std::min(r.margin, rel(cum - w[keep - 1], nucleus, z));
    n = keep;
  }
  if (p.min_p > 0.0f) {
    size_t keep = 0;
    while (keep < n && w[keep] >= double(p.min_p)) ++keep;
    if (keep < n) r.margin = std::min(r.margin, rel(w[keep], p.min_p, p.min_p));
    if (keep > 0) r.margin = std::min(r.margin, rel(w[keep - 1], p.min_p, p.min_p));
    n = keep;  // the best token always stays: its weight is 1 >= min_p
  }
  std::vector<std::pair<int32_t, double>> walk;  // (token, weight) in the draw's order
  for (size_t i = 0; i < n; ++i) walk.push_back({idx[i], w[i]});
  if (p.top_k == 0 && p.top_p >= 1.0f) std::sort(walk.begin(), walk.end());
  for (size_t i = 0; i < n; ++i) idx[i] = walk[i].first, w[i] = walk[i].second;
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += w[i];
  const double x = uniform * kept;
  double cum = 0;
  size_t pick = n - 1;
  for (size_t i = 0; i < n; ++i) {
    if (x < cum + w[i]) {
      pick = i;
      r.margin = std::min({r.margin, rel(x, cum, kept), rel(x, cum + w[i], kept)});
      break;
    }
    cum += w[i];
  }
  r.token = idx[pick];
  r.kept = n;
  r.order.assign(idx.begin(), idx.begin() + std::ptrdiff_t(n));
  for (size_t i = 0; i < n; ++i) r.probability.push_back(w[i] / kept);
  return r;
}

}  // namespace tandem::testing
