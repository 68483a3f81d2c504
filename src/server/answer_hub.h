#pragma once
// Answers that outlive the page: the web page's answers run here, not on a connection. The
// hub drives each answer's Generation on its own thread, keeps its text and the list of
// delta events, and stores the answer in the conversation store as it goes (a checkpoint a
// second) and when it ends. A page that reloads or reconnects subscribes again from the
// last event it has (AnswerRun::read), so no text is lost or repeated; an answer that ends
// with nobody watching is in the store all the same.
//
// Bounds: at most `max_running` answers at once (429 past that), at most `max_bytes` of
// text per answer (the answer ends as an error past that), and a finished answer is kept
// for re-attaching only `keep_finished`, then dropped (the store has it).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/context.h"
#include "server/gen_request.h"
#include "server/generation.h"
#include "store/conversation_store.h"

namespace tandem::server {

struct AnswerHubOptions {
  size_t max_running = 64;
  size_t max_bytes = 8u << 20;
  std::chrono::milliseconds keep_finished{std::chrono::minutes(10)};
  std::chrono::milliseconds checkpoint{1000};
};

class AnswerHub;

// One answer: its text so far and its events. Subscribers read it from any thread.
class AnswerRun {
 public:
  // `msg` is the answer's message as stored when it started (status "streaming").
  AnswerRun(std::string owner, std::string conversation_id, const store::MessageRecord& msg);

  const std::string& id() const { return id_; }
  const std::string& owner() const { return owner_; }
  const std::string& conversation_id() const { return conversation_id_; }

  // SSE for the delta events after event number `from` (events are numbered from 1), then
  // `done` once the answer has ended. Advances `from`; true when the done event was written.
  bool read(uint64_t& from, std::string& out);
  // `notify` is called (on the hub thread) whenever there is more to read; returns a token
  // for unsubscribe().
  int subscribe(std::function<void()> notify);
  void unsubscribe(int token);

  bool finished();
  std::string status();
  uint64_t events();
  // The stored message as the page sees it (id, content, reasoning, status, meta).
  json message();

 private:
  friend class AnswerHub;
  struct Event {
    size_t r_off, r_len, c_off, c_len;
    int tools_from, tools_to;  // tool calls [from, to) of `tools_`
  };
  void notify_all();  // with mu_ held

  const std::string id_, owner_, conversation_id_, parent_id_;
  const int64_t created_ms_;
  std::mutex mu_;
  std::string reasoning_, content_;
  json tools_ = json::array();
  std::vector<Event> events_;
  bool finished_ = false;
  std::string status_ = "streaming";
  json meta_;
  std::map<int, std::function<void()>> subs_;
  int next_sub_ = 1;

  // Hub thread only, after `started_`.
  std::unique_ptr<Generation> gen_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_requested_{false};
  std::chrono::steady_clock::time_point t_start_, t_think_, t_content_, t_persist_, t_end_;
  bool dirty_ = false;
  std::string finish_reason_;
};

class AnswerHub {
 public:
  AnswerHub(const ServerContext& ctx, store::ConversationStore& store, AnswerHubOptions opt = {});
  ~AnswerHub();  // stops every answer, storing each as interrupted
  AnswerHub(const AnswerHub&) = delete;
  AnswerHub& operator=(const AnswerHub&) = delete;

  // Validates `req` (ApiError as the OpenAI routes throw it) before anything is started.
  std::unique_ptr<Generation> prepare(const GenRequest& req);
  // Starts the prepared generation as the answer stored as `msg`. Throws
  // ApiError(429) when the hub is full or the engine queue is.
  std::shared_ptr<AnswerRun> start(const std::string& owner, const std::string& conversation_id,
                                   const store::MessageRecord& msg,
                                   std::unique_ptr<Generation> gen);
  // The owner's answer with this id, running or recently finished; null when there is none.
  std::shared_ptr<AnswerRun> find(const std::string& owner, const std::string& id);
  // Stops the answer (the engine frees it within a step). False when it had already ended.
  bool stop(const std::shared_ptr<AnswerRun>& run);
  size_t running();

 private:
  void wake(const std::shared_ptr<AnswerRun>& run);
  void loop();
  void step(AnswerRun& run);
  void finish(AnswerRun& run, const std::string& status, const std::string& error = {});
  void persist(AnswerRun& run);
  void housekeeping(std::chrono::steady_clock::time_point now);

  const ServerContext& ctx_;
  store::ConversationStore& store_;
  AnswerHubOptions opt_;
  std::mutex mu_;  // runs_, pending_, stopping_
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<AnswerRun>> runs_;
  std::vector<std::weak_ptr<AnswerRun>> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::server
