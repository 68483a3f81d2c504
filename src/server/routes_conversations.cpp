// The web page's conversations and answers, under /ui/api/ (docs/WEBUI.md):
//   GET    /ui/api/conversations?limit=&cursor=      a page of conversations, newest first
//   GET    /ui/api/conversations/search?q=&limit=    full-text search
//   POST   /ui/api/conversations                     create {title?, settings?}
//   GET    /ui/api/conversations/{id}                the conversation and all its messages
//   PATCH  /ui/api/conversations/{id}                {title?, leaf_id?, settings?}
//   DELETE /ui/api/conversations/{id}
//   GET    /ui/api/conversations/{id}/export         the tandem.conversation JSON
//   POST   /ui/api/conversations/import              store an export under new ids
//   DELETE /ui/api/conversations/{id}/messages/{mid} a message and everything under it
//   POST   /ui/api/conversations/{id}/answers        start an answer: SSE (start, deltas, done)
//   GET    /ui/api/answers/{id}/events?from=N        re-attach: SSE from event N+1 on
//   POST   /ui/api/answers/{id}/stop
// Every route needs a key once API keys are set, and sees only the conversations of the
// caller's key.
#include <charconv>

#include "server/answer_hub.h"
#include "server/answer_stream.h"
#include "server/api_error.h"
#include "server/formatter.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/thinking.h"
#include "store/conversation_store.h"

