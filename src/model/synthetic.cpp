#include "model/synthetic.h"

#include "core/error.h"

namespace tandem::model {
namespace {

struct Shape {
  const char* size;
  int hidden, inter, layers, heads, kv_heads;
  bool tied;
};

// hidden, intermediate, layers, Q/KV heads, tied embeddings (REFERENCE.md section 1).
constexpr Shape kShapes[] = {
    {"0.6b", 1024, 3072, 28, 16, 8, true},  {"1.7b", 2048, 6144, 28, 16, 8, true},
    {"4b", 2560, 9728, 36, 32, 8, true},    {"8b", 4096, 12288, 36, 32, 8, false},
    {"14b", 5120, 17408, 40, 40, 8, false}, {"32b", 5120, 25600, 64, 64, 8, false},
};

}  // namespace

bool is_synthetic(const std::string& model) {
  return model.rfind(kSyntheticPrefix, 0) == 0;
}

std::vector<std::string> synthetic_names() {
  std::vector<std::string> r;
  for (auto& s : kShapes) r.push_back(std::string(kSyntheticPrefix) + "qwen3-" + s.size);
  return r;
}

ModelConfig synthetic_config(const std::string& model) {
  for (auto& s : kShapes) {
    if (model != std::string(kSyntheticPrefix) + "qwen3-" + s.size) continue;
    ModelConfig c;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.inter;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = 128;
    c.vocab_size = 151936;
    c.max_position_embeddings = 40960;
    c.max_window_layers = s.layers;
    c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = s.tied;
    c.bos_token_id = 151643;
    c.eos_token_ids = {151645};
    return c;
  }
  std::string names;
  for (auto& n : synthetic_names()) names += (names.empty() ? "" : ", ") + n;
  fail(ErrorKind::kNotFound, "unknown synthetic model '{}' (known: {})", model, names);
}

}  // namespace tandem::model
