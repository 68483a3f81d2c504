#pragma once
// Token masks of a step's constrained rows (src/structured), computed on threads of their
// own while the forward pass runs: start() hands the rows out and returns at once; wait()
// (from the sampler, or from the runner right before its sampler reads the masks) helps
// with what is left and returns when every row is done. Each job catches its own failure:
// one sequence whose constraint fails does not stop the others.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::engine {

class MaskJobs {
 public:
  explicit MaskJobs(int threads);  // 0: every job runs in wait()
  ~MaskJobs();
  MaskJobs(const MaskJobs&) = delete;
  MaskJobs& operator=(const MaskJobs&) = delete;

  // Runs fn(i) for i in [0, n); `fn` must not throw and must outlive the next wait().
  void start(int n, std::function<void(int)> fn);
  void wait();
  bool busy() const { return pending_; }

 private:
  void loop();
  bool claim(int& i);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::function<void(int)> fn_;
  int n_ = 0, next_ = 0, running_ = 0;
  bool stop_ = false, pending_ = false;
};

}  // namespace tandem::engine
