#include <fmt/format.h>

#include "backend/cuda/doctor.h"
#include "core/error.h"

namespace tandem::cuda {

DoctorReport run_doctor() {
  DoctorReport r;
  auto line = [&](const std::string& s) { r.text += s + "\n"; };
  DoctorFacts f;
  std::string failure;
  try {
    collect_doctor_facts(f);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  line(fmt::format("CUDA driver {}.{}   runtime {}.{}   cuBLASLt {}", f.driver_version / 1000,
                   f.driver_version % 1000 / 10, f.runtime_version / 1000,
                   f.runtime_version % 1000 / 10, f.cublaslt_version));
  if (!f.device_error.empty()) {
    line("no usable CUDA device: " + f.device_error);
    return r;
  }
  for (size_t i = 0; i < f.gpus.size(); ++i) {
    const auto& g = f.gpus[i];
    line(fmt::format("GPU {}: {}  compute capability {}.{}  {} SMs  L2 {} MiB  memory {:.1f} GiB",
                     i, g.name, g.major, g.minor, g.sms, g.l2_bytes >> 20,
                     double(g.total_bytes) / (1ull << 30)));
  }
  if (!f.gpus.empty())
    line(fmt::format("GPU 0 free memory {:.1f} GiB", double(f.free_bytes) / (1ull << 30)));
  bool k_ok = f.kernel_max_err >= 0 && f.kernel_max_err < 1e-5;
  bool g_ok = f.gemm_rel_err >= 0 && f.gemm_rel_err < 1e-2;
  if (f.kernel_max_err >= 0)
    line(fmt::format("kernel check (y = 3x - 0.5, random x, n=100003): max error {:.2e}  {}",
                     f.kernel_max_err, k_ok ? "OK" : "FAILED"));
  if (f.gemm_rel_err >= 0)
    line(
        fmt::format("cuBLASLt bf16 GEMM 200x136x264 vs fp64 host: rel error {:.2e}  {} "
                    "({} algorithm(s) offered)",
                    f.gemm_rel_err, g_ok ? "OK" : "FAILED", f.gemm_algos));
  if (!failure.empty()) line("FAILED: " + failure);
  r.ok = failure.empty() && k_ok && g_ok;
  return r;
}

}  // namespace tandem::cuda
