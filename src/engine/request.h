#pragma once
// What the front tier hands the engine, and what comes back. The engine thread produces
// events; any thread consumes them. Nothing here parses JSON or touches a socket.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/sampling_knobs.h"
#include "model/runner.h"

namespace tandem::structured {
struct TokenConstraint;
}

namespace tandem::engine {

using model::TokenId;
using RequestId = uint64_t;

struct SamplingParams : SamplingKnobs {
  int penalty_last_n = -1;       // tokens the penalties look back over; -1 = all
  std::optional<uint64_t> seed;  // same seed, same prompt, same text
  int top_logprobs = -1;         // -1: no logprobs; 0: sampled token only; n: top n too
};

enum class Priority { kAuto, kInteractive, kBulk };

struct Request {
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int max_tokens = 256;                 // generated tokens at most
  std::vector<TokenId> stop_token_ids;  // besides EOS
  bool ignore_eos = false;
  int n = 1;  // samples sharing the prompt's KV blocks
  Priority priority = Priority::kAuto;
  // Structured output: each sample's tokens are masked to what the constraint allows
  // (src/structured); it ends (kStop) once the constraint is complete and EOS is taken.
  std::shared_ptr<const structured::TokenConstraint> constraint;
};

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* to_string(FinishReason r);

struct TopLogprob {
  TokenId token;
  float logprob;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache
  double queue_ms = -1;   // from the engine taking the request to its first scheduled step
};

struct Event {
  enum class Kind { kToken, kFinish } kind = Kind::kToken;
  int sample = 0;  // which of the n samples
  // kToken
  TokenId token = -1;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;
  // kFinish (one per sample)
  FinishReason reason = FinishReason::kStop;
  std::string error;  // set when reason == kError
  Usage usage;
};

// The consumer side of one request's event stream. Thread-safe: the engine pushes, one
// consumer pops. A consumer that lives on an event loop sets a notifier and drains.
class RequestHandle {
 public:
  explicit RequestHandle(RequestId id) : id_(id) {}
  RequestId id() const { return id_; }

  // Engine side.
  void push(Event e);
  void push_many(std::vector<Event>& events);

  // Consumer side. Blocking pop with a deadline; false on timeout.
  bool next(Event& out, std::chrono::milliseconds timeout = std::chrono::hours(24));
  // Moves every pending event into `out`; returns how many.
  size_t drain(std::vector<Event>& out);
  // Called (on the engine thread, briefly) after new events arrive.
  void set_notifier(std::function<void()> fn);
  bool finished() const;  // every sample has its finish event queued or consumed

 private:
  RequestId id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> q_;
  std::function<void()> notify_;
  int finishes_seen_ = 0;
  int n_ = 1;
  friend class Engine;
  friend class EngineCore;  // sets n_ when it accepts the request
};

}  // namespace tandem::engine
