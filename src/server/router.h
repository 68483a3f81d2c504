#pragma once
// Routes of the HTTP APIs, without any networking: the transport (http_server.cpp) hands in
// a parsed request and sends back what comes out. The routes live in a RouteTable filled by
// the route files (routes_*.cpp, declared in routes.h); generation routes return a started
// Generation plus its Formatter, which the transport drives as engine events arrive.
#include <string>

#include "server/context.h"
#include "server/formatter.h"
#include "server/generation.h"
#include "server/http_message.h"
#include "server/route_table.h"

namespace tandem::server {

class Router {
 public:
  // Fills the table with every route of the server.
  explicit Router(ServerContext& ctx);
  // Never throws: every failure becomes an error response in the route's API shape. `notify`
  // is handed to a generation and called on the engine thread when it has new events.
  HttpResponse handle(const HttpRequest& req, Notify notify);

  // The final body of a non-streamed generation (the error shape if the engine failed).
  static void finish_body(HttpResponse& r);

  const RouteTable& table() const { return table_; }
  RouteTable& table() { return table_; }

 private:
  ServerContext& ctx_;
  RouteTable table_;
};

}  // namespace tandem::server
