#pragma once
// The HTTP/1.1 transport (Boost.Beast, C++20 coroutines, keep-alive). It parses requests,
// calls the Router and moves bytes; streaming responses are written the moment the engine
// publishes tokens. A client that disconnects has its generation cancelled at once.
// Beast and Asio are included only by http_server.cpp.
#include <memory>
#include <string>

#include "server/router.h"

namespace tandem::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 11434;  // 0 = any free port (see HttpServer::port())
  int threads = 2;   // I/O threads
  size_t max_body_bytes = 16u << 20;
  bool stop_on_signals = false;  // SIGINT/SIGTERM end run()
};

class HttpServer {
 public:
  // Binds and listens; throws tandem::Error(kIo) when the address is unusable.
  HttpServer(Router& router, HttpServerOptions opt);
  ~HttpServer();
  int port() const;
  // Serves until stop(); returns when every I/O thread has finished.
  void run();
  void stop();  // thread-safe, also from a signal-handling thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
