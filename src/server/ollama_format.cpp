// Ollama shapes: /api/chat and /api/generate lines (NDJSON) and the final object with
// counts and durations in nanoseconds.
#include "server/formatter.h"

namespace tandem::server {
namespace {

json ollama_calls(const std::vector<ToolCall>& calls, int& next_index) {
  json out = json::array();
  for (auto& c : calls) {
    // Ollama sends arguments as an object; a call's arguments are a JSON object by
    // construction (ToolCallParser), but a model may write a non-object string.
    json args = json::parse(c.arguments, nullptr, false);
    if (args.is_discarded() || !args.is_object()) args = json::object();
    out.push_back({{"function", {{"index", next_index++}, {"name", c.name}, {"arguments", args}}}});
  }
  return out;
}

class OllamaFormatter : public Formatter {
 public:
  OllamaFormatter(const Generation& g, const std::string& model)
      : g_(g), chat_(g.request().api == Api::kOllamaChat), model_(model) {}

  const char* stream_content_type() const override { return "application/x-ndjson"; }
  std::string start() override { return ""; }

  std::string delta(const ChoiceDelta& d) override {
    if (d.index != 0) return "";
    reasoning_ += d.reasoning;
    content_ += d.content;
    if (d.finish) finish_ = d.finish;
    if (!g_.request().stream) {
      for (auto& c : d.calls) calls_.push_back(c);
      return "";
    }
    if (d.reasoning.empty() && d.content.empty() && d.calls.empty()) return "";
    json line = head();
    if (chat_) {
      json msg = {{"role", "assistant"}, {"content", d.content}};
      if (!d.reasoning.empty()) msg["thinking"] = d.reasoning;
      if (!d.calls.empty()) msg["tool_calls"] = ollama_calls(d.calls, call_index_);
      line["message"] = std::move(msg);
    } else {
      line["response"] = d.content;
      if (!d.reasoning.empty()) line["thinking"] = d.reasoning;
    }
    line["done"] = false;
    return dump(line) + "\n";
  }

  std::string finish(const Totals& t) override {
    json last = head();
    const bool stream = g_.request().stream;
    if (chat_) {
      json msg = {{"role", "assistant"}, {"content", stream ? "" : content_}};
      if (!stream && !reasoning_.empty()) msg["thinking"] = reasoning_;
      if (!stream && !calls_.empty()) msg["tool_calls"] = ollama_calls(calls_, call_index_);
      last["message"] = std::move(msg);
    } else {
      last["response"] = stream ? "" : content_;
      if (!stream && !reasoning_.empty()) last["thinking"] = reasoning_;
    }
    last["done"] = true;
    std::string reason = finish_ ? finish_ : "stop";
    last["done_reason"] = reason == "tool_calls" ? "stop" : reason;
    last["total_duration"] = t.total_ns;
    last["load_duration"] = 0;
    last["prompt_eval_count"] = t.prompt_tokens;
    last["prompt_eval_duration"] = t.prompt_eval_ns;
    last["eval_count"] = t.completion_tokens;
    last["eval_duration"] = t.eval_ns;
    return dump(last) + (stream ? "\n" : "");
  }

  std::string stream_error(const std::string& msg) override {
    return ollama_error_body(msg) + "\n";
  }
  std::string error_body(const std::string& msg) override { return ollama_error_body(msg); }

 private:
  json head() const { return json{{"model", model_}, {"created_at", rfc3339_now()}}; }

  const Generation& g_;
  bool chat_;
  std::string model_;
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
  const char* finish_ = nullptr;
  int call_index_ = 0;
};

}  // namespace

std::unique_ptr<Formatter> make_ollama_formatter(const Generation& g, const std::string& model) {
  return std::make_unique<OllamaFormatter>(g, model);
}

}  // namespace tandem::server
