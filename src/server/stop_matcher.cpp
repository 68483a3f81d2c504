#include "server/stop_matcher.h"

#include <algorithm>

namespace tandem::server {

size_t partial_suffix(std::string_view text, std::string_view tag) {
  size_t max = std::min(text.size(), tag.size() - (tag.empty() ? 0 : 1));
  for (size_t len = max; len > 0; --len)
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Out StopMatcher::push(std::string_view piece) {
  Out out;
  if (stopped_) return out;
  held_.append(piece);
  if (stops_.empty()) {
    out.text.swap(held_);
    return out;
  }
  // The earliest stop wins: text after it is never sent.
  size_t first = std::string::npos;
  for (auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    out.stopped = stopped_ = true;
    held_.clear();
    return out;
  }
  size_t keep = 0;
  for (auto& s : stops_) keep = std::max(keep, partial_suffix(held_, s));
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::finish() {
  std::string s;
  if (!stopped_) s.swap(held_);
  held_.clear();
  return s;
}

}  // namespace tandem::server
