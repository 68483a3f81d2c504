#pragma once
// A fixed pool of worker threads for the CPU kernels. parallel_for cuts [0, n) into a few
// chunks per thread that every participant (the caller included) claims from one atomic
// ticket. A worker that the OS has not scheduled yet therefore never stalls the call: the
// caller takes its chunks. Workers spin briefly before sleeping, so the many short calls
// of one decode step rarely pay a wake-up.
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
  // fn(begin, end, participant) over disjoint ranges covering [0, n) whose bounds are
  // multiples of `grain` (except the end). Not reentrant: one call at a time.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);
  // Claims and runs chunks of the job of generation `gen` until none are left.
  void run_chunks(uint32_t gen, int participant);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // (generation << 32) | next chunk to claim.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};
  // The current job; read only by holders of a chunk ticket of its generation.
  std::atomic<const std::function<void(int64_t, int64_t, int)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, chunk_{1}, chunks_{0};
};

}  // namespace tandem::cpu
