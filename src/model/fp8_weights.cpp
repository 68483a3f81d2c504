#include "model/fp8_weights.h"

#include <array>

#include "backend/cpu/gemm.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/fp8.h"

namespace tandem::model {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

std::string fp8_scale_name(const std::string& weight_name) {
  return weight_name + "_scale_inv";
}

Fp8Weight read_fp8_weight(const Checkpoint& ckpt, const std::string& name, int64_t n, int64_t k,
                          const Fp8Quantization& q) {
  const std::string dir = ckpt.dir().string();
  Fp8Weight w;
  w.n = n, w.k = k, w.block_n = q.block_n, w.block_k = q.block_k;
  TensorView t = ckpt.get(name, {n, k}, {DType::kF8E4M3});
  w.codes = static_cast<const uint8_t*>(t.data);

  const std::string sname = fp8_scale_name(name);
  if (!ckpt.has(sname))
    fail(ErrorKind::kInvalidArgument,
         "{}: FP8 weight '{}' has no scale tensor '{}' (block-scaled FP8 checkpoints store one "
         "per quantized weight)",
         dir, name, sname);
  // The dtype first (its error names the dtype as written), then the shape.
  TensorView s = ckpt.get(sname);
  s = ckpt.get(sname, s.shape, {DType::kBF16, DType::kF16, DType::kF32});
  const std::vector<int64_t> want = {(n + q.block_n - 1) / q.block_n,
                                     (k + q.block_k - 1) / q.block_k};
  if (s.shape != want)
    fail(ErrorKind::kInvalidArgument,
         "{}: scale tensor '{}' has shape {} but a [{}, {}] weight in {} x {} blocks needs {}", dir,
         sname, shape_str(s.shape), n, k, q.block_n, q.block_k, shape_str(want));
  cpu::WeightRef sr;
  sr.data = s.data;
  sr.type = s.dtype == DType::kBF16  ? cpu::WType::kBF16
            : s.dtype == DType::kF16 ? cpu::WType::kF16
                                     : cpu::WType::kF32;
  sr.n = want[0];
  sr.k = want[1];
  w.scales.resize(size_t(want[0] * want[1]));
  for (int64_t r = 0; r < want[0]; ++r) cpu::weight_row(sr, r, w.scales.data() + r * want[1]);
  return w;
}

void dequantize_fp8_weight(const Fp8Weight& w, float* out, cpu::ThreadPool* pool) {
  std::array<float, 256> lut;
  for (int c = 0; c < 256; ++c) lut[size_t(c)] = fp8_e4m3_to_float(uint8_t(c));
  const int64_t sc = w.scale_cols();
  auto rows = [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* s = w.scales.data() + (i / w.block_n) * sc;
      const uint8_t* q = w.codes + i * w.k;
      float* o = out + i * w.k;
      for (int64_t j = 0; j < w.k; ++j) o[j] = lut[q[j]] * s[j / w.block_k];
    }
  };
  if (pool)
    pool->parallel_for(w.n, 8, rows);
  else
    rows(0, w.n, 0);
}

}  // namespace tandem::model
