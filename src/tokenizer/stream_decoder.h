#pragma once
// Incremental detokenizer: feed ids one at a time, get the text that is now final.
// It never emits broken UTF-8 and never holds back a complete character: the only bytes
// kept are a trailing sequence that more bytes could still complete. The concatenation of
// every push() and the final flush() equals Tokenizer::decode of all the ids.
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tandem::tok {

class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> t, bool skip_special = false);
  std::string push(TokenId id);
  std::string flush();  // whatever is held back, invalid bytes as U+FFFD
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes of an incomplete character
};

}  // namespace tandem::tok
