#include "tokenizer/stream_decoder.h"

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> t, bool skip_special)
    : tok_(std::move(t)), skip_special_(skip_special) {
  if (!tok_) fail(ErrorKind::kInvalidArgument, "StreamDecoder needs a tokenizer");
}

std::string StreamDecoder::push(TokenId id) {
  if (skip_special_ && tok_->is_special(id)) return {};
  pending_ += tok_->token_bytes(id);
  std::string out;
  size_t used = append_final_utf8(pending_, out);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tandem::tok
