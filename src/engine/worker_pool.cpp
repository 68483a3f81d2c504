#include "engine/worker_pool.h"

#include <algorithm>

namespace tandem::engine {

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkerPool::work() {
  for (;;) {
    int begin, end;
    const std::function<void(int)>* fn;
    {
      std::lock_guard lock(mu_);
      if (next_ >= n_) return;
      begin = next_;
      end = std::min(n_, next_ + chunk_);
      next_ = end;
      fn = fn_;
    }
    try {
      for (int i = begin; i < end; ++i) (*fn)(i);
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void WorkerPool::loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    work();
    {
      std::lock_guard lock(mu_);
      --active_;
    }
    done_cv_.notify_one();
  }
}

void WorkerPool::run(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    chunk_ = std::max(1, n / (4 * size()));  // a few claims per thread: balance vs. locking
    error_ = nullptr;
    ++generation_;
  }
  cv_.notify_all();
  work();
  std::exception_ptr err;
  {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return active_ == 0; });
    fn_ = nullptr;
    n_ = 0;
    err = error_;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace tandem::engine
