#include "backend/cuda/gpu_monitor.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace tandem::cuda {

std::string GpuWindow::describe() const {
  if (samples == 0) return "";
  std::string s = fmt::format("SM {} MHz ({}-{}), {:.0f} W (max {:.0f})", sm_mhz_p50, sm_mhz_min,
                              sm_mhz_max, power_w_p50, power_w_max);
  if (power_limit_w > 0) s += fmt::format(" of {:.0f} W", power_limit_w);
  if (power_cap_share > 0) s += fmt::format(", power-capped {:.0f}%", 100 * power_cap_share);
  if (thermal_share > 0) s += fmt::format(", thermal/hw slowdown {:.0f}%", 100 * thermal_share);
  return s;
}

GpuWindow summarize_gpu_samples(std::vector<GpuSample> samples, double power_limit_w) {
  GpuWindow w;
  w.power_limit_w = power_limit_w;
  w.samples = int(samples.size());
  if (samples.empty()) return w;
  std::vector<unsigned> mhz;
  std::vector<double> watts;
  int capped = 0, thermal = 0;
  for (const GpuSample& s : samples) {
    mhz.push_back(s.sm_mhz);
    watts.push_back(s.power_w);
    if (s.reasons & kGpuReasonPowerCap) ++capped;
    if (s.reasons &
        (kGpuReasonHwSlowdown | kGpuReasonSwThermal | kGpuReasonHwThermal | kGpuReasonHwPowerBrake))
      ++thermal;
  }
  std::sort(mhz.begin(), mhz.end());
  std::sort(watts.begin(), watts.end());
  w.sm_mhz_min = mhz.front();
  w.sm_mhz_max = mhz.back();
  w.sm_mhz_p50 = mhz[mhz.size() / 2];
  w.power_w_p50 = watts[watts.size() / 2];
  w.power_w_max = watts.back();
  w.power_cap_share = double(capped) / double(samples.size());
  w.thermal_share = double(thermal) / double(samples.size());
  return w;
}

// nvmlFieldValue_t of the NVML C API (a field query and its answer).
struct NvmlFieldValue {
  uint32_t field_id = 0, scope_id = 0;
  int64_t timestamp = 0, latency_us = 0;
  int value_type = 0, rc = 0;
  union {
    double d;
    unsigned u;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value = {};
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t layout");
constexpr uint32_t kNvmlFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, milliwatts

// The NVML entry points used here, with the C API's types reduced to what they are (int
// results, an opaque device handle).
struct GpuMonitor::Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*by_pci)(const char*, void**) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;  // type 1: the SM clock
  int (*power)(void*, unsigned*) = nullptr;       // milliwatts
  int (*limit)(void*, unsigned*) = nullptr;       // milliwatts
  int (*reasons)(void*, unsigned long long*) = nullptr;
  int (*fields)(void*, int, NvmlFieldValue*) = nullptr;
  bool initialised = false;

  // The board's power now (the instant field, where the driver has it), in watts; < 0: none.
  double instant_w(void* dev) const {
    if (!fields) return -1;
    NvmlFieldValue f;
    f.field_id = kNvmlFieldPowerInstant;
    if (fields(dev, 1, &f) != 0 || f.rc != 0) return -1;
    switch (f.value_type) {
      case 0:
        return f.value.d / 1000.0;
      case 1:
        return f.value.u / 1000.0;
      case 2:
        return double(f.value.ul) / 1000.0;
      case 3:
        return double(f.value.ull) / 1000.0;
      case 4:
        return double(f.value.sll) / 1000.0;
      case 5:
        return f.value.si / 1000.0;
      default:
        return -1;
    }
  }

  template <class F>
  bool load(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
  }
  std::string err(int rc) const {
    return error_string ? error_string(rc) : fmt::format("NVML error {}", rc);
  }
};

GpuMonitor::GpuMonitor(int cuda_device, int period_ms) {
  char bus[32] = {};
  if (cuda_device < 0 && cudaGetDevice(&cuda_device) != cudaSuccess) cuda_device = 0;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
    why_ = "no CUDA device";
    return;
  }
  auto* n = new Nvml;
  nvml_ = n;
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) {
    why_ = "libnvidia-ml.so.1 not found";
    return;
  }
  if (!n->load(n->init, "nvmlInit_v2") || !n->load(n->shutdown, "nvmlShutdown") ||
      !n->load(n->by_pci, "nvmlDeviceGetHandleByPciBusId_v2") ||
      !n->load(n->clock, "nvmlDeviceGetClockInfo") ||
      !n->load(n->power, "nvmlDeviceGetPowerUsage")) {
    why_ = "NVML lacks an entry point";
    return;
  }
  n->load(n->error_string, "nvmlErrorString");
  n->load(n->limit, "nvmlDeviceGetEnforcedPowerLimit");
  n->load(n->fields, "nvmlDeviceGetFieldValues");
  if (!n->load(n->reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    n->load(n->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (int rc = n->init(); rc != 0) {
    why_ = "nvmlInit: " + n->err(rc);
    return;
  }
  n->initialised = true;
  if (int rc = n->by_pci(bus, &device_); rc != 0) {
    why_ = fmt::format("NVML has no device at {}: {}", bus, n->err(rc));
    return;
  }
  unsigned mw = 0;
  if (n->limit && n->limit(device_, &mw) == 0) limit_w_ = mw / 1000.0;
  instant_ = n->instant_w(device_) >= 0;
  available_ = true;
  thread_ = std::thread([this, period_ms] { run(period_ms); });
}

GpuMonitor::~GpuMonitor() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (nvml_) {
    if (nvml_->initialised) nvml_->shutdown();
    if (nvml_->lib) dlclose(nvml_->lib);
    delete nvml_;
  }
}

void GpuMonitor::run(int period_ms) {
  while (!stop_) {
    GpuSample s;
    unsigned v = 0;
    if (nvml_->clock(device_, 1, &v) == 0) s.sm_mhz = v;
    if (instant_)
      s.power_w = std::max(0.0, nvml_->instant_w(device_));
    else if (nvml_->power(device_, &v) == 0)
      s.power_w = v / 1000.0;
    unsigned long long r = 0;
    if (nvml_->reasons && nvml_->reasons(device_, &r) == 0) s.reasons = r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      samples_.push_back(s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
}

size_t GpuMonitor::mark() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_.size();
}

GpuWindow GpuMonitor::since(size_t mark) const {
  std::vector<GpuSample> part;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mark < samples_.size()) part.assign(samples_.begin() + long(mark), samples_.end());
  }
  return summarize_gpu_samples(std::move(part), limit_w_);
}

}  // namespace tandem::cuda
