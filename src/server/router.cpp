#include "server/router.h"

#include <fmt/format.h>

#include "core/log.h"
#include "server/api_error.h"
#include "server/routes.h"

namespace tandem::server {

namespace {

using Clock = std::chrono::steady_clock;

const char* api_name(ErrorShape s) {
  switch (s) {
    case ErrorShape::kOpenAI:
      return "openai";
    case ErrorShape::kOllama:
      return "ollama";
    case ErrorShape::kAnthropic:
      return "anthropic";
  }
  return "";
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The message of an error body, for the record ("" when the body is not an error).
std::string error_message_of(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  auto it = j.find("error");
  if (it == j.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("message") && (*it)["message"].is_string())
    return (*it)["message"].get<std::string>();
  return {};
}

}  // namespace

std::string sane_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return {};
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return {};
  }
  return std::string(id);
}

Router::Router(ServerContext& ctx) : ctx_(ctx) {
  add_system_routes(table_, ctx_);
  add_openai_routes(table_, ctx_);
  add_ollama_routes(table_, ctx_);
  add_ui_routes(table_, ctx_);
  add_conversation_routes(table_, ctx_);
  add_responses_routes(table_, ctx_);
}

ErrorShape Router::shape_of_path(std::string_view path) {
  return path.rfind("/v1/", 0) == 0 ? ErrorShape::kOpenAI : ErrorShape::kOllama;
}

void Router::stamp(const HttpRequest& req, const Route* route, ErrorShape shape,
                   HttpResponse& r) const {
  RequestRecord& rec = r.record;
  rec.id = sane_request_id(req.headers.get("x-request-id"));
  if (rec.id.empty()) rec.id = random_id("req_", 24);
  rec.method = req.method;
  rec.path = std::string(req.path());
  rec.route = route ? route->pattern : std::string();
  rec.api = api_name(shape);
  rec.remote = req.remote;
  rec.bytes_in = req.body.size();
  r.received = req.received == Clock::time_point{} ? Clock::now() : req.received;
  rec.started =
      std::chrono::system_clock::now() -
      std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - r.received);
  r.headers.set("x-request-id", rec.id);
}

HttpResponse Router::handle(const HttpRequest& req, Notify notify) {
  const std::string path(req.path());
  // Before a route is known, the path says which API a client speaks.
  ErrorShape shape = shape_of_path(path);
  const Route* route = nullptr;
  HttpResponse r;
  try {
    RouteTable::Match m = table_.match(req.method, path);
    route = m.route;
    if (!route) {
      if (!m.allow.empty()) {
        r = error_response(shape, 405,
                           fmt::format("method {} is not allowed on this path", req.method));
        r.headers.set("allow", m.allow);
      } else {
        r = error_response(shape, 404, "no such route", "", "not_found");
      }
    } else {
      shape = route->shape;
      r = route->handler(RouteCall{req, m.params, notify, *route});
    }
  } catch (const ApiError& e) {
    r = error_response(shape, e.status(), e.what(), e.param(), e.code(), e.type());
  } catch (const Error& e) {
    r = error_response(shape, status_of(e.kind()), e.what());
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, path.substr(0, 200), e.what());
    r = error_response(shape, 500, "internal error");
  }
  stamp(req, route, shape, r);
  if (r.gen) {
    r.record.model = r.gen->request().model;
    r.record.stream = r.stream;
  }
  return r;
}

HttpResponse Router::transport_error(const HttpRequest& req, int status, const std::string& msg) {
  const std::string path(req.path());
  ErrorShape shape = shape_of_path(path);
  const Route* route = nullptr;
  if (!path.empty()) {
    RouteTable::Match m = table_.match(req.method, path);
    route = m.route;
    if (route) shape = route->shape;
  }
  HttpResponse r = error_response(shape, status, msg);
  stamp(req, route, shape, r);
  return r;
}

void Router::complete(HttpResponse& r, const char* finish) {
  RequestRecord& rec = r.record;
  const auto now = Clock::now();
  if (r.received == Clock::time_point{}) r.received = now;
  rec.duration_ms = ms_between(r.received, now);
  if (rec.status == 0) rec.status = r.status;
  if (r.gen) {
    const Generation& g = *r.gen;
    const Totals& t = g.totals();
    rec.prompt_tokens = t.prompt_tokens;
    rec.cached_tokens = t.cached_tokens;
    rec.completion_tokens = t.completion_tokens;
    if (g.submitted_at() != Clock::time_point{}) {
      rec.queue_ms = ms_between(r.received, g.submitted_at());
      if (t.engine_queue_ms >= 0) rec.queue_ms += t.engine_queue_ms;
    }
    if (g.first_token_at() != Clock::time_point{})
      rec.ttft_ms = ms_between(r.received, g.first_token_at());
    rec.finish_reason = g.finish_reason();
    if (!g.error().empty() && rec.error.empty()) rec.error = g.error();
  }
  if (finish) rec.finish_reason = finish;
  if (rec.error.empty() && rec.status >= 400) rec.error = error_message_of(r.body);
  for (auto& h : hooks_) {
    try {
      h(rec);
    } catch (const std::exception& e) {
      spdlog::error("a request completion hook failed: {}", e.what());
    }
  }
}

void Router::add_completion_hook(CompletionHook hook) {
  hooks_.push_back(std::move(hook));
}

void Router::finish_body(HttpResponse& r) {
  if (!r.gen->error().empty()) {
    r.status = 500;
    r.body = r.fmt->error_body(r.gen->error());
    return;
  }
  r.body = r.fmt->finish(r.gen->totals());
}

}  // namespace tandem::server
