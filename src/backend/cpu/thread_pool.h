#pragma once
// A fixed pool of worker threads for the CPU kernels. parallel_for splits [0, n) into one
// contiguous range per thread and returns when all are done. Workers spin briefly before
// sleeping, so the many small calls of one decode step do not pay a wake-up each.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0 = all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end, thread_index) over a split of [0, n) into ranges whose bounds are
  // multiples of `grain` (except the last). Runs inline when n <= grain or one thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  int parts_ = 1;
};

}  // namespace tandem::cpu
