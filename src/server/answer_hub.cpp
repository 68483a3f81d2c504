#include "server/answer_hub.h"

#include "core/log.h"
#include "server/api_error.h"
#include "server/formatter.h"

namespace tandem::server {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

AnswerRun::AnswerRun(std::string owner, std::string conversation_id,
                     const store::MessageRecord& msg)
    : id_(msg.id),
      owner_(std::move(owner)),
      conversation_id_(std::move(conversation_id)),
      parent_id_(msg.parent_id),
      created_ms_(msg.created_ms),
      meta_(msg.meta) {}

void AnswerRun::notify_all() {
  for (auto& [token, fn] : subs_) fn();
}

int AnswerRun::subscribe(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  int t = next_sub_++;
  subs_.emplace(t, std::move(notify));
  return t;
}

void AnswerRun::unsubscribe(int token) {
  std::lock_guard lock(mu_);
  subs_.erase(token);
}

bool AnswerRun::finished() {
  std::lock_guard lock(mu_);
  return finished_;
}

std::string AnswerRun::status() {
  std::lock_guard lock(mu_);
  return status_;
}

uint64_t AnswerRun::events() {
  std::lock_guard lock(mu_);
  return events_.size();
}

json AnswerRun::message() {
  std::lock_guard lock(mu_);
  return json{{"id", id_},
              {"parent_id", parent_id_.empty() ? json(nullptr) : json(parent_id_)},
              {"role", "assistant"},
              {"content", content_},
              {"reasoning", reasoning_},
              {"status", status_},
              {"meta", meta_},
              {"created_ms", created_ms_}};
}

bool AnswerRun::read(uint64_t& from, std::string& out) {
  std::unique_lock lock(mu_);
  while (from < events_.size()) {
    const Event& e = events_[from++];
    json d = json::object();
    if (e.r_len) d["r"] = reasoning_.substr(e.r_off, e.r_len);
    if (e.c_len) d["c"] = content_.substr(e.c_off, e.c_len);
    if (e.tools_to > e.tools_from) {
      json t = json::array();
      for (int i = e.tools_from; i < e.tools_to; ++i) t.push_back(tools_[size_t(i)]);
      d["t"] = std::move(t);
    }
    out += "id: " + std::to_string(from) + "\nevent: delta\ndata: " + dump(d) + "\n\n";
  }
  if (!finished_) return false;
  lock.unlock();
  out += "event: done\ndata: " + dump(json{{"message", message()}}) + "\n\n";
  return true;
}

AnswerHub::AnswerHub(const ServerContext& ctx, store::ConversationStore& store,
                     AnswerHubOptions opt)
    : ctx_(ctx), store_(store), opt_(opt), thread_([this] { loop(); }) {}

AnswerHub::~AnswerHub() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // What still runs is stored as it stands.
  for (auto& [id, run] : runs_) {
    if (run->finished()) continue;
    if (run->gen_) run->gen_->cancel();
    finish(*run, "interrupted");
  }
}

std::unique_ptr<Generation> AnswerHub::prepare(const GenRequest& req) {
  return std::make_unique<Generation>(ctx_, req);
}

size_t AnswerHub::running() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto& [id, run] : runs_) n += run->finished() ? 0 : 1;
  return n;
}

std::shared_ptr<AnswerRun> AnswerHub::start(const std::string& owner,
                                            const std::string& conversation_id,
                                            const store::MessageRecord& msg,
                                            std::unique_ptr<Generation> gen) {
  if (running() >= opt_.max_running)
    throw ApiError(429, "rate_limit_exceeded", "",
                   fmt::format("{} answers are running, the most this server keeps; retry when "
                               "one has finished",
                               opt_.max_running));
  auto run = std::make_shared<AnswerRun>(owner, conversation_id, msg);
  run->gen_ = std::move(gen);
  run->t_start_ = run->t_persist_ = Clock::now();
  std::weak_ptr<AnswerRun> weak = run;
  // Called on the engine thread: only queue the run for the hub thread.
  run->gen_->start([this, weak] {
    if (auto r = weak.lock()) wake(r);
  });
  {
    std::lock_guard lock(mu_);
    runs_[run->id()] = run;
  }
  run->started_.store(true, std::memory_order_release);
  wake(run);  // events that came before `started_` was set
  return run;
}

std::shared_ptr<AnswerRun> AnswerHub::find(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second->owner() != owner) return nullptr;
  return it->second;
}

bool AnswerHub::stop(const std::shared_ptr<AnswerRun>& run) {
  if (run->finished()) return false;
  run->stop_requested_ = true;
  wake(run);
  return true;
}

void AnswerHub::wake(const std::shared_ptr<AnswerRun>& run) {
  {
    std::lock_guard lock(mu_);
    pending_.push_back(run);
  }
  cv_.notify_one();
}

