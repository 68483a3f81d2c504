#pragma once
// What the GPU ran at while a benchmark ran: SM clock, board power against its limit, and
// why the clock was held down (NVML's clock event reasons: the power cap, thermal limits).
// A bf16 prefill on an H200 draws its 700 W cap and runs its SMs at ~1,700 instead of 1,980
// MHz, so a figure without its clock cannot be compared across machines or runs.
//
// NVML is loaded at run time (dlopen of libnvidia-ml.so.1, part of the driver), so the
// binary links nothing new and runs where the library is missing; the monitor then says why
// it has no samples. Host-only header.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem::cuda {

struct GpuSample {
  unsigned sm_mhz = 0;
  double power_w = 0;    // the driver's power reading
  uint64_t reasons = 0;  // NVML clock event reasons (bit mask)
};

// NVML's clock event reason bits that a benchmark reader needs.
constexpr uint64_t kGpuReasonPowerCap = 0x4;       // software power cap
constexpr uint64_t kGpuReasonHwSlowdown = 0x8;     // hardware slowdown (power brake, heat)
constexpr uint64_t kGpuReasonSwThermal = 0x20;     // software thermal slowdown
constexpr uint64_t kGpuReasonHwThermal = 0x40;     // hardware thermal slowdown
constexpr uint64_t kGpuReasonHwPowerBrake = 0x80;  // hardware power brake

struct GpuWindow {
  int samples = 0;
  unsigned sm_mhz_min = 0, sm_mhz_p50 = 0, sm_mhz_max = 0;
  double power_w_p50 = 0, power_w_max = 0;
  double power_limit_w = 0;    // 0: unknown
  double power_cap_share = 0;  // share of samples held by the power cap
  double thermal_share = 0;    // ... by a thermal or hardware slowdown
  // "SM 1710 MHz (1545-1965), 693 W of 700 W, power cap 88% of the time" or "".
  std::string describe() const;
};

// The summary of a run of samples (empty: samples == 0). Pure, unit-tested.
GpuWindow summarize_gpu_samples(std::vector<GpuSample> samples, double power_limit_w);

class GpuMonitor {
 public:
  // Samples CUDA device `cuda_device` (-1: the current one) every period_ms from a thread of its
  // own, if NVML loads and finds the device; otherwise available() is false and why() says why.
  explicit GpuMonitor(int cuda_device, int period_ms = 20);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  double power_limit_w() const { return limit_w_; }  // 0: not known
  // Whether power samples are instant readings (else the driver's trailing 1-s average,
  // which lags a short section by up to a second).
  bool instant_power() const { return instant_; }
  // A mark for since(): the number of samples taken so far.
  size_t mark() const;
  // The samples taken after `mark`.
  GpuWindow since(size_t mark) const;

 private:
  void run(int period_ms);

  struct Nvml;
  Nvml* nvml_ = nullptr;
  void* device_ = nullptr;
  bool available_ = false;
  std::string why_;
  double limit_w_ = 0;
  bool instant_ = false;
  mutable std::mutex mu_;
  std::vector<GpuSample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tandem::cuda
