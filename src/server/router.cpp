#include "server/router.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/routes.h"

namespace tandem::server {

Router::Router(ServerContext& ctx) : ctx_(ctx) {
  add_system_routes(table_, ctx_);
  add_openai_routes(table_, ctx_);
  add_ollama_routes(table_, ctx_);
}

HttpResponse Router::handle(const HttpRequest& req, Notify notify) {
  const std::string path(req.path());
  // Before a route is known, the path says which API a client speaks.
  ErrorShape shape = path.rfind("/v1/", 0) == 0 ? ErrorShape::kOpenAI : ErrorShape::kOllama;
  try {
    RouteTable::Match m = table_.match(req.method, path);
    if (!m.route) {
      if (!m.allow.empty()) {
        HttpResponse r = error_response(
            shape, 405, fmt::format("method {} is not allowed on {}", req.method, path));
        r.headers.set("allow", m.allow);
        return r;
      }
      return error_response(shape, 404, fmt::format("no route for {} {}", req.method, path), "",
                            "not_found");
    }
    shape = m.route->shape;
    return m.route->handler(RouteCall{req, m.params, notify, *m.route});
  } catch (const ApiError& e) {
    return error_response(shape, e.status(), e.what(), e.param(), e.code(), e.type());
  } catch (const Error& e) {
    return error_response(shape, status_of(e.kind()), e.what());
  } catch (const std::exception& e) {
    return error_response(shape, 500, std::string("internal error: ") + e.what());
  }
}

void Router::finish_body(HttpResponse& r) {
  if (!r.gen->error().empty()) {
    r.status = 500;
    r.body = r.openai ? openai_error_body(500, r.gen->error()) : ollama_error_body(r.gen->error());
    return;
  }
  r.body = r.fmt->finish(r.gen->totals());
}

}  // namespace tandem::server