void AnswerHub::loop() {
  std::unique_lock lock(mu_);
  auto next_house = Clock::now() + std::chrono::milliseconds(250);
  for (;;) {
    cv_.wait_until(lock, next_house, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    std::vector<std::weak_ptr<AnswerRun>> work;
    work.swap(pending_);
    lock.unlock();
    for (auto& w : work) {
      auto run = w.lock();
      if (!run || !run->started_.load(std::memory_order_acquire) || run->finished()) continue;
      try {
        step(*run);
      } catch (const std::exception& e) {
        // One answer's failure (the store, the parsers) never stops the others.
        spdlog::error("answer {}: {}", run->id(), e.what());
        if (run->gen_) run->gen_->cancel();
        try {
          finish(*run, "error", e.what());
        } catch (const std::exception& e2) {
          spdlog::error("answer {}: {}", run->id(), e2.what());
        }
      }
    }
    auto now = Clock::now();
    if (now >= next_house) {
      housekeeping(now);
      next_house = now + std::chrono::milliseconds(250);
    }
    lock.lock();
  }
}

void AnswerHub::step(AnswerRun& run) {
  std::vector<ChoiceDelta> deltas;
  const bool done = run.gen_->poll(deltas);
  const auto now = Clock::now();
  bool too_long = false;
  {
    std::lock_guard lock(run.mu_);
    for (auto& d : deltas) {
      if (d.index != 0) continue;
      if (d.finish) run.finish_reason_ = d.finish;
      if (d.reasoning.empty() && d.content.empty() && d.calls.empty()) continue;
      if (!d.reasoning.empty() && run.t_think_ == Clock::time_point{}) run.t_think_ = now;
      if (!d.content.empty() && run.t_content_ == Clock::time_point{}) run.t_content_ = now;
      AnswerRun::Event e{run.reasoning_.size(), d.reasoning.size(),     run.content_.size(),
                         d.content.size(),      int(run.tools_.size()), 0};
      run.reasoning_ += d.reasoning;
      run.content_ += d.content;
      for (auto& c : d.calls)
        run.tools_.push_back(json{{"name", c.name}, {"arguments", c.arguments}});
      e.tools_to = int(run.tools_.size());
      run.events_.push_back(e);
      run.dirty_ = true;
      too_long = run.reasoning_.size() + run.content_.size() > opt_.max_bytes;
    }
    if (!deltas.empty()) run.notify_all();
  }
  if (too_long) {
    run.gen_->cancel();
    finish(run, "error", fmt::format("the answer grew past {} bytes", opt_.max_bytes));
    return;
  }
  if (done) {
    const std::string& err = run.gen_->error();
    finish(run, err.empty() ? "done" : "error", err);
  } else if (run.stop_requested_) {
    // Everything generated so far was taken above; the engine frees the request next step.
    run.gen_->cancel();
    finish(run, "stopped");
  }
}

void AnswerHub::finish(AnswerRun& run, const std::string& status, const std::string& error) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(run.mu_);
    if (run.finished_) return;
    run.t_end_ = now;
    json& m = run.meta_;
    if (run.gen_) {
      const Totals& t = run.gen_->totals();
      m["prompt_tokens"] = t.prompt_tokens;
      m["cached_tokens"] = t.cached_tokens;
      m["output_tokens"] = t.completion_tokens;
      if (t.completion_tokens > 0 && t.prompt_eval_ns > 0) m["ttft_ms"] = t.prompt_eval_ns / 1e6;
      if (t.completion_tokens > 1 && t.eval_ns > 0)
        m["tokens_per_s"] = (t.completion_tokens - 1) / (t.eval_ns / 1e9);
    }
    m["total_ms"] = ms_between(run.t_start_, now);
    if (run.t_think_ != Clock::time_point{})
      m["thinking_ms"] =
          ms_between(run.t_think_, run.t_content_ != Clock::time_point{} ? run.t_content_ : now);
    if (!run.finish_reason_.empty()) m["finish_reason"] = run.finish_reason_;
    if (!run.tools_.empty()) m["tool_calls"] = run.tools_;
    if (!error.empty()) m["error"] = error;
    run.status_ = status;
  }
  persist(run);
  {
    std::lock_guard lock(run.mu_);
    run.finished_ = true;
    run.notify_all();
  }
  run.gen_.reset();  // the engine request is over (or cancelled): free the prompt and parsers
}

void AnswerHub::persist(AnswerRun& run) {
  std::string content, reasoning, status;
  json meta;
  {
    std::lock_guard lock(run.mu_);
    content = run.content_;
    reasoning = run.reasoning_;
    status = run.status_;
    meta = run.meta_;
    run.dirty_ = false;
    run.t_persist_ = Clock::now();
  }
  store_.update_message(run.id(), content, reasoning, status, meta);
}

void AnswerHub::housekeeping(Clock::time_point now) {
  std::vector<std::shared_ptr<AnswerRun>> all;
  {
    std::lock_guard lock(mu_);
    for (auto it = runs_.begin(); it != runs_.end();) {
      auto& r = it->second;
      bool drop;
      {
        std::lock_guard rl(r->mu_);
        drop = r->finished_ && now - r->t_end_ > opt_.keep_finished;
      }
      if (drop)
        it = runs_.erase(it);
      else
        all.push_back((it++)->second);
    }
  }
  // Checkpoints: a server that dies mid-answer keeps what was written up to a second ago.
  for (auto& r : all) {
    bool due;
    {
      std::lock_guard rl(r->mu_);
      due = !r->finished_ && r->dirty_ && now - r->t_persist_ >= opt_.checkpoint;
    }
    if (due) {
      try {
        persist(*r);
      } catch (const std::exception& e) {
        spdlog::warn("answer {}: checkpoint failed: {}", r->id(), e.what());
      }
    }
  }
}

}  // namespace tandem::server
