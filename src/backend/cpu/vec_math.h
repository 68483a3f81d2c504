#pragma once
// Vectorised reductions over a logits row (the sampler's hot loops: 151,936 floats a token).
#include <cstdint>
#include <span>

namespace tandem::cpu {

// Largest value (NaN entries are ignored; -inf when all are -inf or NaN).
float max_value(std::span<const float> x);

// sum_i exp((x_i - m) * s) for m >= every x_i and s > 0, fp32 exp (relative error ~2e-7)
// accumulated in fp32 lanes and folded in double. NaN in x gives NaN.
double sum_exp(std::span<const float> x, float m, float s);

// sum_i a[i] * b[i] in fp32 (16 lanes, then folded).
float dot(const float* a, const float* b, int64_t n);

// y[i] += s * x[i].
void axpy(float s, const float* x, float* y, int64_t n);

// Index of the first maximum.
int64_t argmax(std::span<const float> x);

}  // namespace tandem::cpu
