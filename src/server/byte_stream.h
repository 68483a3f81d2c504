#pragma once
// A streamed response that is not one generation: the transport writes what poll() gives,
// as chunks, whenever the notifier the route handed to the stream fires (it may fire on any
// thread; the transport polls on the connection's strand). Used by the web page's answer
// streams (answer_stream.h), which outlive the connection.
#include <string>

namespace tandem::server {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Appends what is ready to `out`; true once the stream is complete (after its last bytes).
  virtual bool poll(std::string& out) = 0;
  // The client went away or the server stops: no more notifications.
  virtual void close() = 0;
};

}  // namespace tandem::server
