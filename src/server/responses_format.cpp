// Responses API shapes: the streaming events and the Response object. The output is a list
// of items in the order the model wrote them: a reasoning item (the think block), message
// items (the answer) and function_call items; a streamed item opens with
// response.output_item.added, grows by deltas and closes with response.output_item.done.
#include "server/responses.h"

namespace tandem::server {
namespace {

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(int(c));
  return a;
}

json logprobs_json(const std::vector<TokenLogprob>& lps) {
  json out = json::array();
  for (auto& lp : lps) {
    json top = json::array();
    for (auto& [b, l] : lp.top)
      top.push_back({{"token", b}, {"logprob", l}, {"bytes", bytes_array(b)}});
    out.push_back({{"token", lp.bytes},
                   {"logprob", lp.logprob},
                   {"bytes", bytes_array(lp.bytes)},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

class ResponsesFormatter : public Formatter {
 public:
  ResponsesFormatter(std::shared_ptr<const ResponsesRequest> req,
                     std::shared_ptr<ResponseStore> store,
                     std::shared_ptr<std::atomic<bool>> cancelled)
      : req_(std::move(req)),
        store_(std::move(store)),
        cancelled_(std::move(cancelled)),
        stream_(req_->gen.stream),
        resp_(initial_response(*req_, "in_progress")) {}

  const char* stream_content_type() const override { return "text/event-stream"; }

  std::string start() override {
    save(resp_);  // GET shows it in progress
    if (!stream_) return "";
    event({{"type", "response.created"}, {"response", resp_}});
    event({{"type", "response.in_progress"}, {"response", resp_}});
    return take();
  }

  std::string delta(const ChoiceDelta& d) override {
    if (d.index != 0) return "";
    bool lp_used = false;
    for (auto& p : d.pieces) {
      switch (p.kind) {
        case OutPiece::Kind::kReasoning:
          reasoning(p.text);
          break;
        case OutPiece::Kind::kText:
          text(p.text, lp_used ? std::vector<TokenLogprob>{} : d.logprobs);
          lp_used = true;
          break;
        case OutPiece::Kind::kCallBegin:
          call_begin(p.text);
          break;
        case OutPiece::Kind::kCallArgs:
          call_args(p.text);
          break;
        case OutPiece::Kind::kCallEnd:
          close();
          break;
      }
    }
    if (d.finish) finish_ = d.finish;
    return take();
  }

  std::string finish(const Totals& t) override {
    close();
    json r = resp_;
    const bool cancelled = cancelled_ && cancelled_->load();
    const bool length = finish_ == std::string("length");
    r["status"] = failed_     ? "failed"
                  : cancelled ? "cancelled"
                  : length    ? "incomplete"
                              : "completed";
    if (failed_) r["error"] = {{"code", "server_error"}, {"message", failed_msg_}};
    if (r["status"] == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["completed_at"] = unix_seconds();
    r["output"] = output_;
    r["usage"] = {{"input_tokens", t.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", t.cached_tokens}}},
                  {"output_tokens", t.completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", t.reasoning_tokens}}},
                  {"total_tokens", t.prompt_tokens + t.completion_tokens}};
    save(r);
    if (!stream_) return dump(r);
    const std::string st = r["status"];
    event({{"type", st == "failed"       ? "response.failed"
                    : st == "incomplete" ? "response.incomplete"
                                         : "response.completed"},
           {"response", r}});
    return take();
  }

  std::string stream_error(const std::string& msg) override {
    failed_ = true;
    failed_msg_ = msg;
    event({{"type", "error"}, {"code", "server_error"}, {"message", msg}, {"param", nullptr}});
    return take();
  }

  std::string error_body(const std::string& msg) override {
    close();
    json r = resp_;
    r["status"] = "failed";
    r["error"] = {{"code", "server_error"}, {"message", msg}};
    r["output"] = output_;
    save(r);
    return openai_error_body(500, msg);
  }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };

  void event(json e) {
    if (!stream_) return;
    e["sequence_number"] = seq_++;
    out_ += "event: " + e["type"].get<std::string>() + "\ndata: " + dump(e) + "\n\n";
  }
  std::string take() { return std::exchange(out_, std::string()); }

  json& item() { return output_.back(); }
  int index() const { return int(output_.size()) - 1; }
  json at(json e) {
    e["item_id"] = item()["id"];
    e["output_index"] = index();
    return e;
  }

  void open(Open kind, json it) {
    close();
    output_.push_back(std::move(it));
    open_ = kind;
    event({{"type", "response.output_item.added"}, {"output_index", index()}, {"item", item()}});
  }

  void reasoning(const std::string& s) {
    if (open_ != Open::kReasoning) {
      open(Open::kReasoning, {{"id", random_id("rs_", 24)},
                              {"type", "reasoning"},
                              {"summary", json::array()},
                              {"content", json::array()}});
      text_.clear();
      if (req_->summary)
        event(at({{"type", "response.reasoning_summary_part.added"},
                  {"summary_index", 0},
                  {"part", {{"type", "summary_text"}, {"text", ""}}}}));
      else
        event(at({{"type", "response.content_part.added"},
                  {"content_index", 0},
                  {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
    }
    text_ += s;
    if (req_->summary)
      event(at(
          {{"type", "response.reasoning_summary_text.delta"}, {"summary_index", 0}, {"delta", s}}));
    else
      event(at({{"type", "response.reasoning_text.delta"}, {"content_index", 0}, {"delta", s}}));
  }

  void text(const std::string& s, const std::vector<TokenLogprob>& lps) {
    if (open_ != Open::kMessage) {
      open(Open::kMessage, {{"id", random_id("msg_", 24)},
                            {"type", "message"},
                            {"status", "in_progress"},
                            {"role", "assistant"},
                            {"content", json::array()}});
      text_.clear();
      logprobs_.clear();
      event(
          at({{"type", "response.content_part.added"}, {"content_index", 0}, {"part", part("")}}));
    }
    text_ += s;
    if (req_->output_logprobs) logprobs_.insert(logprobs_.end(), lps.begin(), lps.end());
    json e = at({{"type", "response.output_text.delta"}, {"content_index", 0}, {"delta", s}});
    e["logprobs"] = req_->output_logprobs ? logprobs_json(lps) : json::array();
    event(std::move(e));
  }

  json part(const std::string& t) const {
    json p = {{"type", "output_text"}, {"text", t}, {"annotations", json::array()}};
    p["logprobs"] = req_->output_logprobs ? logprobs_json(logprobs_) : json::array();
    return p;
  }

  void call_begin(const std::string& name) {
    open(Open::kCall, {{"id", random_id("fc_", 24)},
                       {"type", "function_call"},
                       {"status", "in_progress"},
                       {"call_id", random_id("call_", 24)},
                       {"name", name},
                       {"arguments", ""}});
  }

  void call_args(const std::string& s) {
    if (open_ != Open::kCall) return;
    item()["arguments"] = item()["arguments"].get<std::string>() + s;
    event(at({{"type", "response.function_call_arguments.delta"}, {"delta", s}}));
  }

  // Ends the open item with its .done events.
  void close() {
    switch (open_) {
      case Open::kNone:
        return;
      case Open::kReasoning: {
        json rt = {{"type", "reasoning_text"}, {"text", text_}};
        item()["content"] = json::array({rt});
        if (req_->summary) {
          json st = {{"type", "summary_text"}, {"text", text_}};
          item()["summary"] = json::array({st});
          event(at({{"type", "response.reasoning_summary_text.done"},
                    {"summary_index", 0},
                    {"text", text_}}));
          event(at({{"type", "response.reasoning_summary_part.done"},
                    {"summary_index", 0},
                    {"part", st}}));
        } else {
          event(at(
              {{"type", "response.reasoning_text.done"}, {"content_index", 0}, {"text", text_}}));
          event(at({{"type", "response.content_part.done"}, {"content_index", 0}, {"part", rt}}));
        }
        break;
      }
      case Open::kMessage: {
        json p = part(text_);
        item()["content"] = json::array({p});
        item()["status"] = "completed";
        json e = at({{"type", "response.output_text.done"}, {"content_index", 0}, {"text", text_}});
        e["logprobs"] = p["logprobs"];
        event(std::move(e));
        event(at({{"type", "response.content_part.done"}, {"content_index", 0}, {"part", p}}));
        break;
      }
      case Open::kCall:
        item()["status"] = "completed";
        event(at({{"type", "response.function_call_arguments.done"},
                  {"name", item()["name"]},
                  {"arguments", item()["arguments"]}}));
        break;
    }
    event({{"type", "response.output_item.done"}, {"output_index", index()}, {"item", item()}});
    open_ = Open::kNone;
  }

  void save(const json& r) {
    if (!req_->store || !store_) return;
    ResponseStore::Entry e;
    e.response = r;
    e.conversation = req_->context;
    for (auto& it : r["output"]) e.conversation.push_back(it);
    e.input = req_->input;
    e.background = req_->background;
    const std::string st = r["status"];
    if (st == "queued" || st == "in_progress") e.cancel = cancelled_;
    store_->put(req_->id, std::move(e));
  }

  std::shared_ptr<const ResponsesRequest> req_;
  std::shared_ptr<ResponseStore> store_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  bool stream_;
  json resp_;
  json output_ = json::array();
  Open open_ = Open::kNone;
  std::string text_;  // of the open reasoning or message item
  std::vector<TokenLogprob> logprobs_;
  std::string out_;
  int64_t seq_ = 0;
  const char* finish_ = nullptr;
  bool failed_ = false;
  std::string failed_msg_;
};

}  // namespace

std::unique_ptr<Formatter> make_responses_formatter(std::shared_ptr<const ResponsesRequest> req,
                                                    std::shared_ptr<ResponseStore> store,
                                                    std::shared_ptr<std::atomic<bool>> cancelled) {
  return std::make_unique<ResponsesFormatter>(std::move(req), std::move(store),
                                              std::move(cancelled));
}

}  // namespace tandem::server
