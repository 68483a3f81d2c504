#include "server/router.h"

#include <fmt/format.h>

#include "core/sha256.h"
#include "core/version.h"
#include "server/api_error.h"

namespace tandem::server {
namespace {

HttpResponse json_response(int status, const json& j) {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

HttpResponse error_response(bool openai, int status, const std::string& msg,
                            const std::string& param = {}, const std::string& code = {},
                            const std::string& type = {}) {
  HttpResponse r;
  r.status = status;
  r.body = openai ? openai_error_body(status, msg, param, code, type) : ollama_error_body(msg);
  return r;
}

std::string path_of(const std::string& target) {
  return target.substr(0, target.find('?'));
}

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace

HttpResponse Router::handle(const HttpRequest& req, std::function<void()> notify) {
  const std::string path = path_of(req.target);
  const bool openai = path.rfind("/v1/", 0) == 0;
  try {
    const bool get = req.method == "GET" || req.method == "HEAD";
    const bool post = req.method == "POST";
    if (path == "/" && get) {
      HttpResponse r;
      r.content_type = "text/plain; charset=utf-8";
      r.body = "Ollama is running";
      return r;
    }
    if (path == "/health" && get) {
      // 503 once the engine's last kFailingSteps steps all threw (a device that stays
      // broken), so a load balancer or supervisor takes this server out; one failed step
      // ends only its own requests and leaves the server healthy.
      constexpr int kFailingSteps = 3;
      auto st = ctx_.gen->stats();
      const bool failing = st.failing_steps >= kFailingSteps;
      json body{{"status", failing ? "failing" : "ok"},
                {"running", st.running},
                {"waiting", st.waiting},
                {"kv_usage", st.kv_usage},
                {"steps", st.steps},
                {"failed_steps", st.failed_steps}};
      if (failing) body["error"] = st.last_error;
      return json_response(failing ? 503 : 200, body);
    }
    if (path == "/v1/chat/completions" && post) return generate(req, Api::kOpenAIChat, notify);
    if (path == "/v1/completions" && post) return generate(req, Api::kOpenAICompletion, notify);
    if (path == "/api/chat" && post) return generate(req, Api::kOllamaChat, notify);
    if (path == "/api/generate" && post) return generate(req, Api::kOllamaGenerate, notify);
    if (path == "/v1/models" && get) return models("");
    if (path.rfind("/v1/models/", 0) == 0 && get) return models(path.substr(11));
    if (path == "/api/tags" && get) return tags();
    if (path == "/api/show" && post) return show(req);
    if (path == "/api/ps" && get) return ps();
    if (path == "/api/version" && get) return json_response(200, json{{"version", TANDEM_VERSION}});
    static const char* kKnown[] = {
        "/",          "/health",   "/v1/chat/completions", "/v1/completions",
        "/v1/models", "/api/chat", "/api/generate",        "/api/tags",
        "/api/show",  "/api/ps",   "/api/version"};
    for (auto* k : kKnown)
      if (path == k)
        return error_response(openai, 405,
                              fmt::format("method {} is not allowed on {}", req.method, path));
    return error_response(openai, 404, fmt::format("no route for {} {}", req.method, path), "",
                          "not_found");
  } catch (const ApiError& e) {
    return error_response(openai, e.status(), e.what(), e.param(), e.code(), e.type());
  } catch (const Error& e) {
    int status = status_of(e.kind());
    return error_response(openai, status, e.what());
  } catch (const std::exception& e) {
    return error_response(openai, 500, std::string("internal error: ") + e.what());
  }
}

HttpResponse Router::generate(const HttpRequest& req, Api api, std::function<void()> notify) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    // Parse again to get the parser's message (position and cause).
    std::string why;
    try {
      json again = json::parse(req.body);  // throws: the message is what we want
      (void)again;
    } catch (const json::exception& e) {
      why = e.what();
    }
    throw ApiError(400, "invalid_request_error", "", "the request body is not valid JSON: " + why);
  }
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
  }
  if (!ctx_.serves(g.model)) model_not_found(g.model);
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
  r.gen = std::make_unique<Generation>(ctx_, g);
  r.fmt =
      r.openai ? make_openai_formatter(*r.gen, g.model) : make_ollama_formatter(*r.gen, g.model);
  r.gen->start(std::move(notify));
  if (r.stream) r.content_type = r.fmt->stream_content_type();
  return r;
}

