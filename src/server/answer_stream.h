#pragma once
// One subscriber of an answer (answer_hub.h) as a streamed HTTP response: Server-Sent
// Events from a given event number on, live until the answer's `done` event. Closing it
// (the page went away) only unsubscribes: the answer goes on.
#include <memory>
#include <string>

#include "server/answer_hub.h"
#include "server/byte_stream.h"
#include "server/route_table.h"

namespace tandem::server {

class AnswerStream : public ByteStream {
 public:
  // `prefix`: events sent before the answer's own (the start event of a new answer).
  AnswerStream(std::shared_ptr<AnswerRun> run, uint64_t from, std::string prefix,
               const Notify& notify);
  ~AnswerStream() override;
  bool poll(std::string& out) override;
  void close() override;

 private:
  std::shared_ptr<AnswerRun> run_;
  uint64_t from_;
  std::string prefix_;
  int token_ = 0;
};

}  // namespace tandem::server
