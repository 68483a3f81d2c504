#include "backend/cuda/check.cuh"

#include "core/error.h"

namespace tandem::cuda {
void cuda_fail(const char* expr, const char* what, const char* file, int line) {
  fail(ErrorKind::kInternal, "{} failed: {} ({}:{})", expr, what, file, line);
}
}  // namespace tandem::cuda
