#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "backend/cpu/vec_math.h"
#include "core/error.h"

namespace tandem::engine {

namespace {

struct Cand {
  TokenId id;
  float logit;
};

// Descending by logit, ties to the lower id: a total order, so results never depend on the
// sort algorithm.
inline bool before(const Cand& a, const Cand& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The k best entries of `x`, best first. A bounded heap for small k (one pass, the common
// case), a partial sort of every entry otherwise.
std::vector<Cand> top_entries(std::span<const float> x, size_t k) {
  k = std::min(k, x.size());
  std::vector<Cand> h;
  if (k == 0) return h;
  h.reserve(k);
  if (k <= 256) {
    auto worse = [](const Cand& a, const Cand& b) { return before(a, b); };  // min-heap top
    for (size_t i = 0; i < x.size(); ++i) {
      Cand c{TokenId(i), x[i]};
      if (h.size() < k) {
        h.push_back(c);
        std::push_heap(h.begin(), h.end(), worse);
      } else if (before(c, h.front())) {
        std::pop_heap(h.begin(), h.end(), worse);
        h.back() = c;
        std::push_heap(h.begin(), h.end(), worse);
      }
    }
    std::sort(h.begin(), h.end(), before);
    return h;
  }
  std::vector<Cand> all(x.size());
  for (size_t i = 0; i < x.size(); ++i) all[i] = {TokenId(i), x[i]};
  std::partial_sort(all.begin(), all.begin() + k, all.end(), before);
  all.resize(k);
  return all;
}

float logsumexp(std::span<const float> x) {
  float m = cpu::max_value(x);
  if (!std::isfinite(m)) {
    if (m == -std::numeric_limits<float>::infinity())
      fail(ErrorKind::kInvalidArgument, "sampler: every logit is -inf");
    fail(ErrorKind::kInternal, "sampler: logits contain +inf");
  }
  double s = cpu::sum_exp(x, m, 1.0f);
  float r = m + float(std::log(s));
  if (!std::isfinite(r)) fail(ErrorKind::kInternal, "sampler: logits contain NaN");
  return r;
}

// Applies the penalties in place; returns the original values of the entries it changed.
std::vector<Cand> apply_penalties(std::span<float> logits, const SamplingParams& p,
                                  std::span<const TokenId> prompt,
                                  std::span<const TokenId> output) {
  std::vector<Cand> saved;
  const bool rep = p.repetition_penalty != 1.0f;
  const bool add = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!rep && !add) return saved;
  const int64_t V = int64_t(logits.size());
  auto check = [&](TokenId t) {
    if (t < 0 || t >= V)
      fail(ErrorKind::kInvalidArgument, "sampler: token id {} outside the vocabulary [0, {})", t,
           V);
  };
  // counts[t] = (seen in prompt+output window, occurrences in output window)
  std::unordered_map<TokenId, std::pair<bool, int>> counts;
  const size_t n = p.penalty_last_n < 0 ? SIZE_MAX : size_t(p.penalty_last_n);
  size_t out_from = output.size() > n ? output.size() - n : 0;
  for (size_t i = out_from; i < output.size(); ++i) {
    check(output[i]);
    auto& c = counts[output[i]];
    c.first = true;
    c.second++;
  }
  if (rep) {
    size_t left = n > output.size() ? n - output.size() : 0;
    size_t pr_from = prompt.size() > left ? prompt.size() - left : 0;
    for (size_t i = pr_from; i < prompt.size(); ++i) {
      check(prompt[i]);
      counts[prompt[i]].first = true;
    }
  }
  saved.reserve(counts.size());
  for (auto& [t, c] : counts) {
    float& l = logits[size_t(t)];
    saved.push_back({t, l});
    if (rep && c.first) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (c.second > 0) l -= p.frequency_penalty * float(c.second) + p.presence_penalty;
  }
  return saved;
}

TokenId argmax(std::span<const float> x) {
  return TokenId(cpu::argmax(x));
}

// Random draw after temperature, top-k, top-p and min-p. Candidates are visited in the
// total order of before() when top-k or top-p is set, else by increasing id (no sort); either
// way one uniform value maps to one token on every machine (the GPU sampler, sample.cu,
// follows the same two orders).
TokenId draw(std::span<const float> logits, const SamplingParams& p, double uniform) {
  const double inv_t = 1.0 / double(p.temperature);
  std::vector<Cand> c;
  double z = 0;  // mass of the set top-p is measured against
  float m;
  if (p.top_k > 0) {
    c = top_entries(logits, size_t(p.top_k));
    m = c.front().logit;
    for (auto& e : c) z += std::exp((double(e.logit) - m) * inv_t);
  } else {
    m = logits[size_t(argmax(logits))];
    z = cpu::sum_exp(logits, m, float(inv_t));
    if (p.top_p < 1.0f) {
      // Most nuclei are small: try the best 1024 first, sort everything only if needed.
      c = top_entries(logits, 1024);
      double mass = 0;
      for (auto& e : c) mass += std::exp((double(e.logit) - m) * inv_t);
      if (mass < double(p.top_p) * z && c.size() < logits.size())
        c = top_entries(logits, logits.size());
    } else {
      c.resize(logits.size());
      for (size_t i = 0; i < logits.size(); ++i) c[i] = {TokenId(i), logits[i]};
    }
  }
  // Keep the smallest prefix whose mass reaches top_p (at least one token), then drop
  // tokens below min_p times the best one's probability (the best has weight 1).
  std::vector<double> w;
  w.reserve(c.size());
  double cum = 0, kept = 0;
  size_t keep = 0;
  const double nucleus =
      p.top_p < 1.0f ? double(p.top_p) * z : std::numeric_limits<double>::infinity();
  for (auto& e : c) {
    if (keep > 0 && cum >= nucleus) break;
    double wi = std::exp((double(e.logit) - m) * inv_t);
    cum += wi;
    c[keep++] = e;
    w.push_back(wi);
  }
  c.resize(keep);
  if (p.min_p > 0.0f)
    for (auto& wi : w)
      if (wi < double(p.min_p)) wi = 0;
  for (double wi : w) kept += wi;
  double u = uniform * kept;
  for (size_t i = 0; i < c.size(); ++i) {
    if (u < w[i]) return c[i].id;
    u -= w[i];
  }
  for (size_t i = c.size(); i-- > 0;)  // rounding left u just above the total
    if (w[i] > 0) return c[i].id;
  return c.front().id;
}

}  // namespace

void validate(const SamplingParams& p) {
  auto bad = [](const char* what, double v, const char* range) {
    fail(ErrorKind::kInvalidArgument, "sampling parameter {} = {} is out of range ({})", what, v,
         range);
  };
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    bad("temperature", p.temperature, ">= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) bad("top_p", p.top_p, "(0, 1]");
  if (p.top_k < 0) bad("top_k", p.top_k, ">= 0, 0 = off");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) bad("min_p", p.min_p, "[0, 1]");
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    bad("repetition_penalty", p.repetition_penalty, "> 0, 1 = off");
  if (!std::isfinite(p.presence_penalty)) bad("presence_penalty", p.presence_penalty, "finite");
  if (!std::isfinite(p.frequency_penalty)) bad("frequency_penalty", p.frequency_penalty, "finite");
  if (p.penalty_last_n < -1) bad("penalty_last_n", p.penalty_last_n, ">= -1, -1 = all");
  if (p.top_logprobs < -1) bad("top_logprobs", p.top_logprobs, ">= -1");
}

void apply_mask(std::span<float> logits, const uint32_t* allowed) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = allowed[w];
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(n, w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i)
      if (!((bits >> (i & 31)) & 1)) logits[i] = ninf;
  }
}

