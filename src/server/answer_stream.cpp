#include "server/answer_stream.h"

namespace tandem::server {

AnswerStream::AnswerStream(std::shared_ptr<AnswerRun> run, uint64_t from, std::string prefix,
                           const Notify& notify)
    : run_(std::move(run)), from_(from), prefix_(std::move(prefix)) {
  token_ = run_->subscribe(notify);
}

AnswerStream::~AnswerStream() {
  close();
}

bool AnswerStream::poll(std::string& out) {
  out += prefix_;
  prefix_.clear();
  return run_->read(from_, out);
}

void AnswerStream::close() {
  if (token_) run_->unsubscribe(token_);
  token_ = 0;
}

}  // namespace tandem::server
