#pragma once
// OpenAI's Responses API: POST /v1/responses and the responses it keeps.
//
//  - responses_request.cpp: the request body -> a GenRequest (input items -> chat messages)
//    plus what the Response object repeats back;
//  - responses_format.cpp: a Generation's deltas -> the streaming events
//    (response.created, ...output_item.added, ...reasoning_text.delta, ...output_text.delta,
//    ...function_call_arguments.delta, ...output_item.done, response.completed) or one
//    Response object; the finished response goes into the store;
//  - responses_store.cpp: the bounded in-memory store (previous_response_id, GET, DELETE,
//    input_items) and the runner of `background` responses (GET to poll, cancel);
//  - routes_responses.cpp: the routes.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "server/formatter.h"
#include "server/gen_request.h"
#include "server/generation.h"

namespace tandem::server {

class ResponseStore {
 public:
  struct Limits {
    size_t max_entries = 4096;
    size_t max_bytes = size_t(64) << 20;  // JSON text of the entries, all told
  };
  struct Entry {
    json response;      // the Response object, as GET returns it
    json conversation;  // the items a follow-up continues from: its context, then its output
    json input;         // the request's own input items (GET .../input_items)
    bool background = false;
    // Set while a background run is in flight; cancel() raises it.
    std::shared_ptr<std::atomic<bool>> cancel;
  };

  ResponseStore() : ResponseStore(Limits{}) {}
  explicit ResponseStore(Limits l) : limits_(l) {}

  // Inserts or replaces; the least recently used entries go when a limit is passed. An id
  // that was erased stays erased (a background run that ends later does not bring it back).
  void put(const std::string& id, Entry e);
  std::optional<Entry> get(const std::string& id);
  bool erase(const std::string& id);
  // An item of a stored conversation by its id (input `item_reference`s).
  std::optional<json> find_item(const std::string& item_id);
  size_t size() const;

 private:
  struct Slot {
    std::string id;
    Entry e;
    size_t bytes = 0;
  };
  void evict();
  Limits limits_;
  mutable std::mutex mu_;
  std::list<Slot> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Slot>::iterator> index_;
  size_t bytes_ = 0;
  std::unordered_set<std::string> erased_;
  std::deque<std::string> erased_order_;  // the oldest forgotten first, beyond max_entries
};

// Drives `background: true` generations on its own thread: nobody waits on a socket for
// them, GET reads their progress from the store and cancel stops them.
class BackgroundRuns {
 public:
  BackgroundRuns() = default;
  ~BackgroundRuns();  // cancels what still runs and joins the thread
  BackgroundRuns(const BackgroundRuns&) = delete;
  BackgroundRuns& operator=(const BackgroundRuns&) = delete;

  // The notifier to start `g` with (before run()): it wakes this runner.
  std::function<void()> notifier();
  // Takes a started generation and its (non-streaming) formatter; the formatter's finish()
  // stores the result. `cancel` raised: the generation is stopped.
  void run(std::unique_ptr<Generation> g, std::unique_ptr<Formatter> f,
           std::shared_ptr<std::atomic<bool>> cancel);

 private:
  struct Job {
    std::unique_ptr<Generation> g;
    std::unique_ptr<Formatter> f;
    std::shared_ptr<std::atomic<bool>> cancel;
    bool cancelled = false;
  };
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Job>> jobs_;
  bool wake_ = false, stop_ = false;
  std::thread thread_;
};

struct ResponsesRequest {
  GenRequest gen;
  std::string id;  // "resp_..."
  json input;      // this request's input items, ids filled in
  json context;    // what the model sees: the previous conversation, then `input`
  std::string previous_response_id;
  json instructions;  // a string or null
  bool store = true;
  bool background = false;
  bool summary = false;          // reasoning.summary asked for: the reasoning also as summary
  bool output_logprobs = false;  // include: message.output_text.logprobs
  json echo;                     // the request fields the Response object repeats
};

// Parses and validates a body; `store` resolves previous_response_id and item references.
// Throws ApiError (400 naming the field, 404 for an unknown previous response).
ResponsesRequest parse_responses_request(const json& body, ResponseStore& store);

// The Response object in its state before any output ("queued" or "in_progress").
json initial_response(const ResponsesRequest& r, const std::string& status);

// Streams the documented events (or, not streaming, builds the Response object); when
// `req.store`, the final response and its conversation go into `store`. `cancelled`, when
// raised before the end, makes the final status "cancelled".
std::unique_ptr<Formatter> make_responses_formatter(std::shared_ptr<const ResponsesRequest> req,
                                                    std::shared_ptr<ResponseStore> store,
                                                    std::shared_ptr<std::atomic<bool>> cancelled);

}  // namespace tandem::server
