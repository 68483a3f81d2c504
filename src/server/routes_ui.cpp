// The web page's files: /ui/ (index.html, never cached), /ui/assets/<hashed name> (cached
// for a year, immutable), each in the encoding the browser takes best (brotli, gzip or as
// is, all precompressed at build time), with strong ETags. GET / serves the page to
// browsers (routes_system.cpp asks prefers_html).
#include <algorithm>
#include <cstdlib>

#include "server/routes.h"
#include "server/web_assets.h"

namespace tandem::server {
namespace {

// The page runs no inline script and loads nothing from elsewhere; KaTeX needs inline
// style attributes.
constexpr const char* kPagePolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
    "data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The q-value a header list (Accept, Accept-Encoding) gives `want`: its own entry, else the
// best wildcard among `wild` ("*/*", "text/*" or "*"); -1 when the list does not mention it.
double qvalue(std::string_view list, std::string_view want,
              std::initializer_list<const char*> wild) {
  double own = -1, star = -1;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    size_t semi = item.find(';');
    const std::string name = lower_ascii(trim(item.substr(0, semi)));
    double q = 1;
    while (semi != std::string_view::npos) {
      item = item.substr(semi + 1);
      semi = item.find(';');
      std::string_view p = trim(item.substr(0, semi));
      if (p.size() > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
        char* end = nullptr;
        const std::string v(p.substr(2));
        q = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || !(q >= 0)) q = 0;
        q = std::min(q, 1.0);
      }
    }
    if (name == want) own = std::max(own, q);
    for (const char* w : wild)
      if (name == w) star = std::max(star, q);
  }
  return own >= 0 ? own : star;
}

const WebAsset* find_asset(std::string_view name) {
  for (auto& a : web_assets())
    if (a.name == name) return &a;
  return nullptr;
}

HttpResponse asset_response(const HttpRequest& req, const WebAsset& a) {
  HttpResponse r;
  r.content_type = std::string(a.content_type);
  r.headers.set("etag", std::string(a.etag));
  r.headers.set("cache-control", a.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.set("x-content-type-options", "nosniff");
  if (!a.gzip.empty() || !a.br.empty()) r.headers.set("vary", "Accept-Encoding");
  if (!a.immutable) {
    r.headers.set("content-security-policy", kPagePolicy);
    r.headers.set("referrer-policy", "no-referrer");
    r.headers.set("x-frame-options", "DENY");
  }
  // If-None-Match: the browser's copy is current.
  std::string_view inm = req.headers.get("if-none-match");
  if (!inm.empty() && (inm.find(a.etag) != std::string_view::npos || trim(inm) == "*")) {
    r.status = 304;
    return r;
  }
  std::string_view ae = req.headers.get("accept-encoding");
  const double q_br = a.br.empty() ? -1 : qvalue(ae, "br", {"*"});
  const double q_gz = a.gzip.empty() ? -1 : qvalue(ae, "gzip", {"*"});
  if (q_br > 0 && q_br >= q_gz) {
    r.headers.set("content-encoding", "br");
    r.body = std::string(a.br);
  } else if (q_gz > 0) {
    r.headers.set("content-encoding", "gzip");
    r.body = std::string(a.gzip);
  } else {
    r.body = std::string(a.identity);
  }
  return r;
}

HttpResponse not_found(const std::string& what) {
  HttpResponse r =
      error_response(ErrorShape::kOpenAI, 404, "no such file: " + what, "", "not_found");
  r.headers.set("cache-control", "no-cache");
  return r;
}

}  // namespace

bool prefers_html(const HttpRequest& req) {
  std::string_view accept = req.headers.get("accept");
  if (accept.empty()) return false;
  // Only an explicit text/html counts: "*/*" (curl, SDKs) keeps the API's plain answer.
  const double html = qvalue(accept, "text/html", {});
  const double plain = qvalue(accept, "text/plain", {});
  return html > 0 && html > plain;
}

HttpResponse ui_index_response(const HttpRequest& req) {
  const WebAsset* a = find_asset("index.html");
  if (!a) return not_found("index.html");
  HttpResponse r = asset_response(req, *a);
  r.headers.set("vary", "Accept, Accept-Encoding");
  return r;
}

void add_ui_routes(RouteTable& t, ServerContext&) {
  t.add({"GET", "/ui", ErrorShape::kOpenAI, Access::kOpen, [](const RouteCall&) {
           HttpResponse r;
           r.status = 308;
           r.content_type = "text/plain; charset=utf-8";
           r.headers.set("location", "/ui/");
           r.body = "/ui/";
           return r;
         }});
  t.add({"GET", "/ui/", ErrorShape::kOpenAI, Access::kOpen,
         [](const RouteCall& c) { return ui_index_response(c.req); }});
  t.add({"GET", "/ui/assets/{name}", ErrorShape::kOpenAI, Access::kOpen, [](const RouteCall& c) {
           const std::string name = "assets/" + c.params.at(0);
           const WebAsset* a = find_asset(name);
           if (!a) return not_found(name);
           return asset_response(c.req, *a);
         }});
}

}  // namespace tandem::server
