#pragma once
// The engine: one thread running the step loop (EngineCore::step) over a model::Runner.
// Front-tier threads call submit()/cancel(); events flow back through each request's
// RequestHandle. See docs/ENGINE.md.
#include <memory>

#include "engine/options.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "model/runner.h"

namespace tandem::engine {

class Engine {
 public:
  // Starts the engine thread.
  Engine(std::unique_ptr<model::Runner> runner, EngineOptions opt);
  ~Engine();  // stops the thread; unfinished requests end with FinishReason::kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Throws tandem::Error(kInvalidArgument) for a request the engine can never
  // run (empty prompt, prompt + max_tokens over max_model_len, n < 1, token ids out of range).
  std::shared_ptr<RequestHandle> submit(Request r);
  // Thread-safe; unknown or finished ids are ignored. The request's KV blocks are freed in
  // the next step and its handle receives kFinish with kCancelled.
  void cancel(RequestId id);

  EngineStats stats() const;
  int max_model_len() const;
  int vocab_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::engine