SampleResult sample(std::span<float> logits, const SamplingParams& p,
                    std::span<const TokenId> prompt, std::span<const TokenId> output, Rng& rng,
                    const uint32_t* allowed) {
  return sample_with_draw(
      logits, p, prompt, output, [&rng] { return rng.uniform(); }, allowed);
}

SampleResult sample_with_draw(std::span<float> logits, const SamplingParams& p,
                              std::span<const TokenId> prompt, std::span<const TokenId> output,
                              const std::function<double()>& uniform, const uint32_t* allowed) {
  if (logits.empty()) fail(ErrorKind::kInvalidArgument, "sampler: empty logits row");
  validate(p);
  SampleResult r;
  const float lse = logsumexp(logits);
  if (p.top_logprobs > 0)
    for (auto& e : top_entries(logits, size_t(p.top_logprobs)))
      r.top.push_back({e.id, e.logit - lse});
  if (allowed) apply_mask(logits, allowed);
  std::vector<Cand> saved = apply_penalties(logits, p, prompt, output);

  const bool greedy = p.temperature < 1e-5f || p.top_k == 1;
  r.token = greedy ? argmax(logits) : draw(logits, p, uniform());

  float raw = logits[size_t(r.token)];
  for (auto& s : saved)
    if (s.id == r.token) raw = s.logit;
  r.logprob = raw - lse;
  return r;
}

Rng make_sequence_rng(const SamplingParams& p, uint64_t fallback) {
  return Rng(p.seed ? *p.seed : fallback ^ 0x5eed5eed5eed5eedull);
}

}  // namespace tandem::engine
