// Ollama's routes: chat, generate, and the model information it serves (tags, show, ps).
#include <fmt/format.h>

#include "core/sha256.h"
#include "server/api_error.h"
#include "server/routes.h"

namespace tandem::server {
namespace {

json details(const ServerContext& ctx) {
  std::string params = "unknown";
  if (ctx.model.config) {
    double n = double(ctx.model.config->num_params());
    params = n >= 1e9 ? fmt::format("{:.1f}B", n / 1e9) : fmt::format("{:.1f}M", n / 1e6);
  }
  return json{{"parent_model", ""},       {"format", "safetensors"},
              {"family", "qwen3"},        {"families", json::array({"qwen3"})},
              {"parameter_size", params}, {"quantization_level", ctx.model.quantization_level}};
}

std::string tagged(const std::string& n) {
  return n.find(':') == std::string::npos ? n + ":latest" : n;
}

HttpResponse tags(const ServerContext& ctx) {
  json models = json::array();
  for (auto& n : ctx.model.names) {
    std::string name = tagged(n);
    models.push_back({{"name", name},
                      {"model", name},
                      {"modified_at", iso_time(ctx.model.loaded_at)},
                      {"size", ctx.model.size_bytes},
                      {"digest", sha256_hex(ctx.model.source)},
                      {"details", details(ctx)}});
  }
  return json_response(200, json{{"models", models}});
}

HttpResponse show(const ServerContext& ctx, const HttpRequest& req) {
  json body = parse_body(req);
  std::string name;
  for (const char* k : {"model", "name"})
    if (auto it = body.find(k); it != body.end() && it->is_string()) name = it->get<std::string>();
  if (name.empty()) bad_field("model", "model is required");
  if (!ctx.serves(name)) model_not_found(name);
  json info = {{"general.architecture", "qwen3"}, {"general.basename", ctx.model.names[0]}};
  if (auto& c = ctx.model.config) {
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
  info["qwen3.context_length"] = ctx.gen->max_model_len();
  // Never the checkpoint's folder: clients need not learn the server's paths.
  json out = {{"modelfile", "# served by tandem\nFROM " + ctx.model.names[0] + "\n"},
              {"parameters", "temperature 0.6\ntop_k 20\ntop_p 0.95"},
              {"template", ctx.tok->chat_template()},
              {"details", details(ctx)},
              {"model_info", info},
              {"capabilities", json::array({"completion", "tools", "thinking"})},
              {"modified_at", iso_time(ctx.model.loaded_at)}};
  return json_response(200, out);
}

HttpResponse ps(const ServerContext& ctx) {
  json models = json::array();
  for (auto& n : ctx.model.names) {
    std::string name = tagged(n);
    models.push_back({{"name", name},
                      {"model", name},
                      {"size", ctx.model.size_bytes},
                      {"digest", sha256_hex(ctx.model.source)},
                      {"details", details(ctx)},
                      {"expires_at", "2318-01-01T00:00:00Z"},
                      {"size_vram", ctx.model.backend == "cuda" ? ctx.model.size_bytes : 0},
                      {"context_length", ctx.gen->max_model_len()}});
  }
  return json_response(200, json{{"models", models}});
}

}  // namespace

void add_ollama_routes(RouteTable& t, ServerContext& ctx) {
  constexpr ErrorShape kShape = ErrorShape::kOllama;
  t.add({"POST", "/api/chat", kShape, Access::kModel, [&ctx](const RouteCall& c) {
           return start_generation(ctx, parse_body(c.req, false), Api::kOllamaChat, c.notify);
         }});
  t.add({"POST", "/api/generate", kShape, Access::kModel, [&ctx](const RouteCall& c) {
           return start_generation(ctx, parse_body(c.req, false), Api::kOllamaGenerate, c.notify);
         }});
  t.add(
      {"GET", "/api/tags", kShape, Access::kModel, [&ctx](const RouteCall&) { return tags(ctx); }});
  t.add({"POST", "/api/show", kShape, Access::kModel,
         [&ctx](const RouteCall& c) { return show(ctx, c.req); }});
  t.add({"GET", "/api/ps", kShape, Access::kModel, [&ctx](const RouteCall&) { return ps(ctx); }});
}

}  // namespace tandem::server
