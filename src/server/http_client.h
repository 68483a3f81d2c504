#pragma once
// A small blocking HTTP/1.1 client for `tandem run` (plain sockets, no Beast): one request
// per connection, the body delivered as it arrives (chunked transfer decoded), so a
// streamed answer can be printed token by token and abandoned at any moment.
#include <atomic>
#include <functional>
#include <string>
#include <string_view>

namespace tandem::server {

struct HttpResult {
  int status = 0;
  std::string body;  // what on_data did not consume (all of it when on_data is empty)
};

// `url` is "http://host:port" (no path). `on_data` gets body bytes as they arrive and may
// return false to stop; `abort` (if set) is polled every 50 ms and closes the connection
// when true. Throws tandem::Error(kIo) when the server cannot be reached.
HttpResult http_request(const std::string& url, const std::string& method, const std::string& path,
                        const std::string& body,
                        const std::function<bool(std::string_view)>& on_data = {},
                        const std::atomic<bool>* abort = nullptr, int timeout_ms = 600000);

}  // namespace tandem::server
