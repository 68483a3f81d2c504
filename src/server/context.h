#pragma once
// What every request handler shares: the generator (the engine, or a fake in tests), the
// tokenizer, the served model's facts and the server options.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/config.h"
#include "model/model_loader.h"
#include "server/thinking.h"
#include "tokenizer/tokenizer.h"

namespace tandem::store {
class ConversationStore;
}

namespace tandem::server {

class AnswerHub;

// The engine as the server uses it; tests substitute a scripted one.
class Generator {
 public:
  virtual ~Generator() = default;
  // Throws tandem::Error(kInvalidArgument) for requests the engine can never run.
  virtual std::shared_ptr<engine::RequestHandle> submit(engine::Request r) = 0;
  virtual void cancel(engine::RequestId id) = 0;
  virtual int max_model_len() const = 0;
  virtual engine::EngineStats stats() const = 0;
};

// The real engine behind the Generator interface.
std::unique_ptr<Generator> wrap_engine(std::unique_ptr<engine::Engine> e);

struct ModelInfo {
  std::vector<std::string> names;  // served names; names[0] is the main one
  std::string source;              // checkpoint folder or "synthetic:NAME"
  std::string backend;             // "cpu" or "cuda"
  std::optional<model::ModelConfig> config;
  uint64_t size_bytes = 0;  // weights on disk (0 for synthetic)
  // The products' weights as served (Ollama's details.quantization_level): "BF16" or "FP8".
  std::string quantization_level = "BF16";
  // Sampling defaults (generation_config.json, model/model_loader.h), under the request's.
  model::GenerationDefaults defaults = model::read_generation_defaults({});
  std::chrono::system_clock::time_point loaded_at = std::chrono::system_clock::now();
};

struct ServerOptions {
  ThinkingDefault thinking = ThinkingDefault::kOn;
  int thinking_budget = -1;  // tokens; -1 = none
  int max_waiting = 1024;    // requests queued in the engine before 429
};

struct ServerContext {
  Generator* gen = nullptr;
  std::shared_ptr<const tok::Tokenizer> tok;
  ModelInfo model;
  ServerOptions opt;
  std::vector<engine::TokenId> eos_ids;  // generation ends on these (besides stop ids)
  // The web page's conversations and its answers (null: the routes answer 503).
  store::ConversationStore* conversations = nullptr;
  AnswerHub* answers = nullptr;

  // True when `name` is a served name, also in Ollama's "name:latest" form.
  bool serves(const std::string& name) const;
};

}  // namespace tandem::server
