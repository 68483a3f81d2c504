#pragma once
// The table of HTTP routes. Each route says its method and path pattern, which API's error
// shape its failures take, and who may call it (Access): policies that apply to every route
// (API keys, rate limits, metrics labels) read the table, so a new route cannot be left out
// of them. Route files (routes_*.cpp) add their routes; the Router matches and dispatches.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"

namespace tandem::server {

// The error body a route's failures take.
enum class ErrorShape {
  kOpenAI,     // {"error":{"message","type","param","code"}}
  kOllama,     // {"error":"message"}
  kAnthropic,  // {"type":"error","error":{"type","message"}}
};

// Who may call a route once API keys are set.
enum class Access {
  kOpen,     // always open: liveness, the page's static files
  kModel,    // needs a key: inference and model information
  kAdmin,    // needs a key: changes the server's state (models, conversations)
  kMetrics,  // open unless metrics are put behind the keys
};

using Notify = std::function<void()>;

struct Route;

// What a handler receives: the request, the values of the pattern's {name} segments in
// order, the notifier a generation calls on the engine thread, and the matched route.
struct RouteCall {
  const HttpRequest& req;
  const std::vector<std::string>& params;
  const Notify& notify;
  const Route& route;
};

using Handler = std::function<HttpResponse(const RouteCall&)>;

struct Route {
  std::string method;   // GET routes also answer HEAD
  std::string pattern;  // "/v1/models/{id}": a {name} segment matches one non-empty segment
  ErrorShape shape = ErrorShape::kOpenAI;
  Access access = Access::kModel;
  Handler handler;
};

class RouteTable {
 public:
  void add(Route r);

  struct Match {
    const Route* route = nullptr;     // null: no route for this method and path
    std::vector<std::string> params;  // the {name} segments' values
    std::string allow;                // no route but the path exists: its methods, "GET, HEAD"
  };
  Match match(std::string_view method, std::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  static bool path_matches(std::string_view pattern, std::string_view path,
                           std::vector<std::string>* params);
  std::vector<Route> routes_;
};

}  // namespace tandem::server
