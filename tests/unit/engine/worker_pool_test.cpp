#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "engine/worker_pool.h"

namespace tandem::engine {
namespace {

TEST(WorkerPool, RunsEveryIndexOnceAcrossManyRounds) {
  for (int threads : {1, 2, 5}) {
    WorkerPool pool(threads);
    EXPECT_EQ(pool.size(), std::max(threads, 1));
    for (int round = 0; round < 200; ++round) {
      const int n = (round * 37) % 300;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run(n, [&](int i) { ++hits[size_t(i)]; });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << round << " " << i;
    }
  }
}

TEST(WorkerPool, RethrowsTheFirstErrorAndStaysUsable) {
  WorkerPool pool(3);
  EXPECT_THROW(pool.run(50,
                        [](int i) {
                          if (i == 17) throw std::runtime_error("row 17");
                        }),
               std::runtime_error);
  std::atomic<int> sum{0};
  pool.run(10, [&](int i) { sum += i; });
  EXPECT_EQ(sum.load(), 45);
}

}  // namespace
}  // namespace tandem::engine
