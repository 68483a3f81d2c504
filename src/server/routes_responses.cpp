// OpenAI's Responses API routes: create (streamed, not, or in the background), retrieve,
// delete, cancel, and the input items of a stored response.
#include <algorithm>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/responses.h"
#include "server/routes.h"

namespace tandem::server {
namespace {

struct ResponsesState {
  std::shared_ptr<ResponseStore> store = std::make_shared<ResponseStore>();
  BackgroundRuns runs;
};

// One `name=value` of the query string, percent-decoded ("" when absent).
std::string query_param(std::string_view q, std::string_view name) {
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    size_t eq = kv.find('=');
    if (kv.substr(0, eq) != name) continue;
    std::string out;
    std::string_view v = eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1);
    auto hex = [](char ch) {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      return -1;
    };
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '+') {
        out += ' ';
      } else if (v[i] == '%' && i + 2 < v.size() && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
        out += char(hex(v[i + 1]) * 16 + hex(v[i + 2]));
        i += 2;
      } else {
        out += v[i];
      }
    }
    return out;
  }
  return {};
}

[[noreturn]] void not_found(const std::string& id) {
  throw ApiError(404, "invalid_request_error", "response_id",
                 fmt::format("response '{}' not found (not stored, deleted, or evicted from the "
                             "server's store)",
                             id),
                 "not_found");
}

HttpResponse create(ServerContext& ctx, ResponsesState& st, const RouteCall& c) {
  auto req =
      std::make_shared<ResponsesRequest>(parse_responses_request(parse_body(c.req), *st.store));
  if (!ctx.serves(req->gen.model)) model_not_found(req->gen.model);
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto gen = std::make_unique<Generation>(ctx, req->gen);
  auto fmt = make_responses_formatter(req, st.store, cancelled);
  if (req->background) {
    fmt->start();  // stored as in progress
    gen->start(st.runs.notifier());
    st.runs.run(std::move(gen), std::move(fmt), cancelled);
    return json_response(200, initial_response(*req, "in_progress"));
  }
  HttpResponse r;
  r.openai = true;
  r.stream = req->gen.stream;
  r.gen = std::move(gen);
  r.fmt = std::move(fmt);
  r.gen->start(c.notify);
  if (r.stream) r.content_type = r.fmt->stream_content_type();
  return r;
}

HttpResponse input_items(ResponsesState& st, const RouteCall& c) {
  const std::string& id = c.params.at(0);
  auto e = st.store->get(id);
  if (!e) not_found(id);
  const std::string_view q = c.req.query();
  std::string order = query_param(q, "order");
  if (order.empty()) order = "desc";
  if (order != "asc" && order != "desc")
    bad_field("order", "'order' must be asc or desc, got '{}'", order);
  int limit = 20;
  if (std::string l = query_param(q, "limit"); !l.empty()) {
    try {
      size_t used = 0;
      limit = std::stoi(l, &used);
      if (used != l.size()) throw std::invalid_argument(l);
    } catch (const std::exception&) {
      bad_field("limit", "'limit' must be an integer from 1 to 100, got '{}'", l);
    }
    if (limit < 1 || limit > 100)
      bad_field("limit", "'limit' must be from 1 to 100, got {}", limit);
  }
  std::vector<json> items(e->input.begin(), e->input.end());
  if (order == "desc") std::reverse(items.begin(), items.end());
  size_t from = 0;
  if (std::string after = query_param(q, "after"); !after.empty()) {
    while (from < items.size() && items[from].value("id", std::string()) != after) ++from;
    if (from == items.size())
      bad_field("after", "item '{}' is not an input of this response", after);
    ++from;
  }
  json data = json::array();
  for (size_t i = from; i < items.size() && int(data.size()) < limit; ++i) data.push_back(items[i]);
  const bool more = from + data.size() < items.size();
  return json_response(200, json{{"object", "list"},
                                 {"data", data},
                                 {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                                 {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
                                 {"has_more", more}});
}

}  // namespace

void add_responses_routes(RouteTable& t, ServerContext& ctx) {
  constexpr ErrorShape kShape = ErrorShape::kOpenAI;
  auto st = std::make_shared<ResponsesState>();
  t.add({"POST", "/v1/responses", kShape, Access::kModel,
         [&ctx, st](const RouteCall& c) { return create(ctx, *st, c); }});
  t.add({"GET", "/v1/responses/{id}", kShape, Access::kModel, [st](const RouteCall& c) {
           const std::string& id = c.params.at(0);
           if (query_param(c.req.query(), "stream") == "true")
             throw ApiError(400, "invalid_request_error", "stream",
                            "streaming a stored response again is not supported; GET it without "
                            "'stream'");
           auto e = st->store->get(id);
           if (!e) not_found(id);
           return json_response(200, e->response);
         }});
  t.add({"DELETE", "/v1/responses/{id}", kShape, Access::kModel, [st](const RouteCall& c) {
           const std::string& id = c.params.at(0);
           auto e = st->store->get(id);
           if (!e) not_found(id);
           if (e->cancel) e->cancel->store(true);  // a background run stops too
           st->store->erase(id);
           return json_response(
               200, json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
         }});
  t.add({"POST", "/v1/responses/{id}/cancel", kShape, Access::kModel, [st](const RouteCall& c) {
           const std::string& id = c.params.at(0);
           auto e = st->store->get(id);
           if (!e) not_found(id);
           if (!e->background)
             throw ApiError(400, "invalid_request_error", "response_id",
                            "only responses created with 'background': true can be cancelled");
           json r = e->response;
           const std::string status = r.value("status", std::string());
           if (e->cancel && (status == "queued" || status == "in_progress")) {
             e->cancel->store(true);
             r["status"] = "cancelled";  // the stored one follows once the run has stopped
           }
           return json_response(200, r);
         }});
  t.add({"GET", "/v1/responses/{id}/input_items", kShape, Access::kModel,
         [st](const RouteCall& c) { return input_items(*st, c); }});
}

}  // namespace tandem::server