void Router::finish_body(HttpResponse& r) {
  if (!r.gen->error().empty()) {
    r.status = 500;
    r.body = r.openai ? openai_error_body(500, r.gen->error()) : ollama_error_body(r.gen->error());
    return;
  }
  r.body = r.fmt->finish(r.gen->totals());
}

json Router::details() const {
  std::string params = "unknown";
  const std::string& quant = ctx_.model.quantization_level;
  if (ctx_.model.config) {
    double n = double(ctx_.model.config->num_params());
    params = n >= 1e9 ? fmt::format("{:.1f}B", n / 1e9) : fmt::format("{:.1f}M", n / 1e6);
  }
  return json{{"parent_model", ""},       {"format", "safetensors"},
              {"family", "qwen3"},        {"families", json::array({"qwen3"})},
              {"parameter_size", params}, {"quantization_level", quant}};
}

HttpResponse Router::models(const std::string& id) {
  auto entry = [&](const std::string& name) {
    return json{{"id", name},
                {"object", "model"},
                {"created", std::chrono::duration_cast<std::chrono::seconds>(
                                ctx_.model.loaded_at.time_since_epoch())
                                .count()},
                {"owned_by", "tandem"},
                {"max_model_len", ctx_.gen->max_model_len()}};
  };
  if (!id.empty()) {
    if (!ctx_.serves(id)) model_not_found(id);
    return json_response(200, entry(id));
  }
  json data = json::array();
  for (auto& n : ctx_.model.names) data.push_back(entry(n));
  return json_response(200, json{{"object", "list"}, {"data", data}});
}

HttpResponse Router::tags() {
  json models = json::array();
  for (auto& n : ctx_.model.names) {
    std::string name = n.find(':') == std::string::npos ? n + ":latest" : n;
    models.push_back({{"name", name},
                      {"model", name},
                      {"modified_at", iso_time(ctx_.model.loaded_at)},
                      {"size", ctx_.model.size_bytes},
                      {"digest", sha256_hex(ctx_.model.source)},
                      {"details", details()}});
  }
  return json_response(200, json{{"models", models}});
}

HttpResponse Router::show(const HttpRequest& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    throw ApiError(400, "invalid_request_error", "", "the request body must be a JSON object");
  std::string name;
  for (const char* k : {"model", "name"})
    if (auto it = body.find(k); it != body.end() && it->is_string()) name = it->get<std::string>();
  if (name.empty()) bad_field("model", "model is required");
  if (!ctx_.serves(name)) model_not_found(name);
  json info = {{"general.architecture", "qwen3"}, {"general.basename", ctx_.model.names[0]}};
  if (auto& c = ctx_.model.config) {
    info["general.parameter_count"] = c->num_params();
    info["qwen3.block_count"] = c->num_hidden_layers;
    info["qwen3.embedding_length"] = c->hidden_size;
    info["qwen3.feed_forward_length"] = c->intermediate_size;
    info["qwen3.attention.head_count"] = c->num_attention_heads;
    info["qwen3.attention.head_count_kv"] = c->num_key_value_heads;
    info["qwen3.attention.key_length"] = c->head_dim;
    info["qwen3.rope.freq_base"] = c->rope_theta;
    info["qwen3.vocab_size"] = c->vocab_size;
  }
  info["qwen3.context_length"] = ctx_.gen->max_model_len();
  json out = {{"modelfile", "# served by tandem from " + ctx_.model.source},
              {"parameters", "temperature 0.6\ntop_k 20\ntop_p 0.95"},
              {"template", ctx_.tok->chat_template()},
              {"details", details()},
              {"model_info", info},
              {"capabilities", json::array({"completion", "tools", "thinking"})},
              {"modified_at", iso_time(ctx_.model.loaded_at)}};
  return json_response(200, out);
}

HttpResponse Router::ps() {
  json models = json::array();
  for (auto& n : ctx_.model.names) {
    std::string name = n.find(':') == std::string::npos ? n + ":latest" : n;
    models.push_back({{"name", name},
                      {"model", name},
                      {"size", ctx_.model.size_bytes},
                      {"digest", sha256_hex(ctx_.model.source)},
                      {"details", details()},
                      {"expires_at", "2318-01-01T00:00:00Z"},
                      {"size_vram", ctx_.model.backend == "cuda" ? ctx_.model.size_bytes : 0},
                      {"context_length", ctx_.gen->max_model_len()}});
  }
  return json_response(200, json{{"models", models}});
}

}  // namespace tandem::server
