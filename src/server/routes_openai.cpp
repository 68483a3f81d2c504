// OpenAI's routes: chat completions, completions, models.
#include <chrono>

#include "server/api_error.h"
#include "server/routes.h"

namespace tandem::server {
namespace {

json model_entry(const ServerContext& ctx, const std::string& name) {
  return json{{"id", name},
              {"object", "model"},
              {"created", std::chrono::duration_cast<std::chrono::seconds>(
                              ctx.model.loaded_at.time_since_epoch())
                              .count()},
              {"owned_by", "tandem"},
              {"max_model_len", ctx.gen->max_model_len()}};
}

}  // namespace

void add_openai_routes(RouteTable& t, ServerContext& ctx) {
  constexpr ErrorShape kShape = ErrorShape::kOpenAI;
  t.add({"POST", "/v1/chat/completions", kShape, Access::kModel, [&ctx](const RouteCall& c) {
           return start_generation(ctx, parse_body(c.req, false), Api::kOpenAIChat, c.notify);
         }});
  t.add({"POST", "/v1/completions", kShape, Access::kModel, [&ctx](const RouteCall& c) {
           return start_generation(ctx, parse_body(c.req, false), Api::kOpenAICompletion, c.notify);
         }});
  t.add({"GET", "/v1/models", kShape, Access::kModel, [&ctx](const RouteCall&) {
           json data = json::array();
           for (auto& n : ctx.model.names) data.push_back(model_entry(ctx, n));
           return json_response(200, json{{"object", "list"}, {"data", data}});
         }});
  t.add({"GET", "/v1/models/{id}", kShape, Access::kModel, [&ctx](const RouteCall& c) {
           const std::string& id = c.params.at(0);
           if (!ctx.serves(id)) model_not_found(id);
           return json_response(200, model_entry(ctx, id));
         }});
}

}  // namespace tandem::server
