// What the route files share: JSON and error responses, body parsing, starting a generation.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/formatter.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/routes.h"

namespace tandem::server {

HttpResponse json_response(int status, const json& j) {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

namespace {
const char* anthropic_type_of(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}
}  // namespace

std::string error_body(ErrorShape shape, int status, const std::string& msg,
                       const std::string& param, const std::string& code, const std::string& type) {
  switch (shape) {
    case ErrorShape::kOpenAI:
      return openai_error_body(status, msg, param, code, type);
    case ErrorShape::kOllama:
      return ollama_error_body(msg);
    case ErrorShape::kAnthropic:
      return dump(json{{"type", "error"},
                       {"error", {{"type", anthropic_type_of(status)}, {"message", msg}}}});
  }
  return ollama_error_body(msg);
}

HttpResponse error_response(ErrorShape shape, int status, const std::string& msg,
                            const std::string& param, const std::string& code,
                            const std::string& type) {
  HttpResponse r;
  r.status = status;
  r.body = error_body(shape, status, msg, param, code, type);
  return r;
}

json parse_body(const HttpRequest& req, bool object) {
  json body = parse_json_body(req.body);
  if (object && !body.is_object())
    throw ApiError(400, "invalid_request_error", "", "the request body must be a JSON object");
  return body;
}

HttpResponse start_generation(ServerContext& ctx, const json& body, Api api, const Notify& notify) {
  GenRequest g;
  switch (api) {
    case Api::kOpenAIChat:
      g = parse_openai_chat(body);
      break;
    case Api::kOpenAICompletion:
      g = parse_openai_completion(body);
      break;
    case Api::kOllamaChat:
      g = parse_ollama_chat(body);
      break;
    case Api::kOllamaGenerate:
      g = parse_ollama_generate(body);
      break;
    default:  // the Responses and Anthropic routes start their own (routes_responses.cpp, ...)
      throw std::logic_error("start_generation: unsupported API");
  }
  if (!ctx.serves(g.model)) model_not_found(g.model);
  HttpResponse r;
  r.openai = is_openai(api);
  if (g.load_only) {
    // Ollama's "load the model" call: nothing to generate.
    json j = {{"model", g.model}, {"created_at", rfc3339_now()}};
    if (api == Api::kOllamaChat)
      j["message"] = {{"role", "assistant"}, {"content", ""}};
    else
      j["response"] = "";
    j["done_reason"] = g.unload ? "unload" : "load";
    j["done"] = true;
    r.body = dump(j);
    return r;
  }
  r.stream = g.stream;
  r.gen = std::make_unique<Generation>(ctx, g);
  r.fmt =
      r.openai ? make_openai_formatter(*r.gen, g.model) : make_ollama_formatter(*r.gen, g.model);
  r.gen->start(notify);
  if (r.stream) r.content_type = r.fmt->stream_content_type();
  return r;
}

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace tandem::server
