// ThreadPool under back-to-back calls of different shapes: no chunk may run twice, none may
// be skipped, and no job's function may run after its parallel_for has returned. Before the
// fix a worker could read the old job's ticket together with the next job's fields and
// claim a chunk that did not exist: the next call then ran a chunk twice and returned while
// one was still running (the `tandem serve` SIGSEGV: a pool worker inside the CPU attention
// of a call that had returned).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <thread>

#include "backend/cpu/thread_pool.h"
#include "core/rng.h"

using namespace tandem;

namespace {

struct Job {
  int64_t n = 0;
  std::atomic<bool> returned{false};
  std::atomic<uint8_t> hits[64] = {};
  std::function<void(int64_t, int64_t, int)> fn;
};

uint64_t test_seed() {
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* e = std::getenv("TANDEM_TEST_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::printf("[ cpu ] thread pool job sizes: seed %llu (TANDEM_TEST_SEED fixes it)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace

TEST(CpuThreadPool, BackToBackJobsOfChangingShapeRunEachChunkOnceAndOnlyDuringTheCall) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  // More workers than cores: a worker preempted between reading the ticket and claiming a
  // chunk is what opens the window, so oversubscribe.
  const int threads = int(std::max(8u, 2 * std::thread::hardware_concurrency()));
  cpu::ThreadPool pool(threads);
  std::atomic<int64_t> stale{0}, empty{0};
  int64_t twice = 0, missed = 0, calls = 0;
  // The window is narrow: run rounds of calls for about 2.5 s or until something is wrong
  // (without the fix this fails within a second on a 2-core machine, 10 of 10 runs).
  const auto t0 = std::chrono::steady_clock::now();
  do {
    // Jobs stay allocated to the end of the round, so a stale call is counted instead of
    // crashing.
    std::deque<Job> jobs;
    for (int j = 0; j < 50000; ++j, ++calls) {
      Job& job = jobs.emplace_back();
      // Alternate few-chunk and many-chunk jobs: a stale claim needs the next job to have
      // more chunks than the one before it.
      job.n = (j % 2 == 0) ? 2 + int64_t(rng.next() % 3) : 24 + int64_t(rng.next() % 40);
      job.fn = [&job, &stale, &empty](int64_t b, int64_t e, int) {
        if (job.returned.load(std::memory_order_acquire)) stale.fetch_add(1);
        if (b >= e) empty.fetch_add(1);
        for (int64_t i = b; i < e && i < 64; ++i) job.hits[i].fetch_add(1);
      };
      pool.parallel_for(job.n, 1, job.fn);
      job.returned.store(true, std::memory_order_release);
      for (int64_t i = 0; i < job.n; ++i) {
        const int h = job.hits[i].load();
        twice += h > 1;
        missed += h == 0;
      }
    }
    // Let any straggler finish before the round's jobs are freed.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (stale.load() == 0 && empty.load() == 0 && twice == 0 && missed == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500));
  std::printf("[ cpu ] %lld calls on %d threads\n", static_cast<long long>(calls), threads);
  EXPECT_EQ(stale.load(), 0) << "calls of a job's function after its parallel_for returned";
  EXPECT_EQ(empty.load(), 0) << "calls with an empty range (a chunk past the job's end)";
  EXPECT_EQ(twice, 0) << "indices run more than once";
  EXPECT_EQ(missed, 0) << "indices never run";
}
