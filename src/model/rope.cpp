#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace tandem::model {

namespace {
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}
// The dimension whose wavelength completes `rotations` turns over `max_pos` positions.
double correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}
}  // namespace

RopeTable rope_table(const ModelConfig& c) {
  const int dim = c.head_dim, half = dim / 2;
  const double base = c.rope_theta;
  RopeTable r;
  r.inv_freq.resize(size_t(half));
  // The reference computes base^(2i/dim) in fp32; so do we, to round the same way.
  std::vector<float> pos_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    pos_freq[size_t(i)] = std::pow(float(base), float(2 * i) / float(dim));
  if (!c.yarn) {
    for (int i = 0; i < half; ++i) r.inv_freq[size_t(i)] = 1.0f / pos_freq[size_t(i)];
    return r;
  }
  const YarnScaling& y = *c.yarn;
  const double factor = y.factor;
  if (y.attention_factor) {
    r.attention_factor = float(*y.attention_factor);
  } else if (y.mscale && y.mscale_all_dim && *y.mscale != 0 && *y.mscale_all_dim != 0) {
    r.attention_factor =
        float(yarn_mscale(factor, *y.mscale) / yarn_mscale(factor, *y.mscale_all_dim));
  } else {
    r.attention_factor = float(yarn_mscale(factor, 1.0));
  }
  double low = correction_dim(y.beta_fast, dim, base, y.original_max_position_embeddings);
  double high = correction_dim(y.beta_slow, dim, base, y.original_max_position_embeddings);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // avoid a division by zero in the ramp
  for (int i = 0; i < half; ++i) {
    float ramp = std::clamp(float((double(i) - low) / (high - low)), 0.0f, 1.0f);
    float extrap = 1.0f - ramp;  // 1: keep the original frequency (high-frequency dims)
    float f_extra = 1.0f / pos_freq[size_t(i)];
    float f_inter = 1.0f / (float(factor) * pos_freq[size_t(i)]);
    r.inv_freq[size_t(i)] = f_inter * (1.0f - extrap) + f_extra * extrap;
  }
  return r;
}

}  // namespace tandem::model
