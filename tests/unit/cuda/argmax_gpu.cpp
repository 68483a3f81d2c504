// Row-wise argmax on the GPU against a host scan: random rows at the real vocabulary size and
// an odd one, with planted ties (the first index must win) and NaNs (never chosen).
#include <cmath>

#include "backend/cuda/argmax.cuh"
#include "gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

TEST(CudaKernels, ArgmaxRowsMatchesHostScan) {
  Rng rng(test_seed() + 91);
  for (int vocab : {151936, 1001}) {
    const int rows = 37;
    std::vector<float> l(size_t(rows) * vocab);
    for (auto& x : l) x = float(rng.normal() * 3.0);
    for (int r = 0; r < rows; ++r) {
      float* row = l.data() + size_t(r) * vocab;
      if (r % 3 == 0) {  // a tie between two far-apart ids: the smaller id must win
        const int a = int(rng.next() % (vocab / 2)), b = vocab / 2 + int(rng.next() % (vocab / 2));
        row[a] = row[b] = 100.0f + r;
      }
      if (r % 5 == 0) row[rng.next() % vocab] = NAN;
    }
    std::vector<int32_t> want(rows);
    for (int r = 0; r < rows; ++r) {
      const float* row = l.data() + size_t(r) * vocab;
      int bi = -1;
      for (int i = 0; i < vocab; ++i)
        if (!std::isnan(row[i]) && (bi < 0 || row[i] > row[bi])) bi = i;
      want[r] = bi;
    }
    float* dl = nullptr;
    int32_t* dout = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&dl, l.size() * sizeof(float)));
    TANDEM_CUDA_CHECK(cudaMalloc(&dout, rows * sizeof(int32_t)));
    TANDEM_CUDA_CHECK(cudaMemcpy(dl, l.data(), l.size() * sizeof(float), cudaMemcpyHostToDevice));
    TANDEM_CUDA_CHECK(cudaMemset(dout, 0xff, rows * sizeof(int32_t)));  // poison
    argmax_rows(dl, rows, vocab, dout, nullptr);
    std::vector<int32_t> got(rows);
    TANDEM_CUDA_CHECK(cudaMemcpy(got.data(), dout, rows * sizeof(int32_t), cudaMemcpyDeviceToHost));
    cudaFree(dl);
    cudaFree(dout);
    EXPECT_EQ(got, want) << "vocab " << vocab;
  }
}

}  // namespace
}  // namespace tandem::cuda::test
