// Engine: EngineCore on its own thread. Submitters only touch the inbox (under one mutex);
// the engine thread moves the inbox into the core between steps, so the core itself is
// single-threaded.
#include "engine/engine.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "engine/engine_core.h"

namespace tandem::engine {

struct Engine::Impl {
  std::unique_ptr<model::Runner> runner;
  std::unique_ptr<EngineCore> core;

  std::mutex mu;
  std::condition_variable cv;
  struct Pending {
    RequestId id;
    Request req;
    std::shared_ptr<RequestHandle> handle;
  };
  std::vector<Pending> inbox;      // guarded by mu
  std::vector<RequestId> cancels;  // guarded by mu
  bool stop = false;               // guarded by mu
  std::atomic<RequestId> next_id{1};

  mutable std::mutex stats_mu;
  EngineStats stats;  // guarded by stats_mu, as are `moving` and the failure counts
  int moving = 0;     // requests taken from the inbox that `stats` does not count yet
  uint64_t failed_steps = 0;
  int failing_steps = 0;
  std::string last_error;

  std::thread thread;

  void loop();
  void publish_stats() {
    EngineStats s = core->stats();
    std::lock_guard lock(stats_mu);
    stats = s;
    moving = 0;
  }
};

void Engine::Impl::loop() {
  std::vector<Pending> in;
  std::vector<RequestId> cn;
  for (;;) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop || !inbox.empty() || !cancels.empty() || core->has_work(); });
      if (stop) break;
      in.swap(inbox);
      cn.swap(cancels);
      std::lock_guard slock(stats_mu);
      moving = int(in.size());
    }
    for (auto& p : in) core->add(p.id, std::move(p.req), std::move(p.handle));
    in.clear();
    for (RequestId id : cn) core->cancel(id);
    cn.clear();
    publish_stats();  // the new requests count as waiting during the step
    try {
      const uint64_t before = core->steps();
      core->step();
      // A step ran (the loop also wakes for cancels alone): the run of failures is over. This
      // thread is the only writer, so it may read the count unlocked, and takes the lock only
      // in the rare step that ends a run.
      if (failing_steps != 0 && core->steps() != before) {
        std::lock_guard slock(stats_mu);
        failing_steps = 0;
      }
    } catch (const std::exception& e) {
      spdlog::error("engine step failed: {}", e.what());
      {
        std::lock_guard slock(stats_mu);  // counted before the failed requests hear of it
        ++failed_steps;
        ++failing_steps;
        last_error = e.what();
      }
      core->fail_step(e.what());
    }
    publish_stats();
  }
  // Shutdown: requests still in the inbox never started; end them like the rest.
  for (auto& p : inbox) core->add(p.id, std::move(p.req), std::move(p.handle));
  inbox.clear();
  core->finish_all(FinishReason::kCancelled, {});
  publish_stats();
}

Engine::Engine(std::unique_ptr<model::Runner> runner, EngineOptions opt)
    : impl_(std::make_unique<Impl>()) {
  if (!runner) fail(ErrorKind::kInvalidArgument, "engine needs a runner");
  impl_->runner = std::move(runner);
  impl_->core = std::make_unique<EngineCore>(*impl_->runner, opt);
  impl_->publish_stats();
  impl_->thread = std::thread([this] { impl_->loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::shared_ptr<RequestHandle> Engine::submit(Request r) {
  impl_->core->validate(r);  // reads only constants of the core: safe from any thread
  const RequestId id = impl_->next_id.fetch_add(1);
  auto handle = std::make_shared<RequestHandle>(id);
  {
    std::lock_guard hl(handle->mu_);
    handle->n_ = r.n;
  }
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stop) fail(ErrorKind::kResource, "engine is shutting down");
    impl_->inbox.push_back({id, std::move(r), handle});
  }
  impl_->cv.notify_one();
  return handle;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_one();
}

// The last step's snapshot, plus the requests submitted since that it does not count yet
// (still in the inbox, or being moved into the core): they are waiting too.
EngineStats Engine::stats() const {
  std::unique_lock lock(impl_->mu);
  std::lock_guard slock(impl_->stats_mu);
  EngineStats s = impl_->stats;
  s.waiting += int(impl_->inbox.size()) + impl_->moving;
  s.failed_steps = impl_->failed_steps;
  s.failing_steps = impl_->failing_steps;
  s.last_error = impl_->last_error;
  return s;
}

int Engine::max_model_len() const {
  return impl_->core->max_model_len();
}
int Engine::vocab_size() const {
  return impl_->core->vocab_size();
}

}  // namespace tandem::engine
