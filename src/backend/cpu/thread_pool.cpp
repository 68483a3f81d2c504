#include "backend/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::cpu {

namespace {
inline void relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_++;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = (n + grain - 1) / grain;
  int parts = int(std::min<int64_t>(chunks, size()));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  auto range = [&](int p, int64_t& b, int64_t& e) {
    b = std::min(n, chunks * p / parts * grain);
    e = std::min(n, chunks * (p + 1) / parts * grain);
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    n_ = n;
    grain_ = grain;
    parts_ = parts;
    pending_.store(parts - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  int64_t b, e;
  range(0, b, e);
  fn(b, e, 0);
  while (pending_.load(std::memory_order_acquire) > 0) relax();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (a decode step issues many short jobs back to back), then sleep.
    for (int i = 0; i < 20000 && generation_.load(std::memory_order_acquire) == seen; ++i) relax();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return generation_.load() != seen; });
    }
    int parts;
    int64_t n, grain;
    const std::function<void(int64_t, int64_t, int)>* job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
      seen = generation_.load();
      parts = parts_;
      n = n_;
      grain = grain_;
      job = job_;
    }
    if (index < parts) {
      int64_t chunks = (n + grain - 1) / grain;
      int64_t b = std::min(n, chunks * index / parts * grain);
      int64_t e = std::min(n, chunks * (index + 1) / parts * grain);
      (*job)(b, e, index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace tandem::cpu
