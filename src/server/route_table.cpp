#include "server/route_table.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::server {

void RouteTable::add(Route r) {
  for (auto& e : routes_)
    if (e.method == r.method && e.pattern == r.pattern)
      fail(ErrorKind::kInternal, "route {} {} added twice", r.method, r.pattern);
  routes_.push_back(std::move(r));
}

bool RouteTable::path_matches(std::string_view pattern, std::string_view path,
                              std::vector<std::string>* params) {
  size_t p = 0, q = 0;
  while (p < pattern.size() && q < path.size()) {
    if (pattern[p] == '{') {
      size_t close = pattern.find('}', p);
      size_t end = path.find('/', q);
      if (end == std::string_view::npos) end = path.size();
      if (end == q) return false;  // an empty segment never matches a {name}
      if (params) params->emplace_back(path.substr(q, end - q));
      p = close + 1;
      q = end;
      continue;
    }
    if (pattern[p] != path[q]) return false;
    ++p;
    ++q;
  }
  return p == pattern.size() && q == path.size();
}

RouteTable::Match RouteTable::match(std::string_view method, std::string_view path) const {
  Match m;
  std::vector<std::string> methods;
  for (auto& r : routes_) {
    std::vector<std::string> params;
    if (!path_matches(r.pattern, path, &params)) continue;
    if (r.method == method || (method == "HEAD" && r.method == "GET")) {
      m.route = &r;
      m.params = std::move(params);
      return m;
    }
    methods.push_back(r.method);
    if (r.method == "GET") methods.push_back("HEAD");
  }
  std::sort(methods.begin(), methods.end());
  methods.erase(std::unique(methods.begin(), methods.end()), methods.end());
  for (auto& x : methods) m.allow += (m.allow.empty() ? "" : ", ") + x;
  return m;
}

}  // namespace tandem::server
