#pragma once
// Helpers for the CUDA kernel tests: random bf16 host data, device copies, error norms.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/check.cuh"
#include "core/bf16.h"
#include "core/rng.h"

namespace tandem::cuda::test {

using bf16_t = __nv_bfloat16;

// Random values rounded to bf16, kept as floats for the references.
inline std::vector<float> random_bf16(Rng& rng, size_t n, double std = 1.0, double mean = 0.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(float(mean + std * rng.normal()));
  return v;
}

// A device buffer of T filled from host values (bf16 from float when T is bf16_t).
template <class T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    TANDEM_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)));
    TANDEM_CUDA_CHECK(cudaMemset(p_, 0xff, std::max<size_t>(n, 1) * sizeof(T)));  // poison
  }
  template <class H>
  explicit Dev(const std::vector<H>& host) : Dev(host.size()) {
    upload(host);
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }

  template <class H>
  void upload(const std::vector<H>& host) {
    std::vector<T> tmp(host.size());
    for (size_t i = 0; i < host.size(); ++i) tmp[i] = convert(host[i]);
    TANDEM_CUDA_CHECK(cudaMemcpy(p_, tmp.data(), tmp.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Host floats (bf16 widened).
  std::vector<float> floats() const {
    std::vector<T> tmp(n_);
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    TANDEM_CUDA_CHECK(cudaMemcpy(tmp.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n_);
    for (size_t i = 0; i < n_; ++i) out[i] = widen(tmp[i]);
    return out;
  }

 private:
  template <class H>
  static T convert(H v) {
    if constexpr (std::is_same_v<T, bf16_t>) {
      bf16 b = float_to_bf16(float(v));
      bf16_t r;
      std::memcpy(static_cast<void*>(&r), &b, 2);
      return r;
    } else {
      return T(v);
    }
  }
  static float widen(T v) {
    if constexpr (std::is_same_v<T, bf16_t>) {
      bf16 b;
      std::memcpy(static_cast<void*>(&b), &v, 2);
      return bf16_to_float(b);
    } else {
      return float(v);
    }
  }
  T* p_ = nullptr;
  size_t n_;
};

// ||got - ref|| / ||ref||; infinity if any value is not finite (unwritten poison, NaN).
inline double rel_error(const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline double max_abs_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    m = std::max(m, std::fabs(double(got[i]) - ref[i]));
  }
  return m;
}

// Mean microseconds of fn() over `reps` calls on the default stream, after one call to warm
// up (CUDA events around the loop).
template <class F>
double time_us(F&& fn, int reps) {
  fn();
  cudaEvent_t e0, e1;
  TANDEM_CUDA_CHECK(cudaEventCreate(&e0));
  TANDEM_CUDA_CHECK(cudaEventCreate(&e1));
  TANDEM_CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) fn();
  TANDEM_CUDA_CHECK(cudaEventRecord(e1));
  TANDEM_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  TANDEM_CUDA_CHECK(cudaEventDestroy(e0));
  TANDEM_CUDA_CHECK(cudaEventDestroy(e1));
  return 1e3 * ms / reps;
}

// A seed that differs between runs (fresh inputs every time), printed so a failure can be
// replayed with TANDEM_TEST_SEED.
inline uint64_t test_seed() {
  static uint64_t s = [] {
    const char* e = std::getenv("TANDEM_TEST_SEED");
    uint64_t v = e ? std::strtoull(e, nullptr, 10)
                   : uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    std::printf("[ seed ] TANDEM_TEST_SEED=%llu\n", (unsigned long long)v);
    return v;
  }();
  return s;
}

}  // namespace tandem::cuda::test
