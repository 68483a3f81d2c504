// The bounded store of Responses API responses, and the runner of background responses.
#include <chrono>

#include "server/responses.h"

namespace tandem::server {

void ResponseStore::put(const std::string& id, Entry e) {
  Slot s{id, std::move(e), 0};
  s.bytes = dump(s.e.response).size() + dump(s.e.conversation).size() + dump(s.e.input).size();
  std::lock_guard lock(mu_);
  if (erased_.count(id)) return;
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
  }
  bytes_ += s.bytes;
  lru_.push_front(std::move(s));
  index_[id] = lru_.begin();
  evict();
}

void ResponseStore::evict() {
  // The newest entry stays even when it alone passes the byte limit.
  while (lru_.size() > 1 && (lru_.size() > limits_.max_entries || bytes_ > limits_.max_bytes)) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->e;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  erased_.insert(id);
  erased_order_.push_back(id);
  if (erased_order_.size() > limits_.max_entries) {
    erased_.erase(erased_order_.front());
    erased_order_.pop_front();
  }
  return true;
}

std::optional<json> ResponseStore::find_item(const std::string& item_id) {
  std::lock_guard lock(mu_);
  for (auto& s : lru_)
    for (auto& item : s.e.conversation)
      if (item.is_object() && item.value("id", std::string()) == item_id) return item;
  return std::nullopt;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

BackgroundRuns::~BackgroundRuns() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& j : jobs_) j->g->cancel();  // jobs never taken in by the thread
}

std::function<void()> BackgroundRuns::notifier() {
  return [this] {
    {
      std::lock_guard lock(mu_);
      wake_ = true;
    }
    cv_.notify_one();
  };
}

void BackgroundRuns::run(std::unique_ptr<Generation> g, std::unique_ptr<Formatter> f,
                         std::shared_ptr<std::atomic<bool>> cancel) {
  auto job = std::make_unique<Job>();
  job->g = std::move(g);
  job->f = std::move(f);
  job->cancel = std::move(cancel);
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    wake_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

void BackgroundRuns::loop() {
  // The jobs are polled without mu_ held: the engine calls the notifier (which takes mu_)
  // while the generations call into the engine.
  std::vector<std::unique_ptr<Job>> mine;
  std::vector<ChoiceDelta> deltas;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // A cancelled generation stops notifying; the timeout picks up its last events.
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return wake_ || stop_; });
      wake_ = false;
      if (stop_) break;
      for (auto& j : jobs_) mine.push_back(std::move(j));
      jobs_.clear();
    }
    for (size_t i = 0; i < mine.size();) {
      Job& j = *mine[i];
      if (!j.cancelled && j.cancel && j.cancel->load()) {
        j.cancelled = true;
        j.g->cancel();
      }
      deltas.clear();
      bool done = j.g->poll(deltas);
      for (auto& d : deltas) j.f->delta(d);
      if (!done) {
        ++i;
        continue;
      }
      if (!j.g->error().empty())
        j.f->error_body(j.g->error());  // records the failure
      else
        j.f->finish(j.g->totals());
      mine.erase(mine.begin() + long(i));
    }
  }
  for (auto& j : mine) j->g->cancel();
}

}  // namespace tandem::server
