// RequestHandle: a mutex-protected event queue between the engine thread (producer) and one
// consumer. The notifier runs outside the lock so a consumer may drain from inside it.
#include "engine/request.h"

namespace tandem::engine {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

void RequestHandle::push(Event e) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    if (e.kind == Event::Kind::kFinish) ++finishes_seen_;
    q_.push_back(std::move(e));
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void RequestHandle::push_many(std::vector<Event>& events) {
  if (events.empty()) return;
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    for (auto& e : events) {
      if (e.kind == Event::Kind::kFinish) ++finishes_seen_;
      q_.push_back(std::move(e));
    }
    notify = notify_;
  }
  events.clear();
  cv_.notify_all();
  if (notify) notify();
}

bool RequestHandle::next(Event& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !q_.empty(); })) return false;
  out = std::move(q_.front());
  q_.pop_front();
  return true;
}

size_t RequestHandle::drain(std::vector<Event>& out) {
  std::lock_guard lock(mu_);
  const size_t n = q_.size();
  for (auto& e : q_) out.push_back(std::move(e));
  q_.clear();
  return n;
}

void RequestHandle::set_notifier(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  notify_ = std::move(fn);
}

bool RequestHandle::finished() const {
  std::lock_guard lock(mu_);
  return finishes_seen_ >= n_;
}

}  // namespace tandem::engine
