#pragma once
// A few persistent threads for the step loop's per-row work (sampling 152k-entry logits
// rows is the one engine phase that grows with the batch). run(n, fn) calls fn(i) for
// every i in [0, n) across the workers and the calling thread, and returns when all are
// done; the first exception thrown by fn is rethrown on the caller.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::engine {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // total threads including the caller; <= 1: inline
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  void run(int n, const std::function<void(int)>& fn);

 private:
  void work();  // claims ranges of indices until none are left
  void loop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int n_ = 0, next_ = 0, chunk_ = 1, active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace tandem::engine
