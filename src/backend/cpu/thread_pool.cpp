#include "backend/cpu/thread_pool.h"

#include <sched.h>

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
constexpr int kSpin = 4000;  // pauses before a worker sleeps (tens of microseconds)
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    ticket_.fetch_add(uint64_t(1) << 32);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t gen, int participant) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (uint32_t(t >> 32) != gen) return;
    // Read the job before claiming: a successful claim proves it was still this job's.
    const auto* fn = fn_.load(std::memory_order_acquire);
    const int64_t n = n_.load(std::memory_order_acquire);
    const int64_t chunk = chunk_.load(std::memory_order_acquire);
    const int64_t chunks = chunks_.load(std::memory_order_acquire);
    const int64_t c = int64_t(t & 0xffffffffu);
    if (c >= chunks) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    (*fn)(std::min(n, c * chunk), std::min(n, (c + 1) * chunk), participant);
    done_.fetch_add(1, std::memory_order_acq_rel);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  if (units <= 1 || workers_.empty()) {
    fn(0, n, 0);
    return;
  }
  // A few chunks per participant so that a late thread finds work left to share.
  const int64_t chunks = std::min<int64_t>(units, int64_t(size()) * 4);
  const int64_t chunk = (units + chunks - 1) / chunks * grain;
  const int64_t real_chunks = (n + chunk - 1) / chunk;
  // Close the last job's ticket before rewriting the fields. A participant may have read
  // that ticket (all its chunks claimed) just before we write the new fields: if it then
  // saw the new, larger chunk count, its claim on the unchanged old ticket would succeed and
  // run a chunk that does not exist, counted in the new job's done_ (a chunk run twice, and
  // this call returning while another still ran: the serve SIGSEGV in CPU attention).
  // With the ticket moved to a closed generation first, that claim fails. The fields are
  // stored with release and read with acquire, so whoever sees a new field also sees the
  // closed ticket; generations go up by 2 (closed, then open) so that a worker which woke
  // on the closed one still sees the open one as new.
  const uint32_t gen = uint32_t(ticket_.load() >> 32) + 2;
  ticket_.store((uint64_t(gen - 1) << 32) | 0xffffffffu, std::memory_order_seq_cst);
  fn_.store(&fn, std::memory_order_release);
  n_.store(n, std::memory_order_release);
  chunk_.store(chunk, std::memory_order_release);
  chunks_.store(real_chunks, std::memory_order_release);
  done_.store(0, std::memory_order_release);
  ticket_.store(uint64_t(gen) << 32, std::memory_order_seq_cst);  // publishes the job
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
  run_chunks(gen, 0);
  for (int spins = 0; done_.load(std::memory_order_acquire) < real_chunks; ++spins) {
    if (spins < kSpin)
      relax();
    else
      sched_yield();  // the chunk's owner may share our core
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    auto gen_now = [&] { return uint32_t(ticket_.load(std::memory_order_acquire) >> 32); };
    for (int i = 0; i < kSpin && gen_now() == seen; ++i) relax();
    if (gen_now() == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lk, [&] { return gen_now() != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_.load()) return;
    seen = gen_now();
    run_chunks(seen, index);
  }
}

}  // namespace tandem::cpu
