#include "engine/mask_jobs.h"

namespace tandem::engine {

MaskJobs::MaskJobs(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { loop(); });
}

MaskJobs::~MaskJobs() {
  wait();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

bool MaskJobs::claim(int& i) {
  if (next_ >= n_) return false;
  i = next_++;
  ++running_;
  return true;
}

void MaskJobs::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || next_ < n_; });
    if (stop_) return;
    int i;
    while (claim(i)) {
      lock.unlock();
      fn_(i);
      lock.lock();
      --running_;
    }
    done_cv_.notify_all();
  }
}

void MaskJobs::start(int n, std::function<void(int)> fn) {
  wait();
  if (n <= 0) return;
  {
    std::lock_guard lock(mu_);
    fn_ = std::move(fn);
    n_ = n;
    next_ = 0;
    pending_ = true;
  }
  cv_.notify_all();
}

void MaskJobs::wait() {
  if (!pending_) return;
  std::unique_lock lock(mu_);
  int i;
  while (claim(i)) {
    lock.unlock();
    fn_(i);
    lock.lock();
    --running_;
  }
  done_cv_.wait(lock, [&] { return running_ == 0; });
  n_ = next_ = 0;
  pending_ = false;
}

}  // namespace tandem::engine
