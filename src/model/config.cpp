#include "model/config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace tandem::model {

namespace {

using json = nlohmann::json;

int get_int(const json& j, const char* key, const std::string& where, std::optional<int> dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!dflt) fail(ErrorKind::kInvalidArgument, "{}: required field '{}' is missing", where, key);
    return *dflt;
  }
  if (!it->is_number_integer())
    fail(ErrorKind::kInvalidArgument, "{}: field '{}' must be an integer, got {}", where, key,
         it->dump());
  int64_t v = it->get<int64_t>();
  if (v < 0 || v > (int64_t(1) << 30))
    fail(ErrorKind::kInvalidArgument, "{}: field '{}' = {} is out of range", where, key, v);
  return int(v);
}

double get_num(const json& j, const char* key, const std::string& where, double dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number())
    fail(ErrorKind::kInvalidArgument, "{}: field '{}' must be a number, got {}", where, key,
         it->dump());
  double v = it->get<double>();
  if (!std::isfinite(v))
    fail(ErrorKind::kInvalidArgument, "{}: field '{}' is not finite", where, key);
  return v;
}

std::optional<double> get_opt_num(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return get_num(j, key, where, 0.0);
}

std::string get_str(const json& j, const char* key, const std::string& dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// rope_scaling (4.x) or rope_parameters (5.x, which also carries rope_theta).
void parse_rope(const json& r, ModelConfig& c, const std::string& where) {
  if (!r.is_object())
    fail(ErrorKind::kInvalidArgument, "{}: rope scaling must be an object or null", where);
  std::string type = get_str(r, "rope_type", get_str(r, "type", "default"));
  if (r.contains("rope_theta")) c.rope_theta = get_num(r, "rope_theta", where, c.rope_theta);
  double partial = get_num(r, "partial_rotary_factor", where, 1.0);
  if (partial != 1.0)
    fail(ErrorKind::kUnsupported, "{}: partial_rotary_factor {} is not supported (only 1.0)", where,
         partial);
  if (type == "default") return;
  if (type != "yarn")
    fail(ErrorKind::kUnsupported, "{}: rope type '{}' is not supported (supported: default, yarn)",
         where, type);
  YarnScaling y;
  y.factor = get_num(r, "factor", where, 0.0);
  if (!(y.factor >= 1.0))
    fail(ErrorKind::kInvalidArgument, "{}: yarn factor must be >= 1, got {}", where, y.factor);
  y.original_max_position_embeddings =
      get_int(r, "original_max_position_embeddings", where, c.max_position_embeddings);
  y.beta_fast = get_num(r, "beta_fast", where, 32.0);
  y.beta_slow = get_num(r, "beta_slow", where, 1.0);
  y.attention_factor = get_opt_num(r, "attention_factor", where);
  y.mscale = get_opt_num(r, "mscale", where);
  y.mscale_all_dim = get_opt_num(r, "mscale_all_dim", where);
  if (auto it = r.find("truncate"); it != r.end() && it->is_boolean()) y.truncate = it->get<bool>();
  if (y.original_max_position_embeddings <= 0)
    fail(ErrorKind::kInvalidArgument, "{}: original_max_position_embeddings must be > 0", where);
  c.yarn = y;
}

void parse_quantization(const json& q, ModelConfig& c, const std::string& where) {
  std::string method = get_str(q, "quant_method", "");
  if (method != "fp8")
    fail(ErrorKind::kUnsupported,
         "{}: quantization method '{}' is not supported (supported: none, fp8 with 128x128 "
         "blocks)",
         where, method);
  Fp8Quantization f;
  f.fmt = get_str(q, "fmt", "e4m3");
  f.activation_scheme = get_str(q, "activation_scheme", "dynamic");
  auto bs = q.find("weight_block_size");
  if (bs == q.end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
      !(*bs)[1].is_number_integer())
    fail(ErrorKind::kUnsupported, "{}: fp8 without weight_block_size [n, k] is not supported",
         where);
  f.block_n = (*bs)[0].get<int>();
  f.block_k = (*bs)[1].get<int>();
  if (f.fmt != "e4m3" || f.activation_scheme != "dynamic" || f.block_n != 128 || f.block_k != 128)
    fail(ErrorKind::kUnsupported,
         "{}: fp8 {} / {} activations / blocks [{}, {}] is not supported (supported: e4m3, "
         "dynamic, [128, 128])",
         where, f.fmt, f.activation_scheme, f.block_n, f.block_k);
  c.fp8 = f;
}

}  // namespace

int64_t ModelConfig::num_params() const {
  const int64_t H = hidden_size, I = intermediate_size;
  int64_t layer = H * q_size() + 2 * H * kv_size() + int64_t(q_size()) * H + 3 * H * I + 2 * H +
                  2 * int64_t(head_dim);
  return int64_t(vocab_size) * H * (tie_word_embeddings ? 1 : 2) + layer * num_hidden_layers + H;
}

int64_t ModelConfig::num_linear_params() const {
  const int64_t H = hidden_size, I = intermediate_size;
  return (2 * H * q_size() + 2 * H * kv_size() + 3 * H * I) * num_hidden_layers;
}

