#pragma once
// Routes of the HTTP APIs, without any networking: the transport (http_server.cpp) hands in
// a parsed request and sends back what comes out. The routes live in a RouteTable filled by
// the route files (routes_*.cpp, declared in routes.h); generation routes return a started
// Generation plus its Formatter, which the transport drives as engine events arrive.
//
// handle() is also where the policies that hold for every route live, read from the
// table's Access and ErrorShape so that no route can be left out of them. Every response
// carries an `x-request-id` and a request record (request_record.h) that the transport
// hands back to complete() when the response is over.
#include <string>
#include <vector>

#include "server/context.h"
#include "server/formatter.h"
#include "server/generation.h"
#include "server/http_message.h"
#include "server/request_record.h"
#include "server/route_table.h"

namespace tandem::server {

class Router {
 public:
  // Fills the table with every route of the server.
  explicit Router(ServerContext& ctx);
  // Never throws: every failure becomes an error response in the route's API shape. `notify`
  // is handed to a generation and called on the engine thread when it has new events.
  HttpResponse handle(const HttpRequest& req, Notify notify);

  // An error the transport answers itself (malformed request, body or header too large,
  // timeout, over capacity): in the shape of the API the path belongs to, with the same
  // headers and record as a routed answer. `req` holds what could be read of the request.
  HttpResponse transport_error(const HttpRequest& req, int status, const std::string& msg);

  // The transport is done with `r` (sent, or the client is gone): completes its record from
  // the generation and what was sent, and runs the completion hooks. `finish` overrides the
  // generation's finish reason ("cancelled", "timeout", "shutdown") when not null.
  void complete(HttpResponse& r, const char* finish = nullptr);
  // Runs for every completed request (request_record.h). Add hooks before serving.
  void add_completion_hook(CompletionHook hook);

  // The final body of a non-streamed generation (the error shape if the engine failed).
  static void finish_body(HttpResponse& r);
  // The API shape of a path that matched no route: OpenAI under /v1/, else Ollama.
  static ErrorShape shape_of_path(std::string_view path);

  const RouteTable& table() const { return table_; }
  RouteTable& table() { return table_; }

 private:
  // Starts the record and the headers every response carries.
  void stamp(const HttpRequest& req, const Route* route, ErrorShape shape, HttpResponse& r) const;

  ServerContext& ctx_;
  RouteTable table_;
  std::vector<CompletionHook> hooks_;
};

// The request's X-Request-Id when it is sane (1 to 128 of A-Z a-z 0-9 . _ : - ), else "".
std::string sane_request_id(std::string_view id);

}  // namespace tandem::server
