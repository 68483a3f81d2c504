// Routes that belong to no API: the root, liveness and the version.
#include "core/version.h"
#include "server/routes.h"

namespace tandem::server {

void add_system_routes(RouteTable& t, ServerContext& ctx) {
  // Ollama clients probe the root for this text; browsers get the web page.
  t.add({"GET", "/", ErrorShape::kOllama, Access::kOpen, [](const RouteCall& c) {
           if (prefers_html(c.req)) return ui_index_response(c.req);
           HttpResponse r;
           r.content_type = "text/plain; charset=utf-8";
           r.body = "Ollama is running";
           r.headers.set("vary", "Accept");
           return r;
         }});
  // 503 once the engine's last kFailingSteps steps all threw (a device that stays broken), so
  // a load balancer or supervisor takes this server out; one failed step ends only its own
  // requests and leaves the server healthy.
  t.add({"GET", "/health", ErrorShape::kOpenAI, Access::kOpen, [&ctx](const RouteCall&) {
           constexpr int kFailingSteps = 3;
           auto st = ctx.gen->stats();
           const bool failing = st.failing_steps >= kFailingSteps;
           json body{{"status", failing ? "failing" : "ok"},
                     {"running", st.running},
                     {"waiting", st.waiting},
                     {"kv_usage", st.kv_usage},
                     {"steps", st.steps},
                     {"failed_steps", st.failed_steps}};
           if (failing) body["error"] = st.last_error;
           return json_response(failing ? 503 : 200, body);
         }});
  t.add({"GET", "/api/version", ErrorShape::kOllama, Access::kOpen, [](const RouteCall&) {
           return json_response(200, json{{"version", TANDEM_VERSION}});
         }});
}

}  // namespace tandem::server
