#include "server/reasoning_parser.h"

#include "server/stop_matcher.h"

namespace tandem::server {
namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
size_t lead_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}
size_t trail_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[s.size() - 1 - i])) ++i;
  return i;
}
}  // namespace

ReasoningParser::ReasoningParser(bool in_think)
    : state_(in_think ? State::kThink : State::kStart), strip_lead_(in_think) {}

SplitText ReasoningParser::push(std::string_view piece) {
  SplitText out;
  buf_.append(piece);
  run(out, false);
  return out;
}

SplitText ReasoningParser::finish() {
  SplitText out;
  run(out, true);
  return out;
}

void ReasoningParser::run(SplitText& out, bool final) {
  for (;;) {
    if (state_ == State::kStart) {
      std::string_view rest = std::string_view(buf_).substr(lead_ws(buf_));
      if (rest.substr(0, kOpen.size()) == kOpen) {
        buf_.erase(0, buf_.size() - rest.size() + kOpen.size());
        state_ = State::kThink;
        strip_lead_ = true;
        continue;
      }
      // Could still become `<think>`: wait for more text.
      if (!final && kOpen.substr(0, rest.size()) == rest) return;
      state_ = State::kContent;
      continue;
    }
    if (strip_lead_) {
      size_t n = lead_ws(buf_);
      buf_.erase(0, n);
      if (buf_.empty() && !final) return;
      strip_lead_ = false;
    }
    if (state_ == State::kContent) {
      out.content += buf_;
      buf_.clear();
      return;
    }
    // kThink
    size_t close = buf_.find(kClose);
    if (close != std::string::npos) {
      std::string_view r = std::string_view(buf_).substr(0, close);
      out.reasoning.append(r.substr(0, r.size() - trail_ws(r)));
      buf_.erase(0, close + kClose.size());
      state_ = State::kContent;
      closed_ = true;
      strip_lead_ = true;
      continue;
    }
    if (final) {
      std::string_view r = buf_;
      out.reasoning.append(r.substr(0, r.size() - trail_ws(r)));
      buf_.clear();
      return;
    }
    // Hold back a partial `</think>` and trailing whitespace (dropped if the block closes).
    size_t keep = partial_suffix(buf_, kClose);
    std::string_view r = std::string_view(buf_).substr(0, buf_.size() - keep);
    size_t emit = r.size() - trail_ws(r);
    out.reasoning.append(buf_, 0, emit);
    buf_.erase(0, emit);
    return;
  }
}

}  // namespace tandem::server
