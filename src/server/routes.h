#pragma once
// The route files and what they share. Each add_*_routes adds one group of routes to the
// table; Router's constructor calls them all. A new group is a new routes_<group>.cpp with
// its add function declared here and called from router.cpp.
#include <string>

#include "server/context.h"
#include "server/gen_request.h"
#include "server/route_table.h"

namespace tandem::server {

void add_system_routes(RouteTable& t, ServerContext& ctx);        // /, /health, /api/version
void add_openai_routes(RouteTable& t, ServerContext& ctx);        // /v1/chat, completions, models
void add_ollama_routes(RouteTable& t, ServerContext& ctx);        // /api/chat, generate, tags, ...
void add_ui_routes(RouteTable& t, ServerContext& ctx);            // /ui/: the web page's files
void add_conversation_routes(RouteTable& t, ServerContext& ctx);  // /ui/api/: chats, answers
void add_responses_routes(RouteTable& t, ServerContext& ctx);     // /v1/responses (OpenAI)

// True when the client prefers HTML to plain text (a browser): GET / then serves the page.
bool prefers_html(const HttpRequest& req);
// The page itself (index.html), as /ui/ serves it.
HttpResponse ui_index_response(const HttpRequest& req);

// Shared by the route files.
HttpResponse json_response(int status, const json& j);
HttpResponse error_response(ErrorShape shape, int status, const std::string& msg,
                            const std::string& param = {}, const std::string& code = {},
                            const std::string& type = {});
// The error body in a shape (OpenAI, Ollama or Anthropic).
std::string error_body(ErrorShape shape, int status, const std::string& msg,
                       const std::string& param = {}, const std::string& code = {},
                       const std::string& type = {});
// The request body as JSON; a 400 in the route's shape when it is not valid JSON (or, with
// `object`, not an object).
json parse_body(const HttpRequest& req, bool object = true);
// Parses, validates and starts a generation of `api`; the response carries it.
HttpResponse start_generation(ServerContext& ctx, const json& body, Api api, const Notify& notify);
// "2026-11-30T02:45:14Z"
std::string iso_time(std::chrono::system_clock::time_point t);

}  // namespace tandem::server
