#pragma once
// Stop strings over streamed text. Text arrives in pieces (one per token, complete UTF-8);
// a stop string may span pieces, so the matcher holds back the longest tail that could
// still start one, and never releases any part of a stop string.
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Out {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string was found; `text` ends right before it
  };
  Out push(std::string_view piece);
  // End of generation without a stop: releases what was held back.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// Longest suffix of `text` that is a proper prefix of `tag` (0 if none). Shared by the
// parsers that look for tags in streamed text.
size_t partial_suffix(std::string_view text, std::string_view tag);

}  // namespace tandem::server
