#pragma once
// One API request in flight: its engine requests (one per choice), and the text pipeline
// of each choice: token ids -> incremental detokenizer -> stop strings -> <think> split ->
// tool-call parser -> deltas. The API formatters turn deltas into SSE chunks, NDJSON lines
// or one final body; the HTTP transport only moves bytes.
//
// Threading: start(), poll() and cancel() run on the connection's executor; the notifier
// passed to start() is called on the engine thread and must only schedule a poll().
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/context.h"
#include "server/prepare.h"

namespace tandem::server {

struct TokenLogprob {
  std::string bytes;  // the token's raw bytes (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // (bytes, logprob), most likely first
};

// A choice's output in the order it was written: what APIs with ordered content blocks
// (Responses items, Anthropic blocks) and streamed tool-call arguments are built from.
struct OutPiece {
  enum class Kind { kReasoning, kText, kCallBegin, kCallArgs, kCallEnd };
  Kind kind = Kind::kText;
  std::string text;  // kCallBegin: the function's name; kCallArgs: a fragment of its arguments
};

struct ChoiceDelta {
  int index = 0;
  std::string reasoning, content;
  std::vector<ToolCall> calls;   // calls that ended in this delta, whole
  std::vector<OutPiece> pieces;  // the same output in order, calls as they are written
  std::vector<TokenLogprob> logprobs;
  const char* finish = nullptr;  // set on the choice's last delta: stop, length, tool_calls
  bool empty() const {
    return reasoning.empty() && content.empty() && calls.empty() && pieces.empty() &&
           logprobs.empty() && !finish;
  }
};

struct Totals {
  int prompt_tokens = 0;  // of one prompt (the first), as OpenAI counts for n > 1
  int completion_tokens = 0;
  int cached_tokens = 0;
  int reasoning_tokens = 0;  // of the completion tokens, those inside a think block
  int64_t total_ns = 0, prompt_eval_ns = 0, eval_ns = 0;
  double engine_queue_ms = -1;  // the first choice's wait in the engine (-1: not reported)
};

class Generation {
 public:
  // Prepares the prompts; throws ApiError for bad or oversized requests.
  Generation(const ServerContext& ctx, const GenRequest& req);
  ~Generation();  // cancels whatever still runs
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits every choice; throws ApiError (400, 429) if the engine refuses.
  void start(std::function<void()> notify);
  // Moves new output into `out` (at most one delta per choice per call). True once every
  // choice has finished.
  bool poll(std::vector<ChoiceDelta>& out);
  // The client went away: stop every engine request now.
  void cancel();

  bool finished() const;
  int num_choices() const { return int(samples_.size()); }
  const Totals& totals() const { return totals_; }
  const std::string& error() const { return error_; }  // engine failure, "" if none
  const Prepared& prepared() const { return prep_; }
  const GenRequest& request() const { return req_; }
  // For the request record: when the prompts went to the engine and when the first token
  // came (time_point{} while not yet), and the first choice's finish ("" until it ends).
  std::chrono::steady_clock::time_point submitted_at() const { return t_submit_; }
  std::chrono::steady_clock::time_point first_token_at() const {
    return any_token_ ? t_first_ : std::chrono::steady_clock::time_point{};
  }
  const char* finish_reason() const { return finish_; }

 private:
  struct Sample;
  void submit(Sample& s, std::vector<engine::TokenId> prompt, int max_tokens);
  void handle_events(Sample& s, ChoiceDelta& d);
  void on_token(Sample& s, const engine::Event& e, ChoiceDelta& d);
  void on_finish(Sample& s, const engine::Event& e, ChoiceDelta& d);
  void feed(Sample& s, std::string_view text, ChoiceDelta& d);
  void route(Sample& s, std::string_view text, ChoiceDelta& d);
  void close_text(Sample& s, ChoiceDelta& d);

  const ServerContext& ctx_;
  GenRequest req_;
  Prepared prep_;
  std::vector<std::unique_ptr<Sample>> samples_;
  std::function<void()> notify_;
  std::vector<engine::TokenId> close_think_ids_;
  Totals totals_;
  std::string error_;
  std::chrono::steady_clock::time_point t0_, t_first_, t_submit_;
  bool any_token_ = false;
  const char* finish_ = "";
};

}  // namespace tandem::server