namespace tandem::server {
namespace {

using store::ConversationRecord;
using store::MessageRecord;

// The conversations' owner: the name of the caller's API key ("" while the server has none).
std::string owner_of(const RouteCall&) {
  return "";
}

store::ConversationStore& store_of(ServerContext& ctx) {
  if (!ctx.conversations || !ctx.answers)
    throw ApiError(503, "server_error", "", "this server keeps no conversations");
  return *ctx.conversations;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A query parameter, percent-decoded ('+' is a space); nullopt when absent.
std::optional<std::string> query_param(std::string_view q, std::string_view name) {
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    size_t eq = kv.find('=');
    if (kv.substr(0, eq) != name) continue;
    std::string out;
    std::string_view v = eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '+') {
        out += ' ';
      } else if (v[i] == '%' && i + 2 < v.size() + 0 && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
        out += char(hex(v[i + 1]) * 16 + hex(v[i + 2]));
        i += 2;
      } else {
        out += v[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

int64_t int_param(const HttpRequest& req, const char* name, int64_t def, int64_t lo, int64_t hi) {
  auto v = query_param(req.query(), name);
  if (!v) return def;
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || p != v->data() + v->size() || x < lo || x > hi)
    bad_field(name, "'{}' must be an integer from {} to {}, got '{}'", name, lo, hi, *v);
  return x;
}

json conv_json(const ConversationRecord& c) {
  return json{{"id", c.id},
              {"title", c.title},
              {"settings", c.settings},
              {"leaf_id", c.leaf_id.empty() ? json(nullptr) : json(c.leaf_id)},
              {"created_ms", c.created_ms},
              {"updated_ms", c.updated_ms},
              {"message_count", c.message_count}};
}

json msg_json(const MessageRecord& m) {
  return json{{"id", m.id},
              {"parent_id", m.parent_id.empty() ? json(nullptr) : json(m.parent_id)},
              {"role", m.role},
              {"content", m.content},
              {"reasoning", m.reasoning},
              {"status", m.status},
              {"meta", m.meta},
              {"created_ms", m.created_ms},
              {"updated_ms", m.updated_ms}};
}

[[noreturn]] void no_conversation(const std::string& id) {
  throw ApiError(404, "invalid_request_error", "", fmt::format("no conversation '{}'", id),
                 "not_found");
}

json conversation_body(store::ConversationStore& s, const std::string& owner,
                       const std::string& id) {
  auto c = s.get(owner, id);
  auto msgs = s.messages(owner, id);
  if (!c || !msgs) no_conversation(id);
  json m = json::array();
  for (auto& x : *msgs) m.push_back(msg_json(x));
  return json{{"conversation", conv_json(*c)}, {"messages", std::move(m)}};
}

HttpResponse sse_response(std::unique_ptr<ByteStream> src) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.headers.set("x-accel-buffering", "no");  // proxies: pass each event on at once
  r.source = std::move(src);
  return r;
}

// The OpenAI chat request an answer makes: the branch up to `parent` as messages, the page's
// settings as sampling fields.
GenRequest answer_request(ServerContext& ctx, const json& body,
                          const std::vector<MessageRecord>& branch, std::string* think_used) {
  using namespace fields;
  json oai = json::object();
  oai["model"] = get_string(body, "model").value_or(ctx.model.names.at(0));
  json msgs = json::array();
  if (auto sys = get_string(body, "system"); sys && !sys->empty())
    msgs.push_back({{"role", "system"}, {"content", *sys}});
  for (auto& m : branch) msgs.push_back({{"role", m.role}, {"content", m.content}});
  oai["messages"] = std::move(msgs);
  oai["stream"] = true;
  for (const char* k :
       {"temperature", "top_p", "top_k", "max_tokens", "seed", "thinking_budget", "tools"})
    if (const json* v = find(body, k)) oai[k] = *v;
  const std::string mode = get_string(body, "think").value_or("");
  if (!mode.empty() && mode != "on" && mode != "off" && mode != "auto")
    bad_field("think", "'think' must be \"on\", \"off\" or \"auto\", got '{}'", mode);
  if (mode == "on" || mode == "off")
    oai["chat_template_kwargs"] = {{"enable_thinking", mode == "on"}};
  GenRequest g = parse_openai_chat(oai);
  if (!ctx.serves(g.model)) model_not_found(g.model);
  if (mode == "auto") g.think = resolve_thinking(g, ThinkingDefault::kAuto);
  *think_used = resolve_thinking(g, ctx.opt.thinking) ? "on" : "off";
  return g;
}

HttpResponse start_answer(ServerContext& ctx, const RouteCall& c) {
  auto& s = store_of(ctx);
  const std::string owner = owner_of(c);
  const std::string& cid = c.params.at(0);
  json body = parse_body(c.req);
  if (!s.get(owner, cid)) no_conversation(cid);
  std::string parent = fields::get_string(body, "parent_id").value_or("");
  std::optional<std::string> content = fields::get_string(body, "content");
  if (content && content->size() > store::kMaxMessageBytes)
    bad_field("content", "'content' is at most {} bytes", store::kMaxMessageBytes);
  if (content && content->empty()) bad_field("content", "'content' must not be empty");

  std::vector<MessageRecord> branch;
  if (!parent.empty()) {
    if (!s.message(owner, cid, parent))
      bad_field("parent_id", "message '{}' is not in this conversation", parent);
    branch = s.path_to(owner, cid, parent);
  }
  if (!content && (branch.empty() || branch.back().role != "user"))
    bad_field("parent_id",
              "an answer without new 'content' answers a user message: "
              "'parent_id' must name one");
  MessageRecord user;
  if (content) {
    user.role = "user";
    user.content = *content;
    user.parent_id = parent;
    branch.push_back(user);
  }
  // Everything is validated (and the prompt built) before anything is stored.
  std::string think;
  GenRequest g = answer_request(ctx, body, branch, &think);
  auto gen = ctx.answers->prepare(g);

  json start = json::object();
  if (content) {
    user = s.add_message(owner, cid, user);
    start["user_message"] = msg_json(user);
  }
  MessageRecord a;
  a.role = "assistant";
  a.parent_id = content ? user.id : parent;
  a.status = "streaming";
  a.meta = {{"model", g.model}, {"think", think}};
  if (auto m = fields::get_string(body, "think")) a.meta["think_mode"] = *m;
  a = s.add_message(owner, cid, a);
  std::shared_ptr<AnswerRun> run;
  try {
    run = ctx.answers->start(owner, cid, a, std::move(gen));
  } catch (...) {
    s.delete_message(owner, cid, a.id);  // the question stays; the answer never started
    throw;
  }
  start["assistant_message"] = msg_json(a);
  std::string prefix = "event: start\ndata: " + dump(start) + "\n\n";
  return sse_response(std::make_unique<AnswerStream>(run, 0, std::move(prefix), c.notify));
}

}  // namespace

void add_conversation_routes(RouteTable& t, ServerContext& ctx) {
  constexpr ErrorShape kShape = ErrorShape::kOpenAI;
  constexpr Access kAccess = Access::kModel;
  const std::string base = "/ui/api/conversations";
  t.add({"GET", base, kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           const int limit = int(int_param(c.req, "limit", 30, 1, 200));
           auto page =
               s.list(owner_of(c), limit, query_param(c.req.query(), "cursor").value_or(""));
           json items = json::array();
           for (auto& x : page.items) items.push_back(conv_json(x));
           return json_response(
               200, json{{"items", std::move(items)},
                         {"next_cursor",
                          page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor)}});
         }});
  t.add({"GET", base + "/search", kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           auto q = query_param(c.req.query(), "q");
           if (!q) bad_field("q", "'q' is required");
           if (q->size() > 1000) bad_field("q", "'q' is at most 1000 bytes");
           const int limit = int(int_param(c.req, "limit", 30, 1, 200));
           json items = json::array();
           for (auto& h : s.search(owner_of(c), *q, limit))
             items.push_back(
                 {{"conversation", conv_json(h.conversation)},
                  {"message_id", h.message_id.empty() ? json(nullptr) : json(h.message_id)},
                  {"snippet", h.snippet}});
           return json_response(200, json{{"items", std::move(items)}});
         }});
  t.add({"POST", base, kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           json body = parse_body(c.req);
           std::string title = fields::get_string(body, "title").value_or("");
           json settings = json::object();
           if (const json* v = fields::find(body, "settings")) {
             if (!v->is_object()) bad_field("settings", "'settings' must be an object");
             settings = *v;
           }
           return json_response(200, conv_json(s.create(owner_of(c), title, settings)));
         }});
  t.add({"POST", base + "/import", kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           std::string id = s.import_json(owner_of(c), parse_body(c.req));
           return json_response(200, json{{"id", id}});
         }});
  t.add({"GET", base + "/{id}", kShape, kAccess, [&ctx](const RouteCall& c) {
           return json_response(200, conversation_body(store_of(ctx), owner_of(c), c.params[0]));
         }});
  t.add({"PATCH", base + "/{id}", kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           const std::string owner = owner_of(c);
           const std::string& id = c.params[0];
           json body = parse_body(c.req);
           if (!s.get(owner, id)) no_conversation(id);
           bool any = false;
           if (auto title = fields::get_string(body, "title")) {
             s.rename(owner, id, *title);
             any = true;
           }
           if (auto leaf = fields::get_string(body, "leaf_id")) {
             if (!s.message(owner, id, *leaf))
               bad_field("leaf_id", "message '{}' is not in this conversation", *leaf);
             s.set_leaf(owner, id, *leaf);
             any = true;
           }
           if (const json* v = fields::find(body, "settings")) {
             if (!v->is_object()) bad_field("settings", "'settings' must be an object");
             s.set_settings(owner, id, *v);
             any = true;
           }
           if (!any) bad_field("", "give 'title', 'leaf_id' or 'settings'");
           auto conv = s.get(owner, id);
           if (!conv) no_conversation(id);
           return json_response(200, conv_json(*conv));
         }});
  t.add({"DELETE", base + "/{id}", kShape, kAccess, [&ctx](const RouteCall& c) {
           if (!store_of(ctx).remove(owner_of(c), c.params[0])) no_conversation(c.params[0]);
           return json_response(200, json{{"id", c.params[0]}, {"deleted", true}});
         }});
  t.add({"GET", base + "/{id}/export", kShape, kAccess, [&ctx](const RouteCall& c) {
           auto j = store_of(ctx).export_json(owner_of(c), c.params[0]);
           if (!j) no_conversation(c.params[0]);
           HttpResponse r = json_response(200, *j);
           r.headers.set("content-disposition", "attachment; filename=\"conversation.json\"");
           return r;
         }});
  t.add({"DELETE", base + "/{id}/messages/{mid}", kShape, kAccess, [&ctx](const RouteCall& c) {
           auto& s = store_of(ctx);
           const std::string owner = owner_of(c);
           if (ctx.answers->find(owner, c.params[1]) &&
               !ctx.answers->find(owner, c.params[1])->finished())
             throw ApiError(409, "invalid_request_error", "",
                            "the answer is still running: stop it first");
           if (!s.get(owner, c.params[0])) no_conversation(c.params[0]);
           if (!s.delete_message(owner, c.params[0], c.params[1]))
             throw ApiError(404, "invalid_request_error", "",
                            fmt::format("no message '{}' in this conversation", c.params[1]),
                            "not_found");
           return json_response(200, conversation_body(s, owner, c.params[0]));
         }});
  t.add({"POST", base + "/{id}/answers", kShape, kAccess,
         [&ctx](const RouteCall& c) { return start_answer(ctx, c); }});
  t.add({"GET", "/ui/api/answers/{id}/events", kShape, kAccess, [&ctx](const RouteCall& c) {
           store_of(ctx);
           auto run = ctx.answers->find(owner_of(c), c.params[0]);
           if (!run)
             throw ApiError(404, "invalid_request_error", "",
                            fmt::format("no running answer '{}' (a finished one is in its "
                                        "conversation)",
                                        c.params[0]),
                            "not_found");
           // The page says where it is: ?from=N, or SSE's own Last-Event-ID.
           int64_t from = int_param(c.req, "from", -1, 0, int64_t(1) << 40);
           if (from < 0) {
             std::string_view last = c.req.headers.get("last-event-id");
             from = 0;
             if (!last.empty()) {
               auto [p, ec] = std::from_chars(last.data(), last.data() + last.size(), from);
               if (ec != std::errc() || p != last.data() + last.size() || from < 0)
                 bad_field("Last-Event-ID", "Last-Event-ID must be an event number");
             }
           }
           return sse_response(std::make_unique<AnswerStream>(run, uint64_t(from), "", c.notify));
         }});
  t.add({"POST", "/ui/api/answers/{id}/stop", kShape, kAccess, [&ctx](const RouteCall& c) {
           store_of(ctx);
           auto run = ctx.answers->find(owner_of(c), c.params[0]);
           if (!run)
             throw ApiError(404, "invalid_request_error", "",
                            fmt::format("no running answer '{}'", c.params[0]), "not_found");
           return json_response(200, json{{"stopped", ctx.answers->stop(run)}});
         }});
}

}  // namespace tandem::server
