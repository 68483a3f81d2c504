#include "engine/fast_greedy.h"

#include <cmath>
#include <cstdint>

namespace tandem::engine {

bool fast_greedy_applies(const SamplingParams& p) {
  const bool greedy = p.temperature < 1e-5f || p.top_k == 1;
  return greedy && p.top_logprobs < 0 && p.repetition_penalty == 1.0f &&
         p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}

TokenId fast_argmax(std::span<const float> row) {
  if (row.empty()) return -1;
  // One pass in 8 independent lanes (so it vectorises): each lane keeps its first maximum
  // and where it was, plus a finiteness probe (x * 0 is NaN exactly when x is NaN or inf).
  constexpr size_t kLanes = 8;
  const size_t n = row.size(), body = n / kLanes * kLanes;
  const float* x = row.data();
  float m[kLanes], z[kLanes];
  uint32_t at[kLanes];
  for (size_t l = 0; l < kLanes; ++l) m[l] = x[0], z[l] = 0.0f, at[l] = 0;
  for (size_t i = 0; i < body; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) {
      const bool gt = x[i + l] > m[l];
      m[l] = gt ? x[i + l] : m[l];
      at[l] = gt ? uint32_t(i + l) : at[l];
      z[l] += x[i + l] * 0.0f;
    }
  float mx = m[0], probe = 0.0f;
  uint32_t best = at[0];
  for (size_t l = 0; l < kLanes; ++l) {
    probe += z[l];
    if (m[l] > mx || (m[l] == mx && at[l] < best)) mx = m[l], best = at[l];
  }
  for (size_t i = body; i < n; ++i) {
    probe += x[i] * 0.0f;
    if (x[i] > mx) mx = x[i], best = uint32_t(i);
  }
  if (!std::isfinite(probe)) return -1;
  return TokenId(best);
}

TokenId masked_argmax(std::span<const float> row, const uint32_t* allowed) {
  TokenId best = -1;
  float mx = 0.0f;
  const size_t n = row.size();
  for (size_t w = 0; w * 32 < n; ++w) {
    for (uint32_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
      const size_t i = w * 32 + size_t(__builtin_ctz(bits));
      if (i >= n) break;
      const float x = row[i];
      if (!std::isfinite(x)) return -1;
      if (best < 0 || x > mx) mx = x, best = TokenId(i);
    }
  }
  return best;
}

}  // namespace tandem::engine
