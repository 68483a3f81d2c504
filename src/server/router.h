#pragma once
// Routes of the OpenAI- and Ollama-compatible APIs, without any networking: the transport
// (http_server.cpp) hands in a parsed request and sends back what comes out. Generation
// routes return a started Generation plus its Formatter, which the transport drives as
// engine events arrive.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/context.h"
#include "server/formatter.h"
#include "server/generation.h"

namespace tandem::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", "HEAD", ...
  std::string target;  // path and query
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Set for a generation: the transport polls `gen` whenever `notify` fired, and writes
  // `fmt`'s bytes (streamed when `stream`, else one body at the end).
  std::unique_ptr<Generation> gen;
  std::unique_ptr<Formatter> fmt;
  bool stream = false;
  bool openai = true;  // error shape for failures after the start
};

class Router {
 public:
  explicit Router(ServerContext& ctx) : ctx_(ctx) {}
  // Never throws: every failure becomes an error response in the API's shape. `notify` is
  // handed to a generation and called on the engine thread when it has new events.
  HttpResponse handle(const HttpRequest& req, std::function<void()> notify);

  // The final body of a non-streamed generation (the error shape if the engine failed).
  static void finish_body(HttpResponse& r);

 private:
  HttpResponse generate(const HttpRequest& req, Api api, std::function<void()> notify);
  HttpResponse models(const std::string& id);
  HttpResponse tags();
  HttpResponse show(const HttpRequest& req);
  HttpResponse ps();
  json details() const;

  ServerContext& ctx_;
};

}  // namespace tandem::server