ModelConfig parse_config(const json& j, const std::string& where) {
  if (!j.is_object()) fail(ErrorKind::kInvalidArgument, "{}: not a JSON object", where);
  ModelConfig c;
  c.model_type = get_str(j, "model_type", "");
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty())
    c.architecture = (*a)[0].is_string() ? (*a)[0].get<std::string>() : (*a)[0].dump();
  else
    c.architecture = c.model_type == "qwen3" ? "Qwen3ForCausalLM" : "";
  if (c.architecture != "Qwen3ForCausalLM" || (c.model_type != "qwen3" && !c.model_type.empty()))
    fail(ErrorKind::kUnsupported,
         "{}: architecture '{}' (model_type '{}') is not supported (supported: "
         "Qwen3ForCausalLM, model_type qwen3: the dense Qwen3 models)",
         where, c.architecture, c.model_type);
  c.model_type = "qwen3";

  c.hidden_size = get_int(j, "hidden_size", where, std::nullopt);
  c.intermediate_size = get_int(j, "intermediate_size", where, std::nullopt);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", where, std::nullopt);
  c.num_attention_heads = get_int(j, "num_attention_heads", where, std::nullopt);
  c.num_key_value_heads = get_int(j, "num_key_value_heads", where, c.num_attention_heads);
  c.vocab_size = get_int(j, "vocab_size", where, std::nullopt);
  if (c.num_attention_heads <= 0)
    fail(ErrorKind::kInvalidArgument, "{}: num_attention_heads must be > 0", where);
  c.head_dim = get_int(j, "head_dim", where, c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", where, 32768);
  c.max_window_layers = get_int(j, "max_window_layers", where, c.num_hidden_layers);
  c.rope_theta = get_num(j, "rope_theta", where, 10000.0);
  c.rms_norm_eps = get_num(j, "rms_norm_eps", where, 1e-6);
  if (auto t = j.find("tie_word_embeddings"); t != j.end() && t->is_boolean())
    c.tie_word_embeddings = t->get<bool>();
  if (auto b = j.find("attention_bias"); b != j.end() && b->is_boolean())
    c.attention_bias = b->get<bool>();
  c.hidden_act = get_str(j, "hidden_act", "silu");
  c.dtype = get_str(j, "dtype", get_str(j, "torch_dtype", "bfloat16"));
  c.bos_token_id = get_int(j, "bos_token_id", where, -1);
  if (auto e = j.find("eos_token_id"); e != j.end() && !e->is_null()) {
    if (e->is_array()) {
      for (auto& x : *e)
        if (x.is_number_integer()) c.eos_token_ids.push_back(x.get<int>());
    } else if (e->is_number_integer()) {
      c.eos_token_ids.push_back(e->get<int>());
    }
  }

  for (auto [v, name] : {std::pair{c.hidden_size, "hidden_size"},
                         {c.intermediate_size, "intermediate_size"},
                         {c.num_hidden_layers, "num_hidden_layers"},
                         {c.num_key_value_heads, "num_key_value_heads"},
                         {c.head_dim, "head_dim"},
                         {c.vocab_size, "vocab_size"},
                         {c.max_position_embeddings, "max_position_embeddings"}})
    if (v <= 0) fail(ErrorKind::kInvalidArgument, "{}: {} must be > 0", where, name);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(ErrorKind::kInvalidArgument,
         "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", where,
         c.num_attention_heads, c.num_key_value_heads);
  if (c.head_dim % 2 != 0 || c.head_dim > 512)
    fail(ErrorKind::kUnsupported, "{}: head_dim {} is not supported (even, at most 512)", where,
         c.head_dim);
  if (!(c.rms_norm_eps > 0))
    fail(ErrorKind::kInvalidArgument, "{}: rms_norm_eps must be > 0", where);
  if (c.attention_bias)
    fail(ErrorKind::kUnsupported,
         "{}: attention_bias true is not supported (Qwen3 has no biases; supported: false)", where);
  if (c.hidden_act != "silu")
    fail(ErrorKind::kUnsupported, "{}: hidden_act '{}' is not supported (supported: silu)", where,
         c.hidden_act);
  if (c.dtype != "bfloat16" && c.dtype != "float16" && c.dtype != "float32")
    fail(ErrorKind::kUnsupported,
         "{}: dtype '{}' is not supported (supported: bfloat16, float16, float32)", where, c.dtype);
  if (auto s = j.find("use_sliding_window"); s != j.end() && s->is_boolean() && s->get<bool>())
    fail(ErrorKind::kUnsupported,
         "{}: use_sliding_window true is not supported (supported: full attention in every "
         "layer)",
         where);
  if (auto lt = j.find("layer_types"); lt != j.end() && lt->is_array())
    for (auto& t : *lt)
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        fail(ErrorKind::kUnsupported,
             "{}: layer type {} is not supported (supported: full_attention)", where, t.dump());

  if (auto r = j.find("rope_parameters"); r != j.end() && !r->is_null()) parse_rope(*r, c, where);
  if (auto r = j.find("rope_scaling"); r != j.end() && !r->is_null()) parse_rope(*r, c, where);
  if (!(c.rope_theta > 0)) fail(ErrorKind::kInvalidArgument, "{}: rope_theta must be > 0", where);
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    parse_quantization(*q, c, where);
  return c;
}

ModelConfig load_config(const std::filesystem::path& dir) {
  auto path = dir / "config.json";
  if (!std::filesystem::exists(path))
    fail(ErrorKind::kNotFound, "{}: not found (is {} a Hugging Face model folder?)", path.string(),
         dir.string());
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(ErrorKind::kInvalidArgument, "{}: invalid JSON: {}", path.string(), e.what());
  }
  return parse_config(j, path.string());
}

}  // namespace tandem::model
