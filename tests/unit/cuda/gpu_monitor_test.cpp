// The GPU monitor's summary arithmetic, and that a monitor without a GPU (CI) says why and
// stays empty instead of failing.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backend/cuda/gpu_monitor.h"

namespace tandem::cuda {
namespace {

TEST(GpuMonitor, SummaryOfSamples) {
  const std::vector<GpuSample> s = {{1980, 402.5, 0},
                                    {1710, 693.0, kGpuReasonPowerCap},
                                    {1545, 697.0, kGpuReasonPowerCap | kGpuReasonHwThermal},
                                    {1965, 650.0, 0},
                                    {1700, 690.0, kGpuReasonPowerCap}};
  const GpuWindow w = summarize_gpu_samples(s, 700.0);
  EXPECT_EQ(w.samples, 5);
  EXPECT_EQ(w.sm_mhz_min, 1545u);
  EXPECT_EQ(w.sm_mhz_p50, 1710u);
  EXPECT_EQ(w.sm_mhz_max, 1980u);
  EXPECT_DOUBLE_EQ(w.power_w_p50, 690.0);
  EXPECT_DOUBLE_EQ(w.power_w_max, 697.0);
  EXPECT_DOUBLE_EQ(w.power_cap_share, 0.6);
  EXPECT_DOUBLE_EQ(w.thermal_share, 0.2);
  EXPECT_EQ(w.describe(),
            "SM 1710 MHz (1545-1980), 690 W (max 697) of 700 W, power-capped 60%, "
            "thermal/hw slowdown 20%");
  // Unthrottled, limit unknown: the clauses that do not apply are left out.
  const GpuWindow q = summarize_gpu_samples({{1980, 300.0, 0}, {1965, 310.0, 0}}, 0.0);
  EXPECT_EQ(q.sm_mhz_p50, 1980u);
  EXPECT_EQ(q.describe(), "SM 1980 MHz (1965-1980), 310 W (max 310)");
}

TEST(GpuMonitor, NoSamplesIsEmpty) {
  const GpuWindow w = summarize_gpu_samples({}, 700.0);
  EXPECT_EQ(w.samples, 0);
  EXPECT_EQ(w.describe(), "");
}

// Without a GPU or NVML (the CI machine) the monitor reports why and gives empty windows;
// with them it samples.
TEST(GpuMonitor, ReportsWhyOrSamples) {
  GpuMonitor m(-1, 5);
  const size_t mark = m.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const GpuWindow w = m.since(mark);
  if (!m.available()) {
    EXPECT_FALSE(m.why().empty());
    EXPECT_EQ(w.samples, 0);
  } else {
    EXPECT_GT(w.samples, 2);
    EXPECT_GT(w.sm_mhz_p50, 0u);
  }
}

}  // namespace
}  // namespace tandem::cuda
