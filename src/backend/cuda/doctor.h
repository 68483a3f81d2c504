#pragma once
// `tandem doctor` on CUDA: describe the GPU and prove a kernel and a cuBLASLt GEMM run
// correctly. Host-only header.
#include <string>
#include <vector>

namespace tandem::cuda {

struct GpuInfo {
  std::string name;
  int major = 0, minor = 0, sms = 0;
  size_t l2_bytes = 0, total_bytes = 0;
};

struct DoctorFacts {
  int driver_version = 0, runtime_version = 0;
  size_t cublaslt_version = 0;
  std::string device_error;  // non-empty: no usable device
  std::vector<GpuInfo> gpus;
  size_t free_bytes = 0;
  double kernel_max_err = -1;  // y = 3x - 0.5 on random x, n = 100003
  double gemm_rel_err = -1;    // bf16 GEMM 200x136x264 vs fp64 host
  int gemm_algos = 0;
};

// Device part (doctor.cu): fills facts; throws tandem::Error on a failed CUDA call.
void collect_doctor_facts(DoctorFacts& f);

struct DoctorReport {
  bool ok = false;
  std::string text;  // human-readable lines
};

DoctorReport run_doctor();  // never throws; failures are in the report

}  // namespace tandem::cuda
