// OpenAI shapes: chat.completion(.chunk) and text_completion, SSE framing, usage.
#include <vector>

#include "server/formatter.h"

namespace tandem::server {
namespace {

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(int(c));
  return a;
}

json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (auto& lp : lps) {
    json top = json::array();
    for (auto& [b, l] : lp.top)
      top.push_back({{"token", b}, {"logprob", l}, {"bytes", bytes_array(b)}});
    content.push_back({{"token", lp.bytes},
                       {"logprob", lp.logprob},
                       {"bytes", bytes_array(lp.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

// Legacy completions logprobs; text_offset counts bytes from the start of the choice's text.
json completion_logprobs(const std::vector<TokenLogprob>& lps, size_t& offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (auto& lp : lps) {
    tokens.push_back(lp.bytes);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (auto& [b, l] : lp.top) top[b] = l;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += lp.bytes.size();
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_lps},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
}

class OpenAIFormatter : public Formatter {
 public:
  OpenAIFormatter(const Generation& g, const std::string& model)
      : g_(g),
        chat_(g.request().api == Api::kOpenAIChat),
        id_(random_id(chat_ ? "chatcmpl-" : "cmpl-", 24)),
        created_(unix_seconds()),
        model_(model),
        acc_(g.num_choices()) {}

  const char* stream_content_type() const override { return "text/event-stream"; }

  std::string start() override {
    if (!g_.request().stream) return "";
    std::string out;
    const auto& prep = g_.prepared();
    for (int i = 0; i < g_.num_choices(); ++i) {
      if (chat_) {
        out += sse(chunk(json::array({json{{"index", i},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}})));
      } else if (g_.request().echo) {
        size_t prompt = size_t(i) / size_t(g_.request().n);
        out += sse(chunk(json::array({json{{"index", i},
                                           {"text", prep.prompt_texts[prompt]},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}})));
      }
    }
    return out;
  }

  std::string delta(const ChoiceDelta& d) override {
    Acc& a = acc_[d.index];
    if (!g_.request().stream) {
      a.reasoning += d.reasoning;
      a.content += d.content;
      for (auto& c : d.calls) a.calls.push_back(c);
      a.logprobs.insert(a.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      if (d.finish) a.finish = d.finish;
      return "";
    }
    json choice = {{"index", d.index}};
    if (chat_) {
      json delta = json::object();
      if (!d.reasoning.empty()) {
        delta["reasoning_content"] = d.reasoning;
        delta["reasoning"] = d.reasoning;
      }
      if (!d.content.empty()) delta["content"] = d.content;
      // Calls as they are written: the first delta of a call has its id and name, the
      // next ones pieces of its arguments.
      json calls = json::array();
      for (auto& p : d.pieces) {
        if (p.kind == OutPiece::Kind::kCallBegin) {
          a.open_call = a.num_calls++;
          calls.push_back({{"index", a.open_call},
                           {"id", random_id("call_", 24)},
                           {"type", "function"},
                           {"function", {{"name", p.text}, {"arguments", ""}}}});
        } else if (p.kind == OutPiece::Kind::kCallArgs) {
          if (calls.empty() || calls.back()["index"] != a.open_call)
            calls.push_back({{"index", a.open_call}, {"function", {{"arguments", ""}}}});
          auto& args = calls.back()["function"]["arguments"];
          args = args.get<std::string>() + p.text;
        }
      }
      if (!calls.empty()) delta["tool_calls"] = std::move(calls);
      choice["delta"] = std::move(delta);
      choice["logprobs"] =
          d.logprobs.empty() || !g_.request().logprobs ? json(nullptr) : chat_logprobs(d.logprobs);
    } else {
      choice["text"] = d.content;
      choice["logprobs"] = d.logprobs.empty() || !g_.request().logprobs
                               ? json(nullptr)
                               : completion_logprobs(d.logprobs, a.text_offset);
    }
    choice["finish_reason"] = finish_reason(d.finish);
    return sse(chunk(json::array({std::move(choice)})));
  }

  std::string finish(const Totals& t) override {
    if (g_.request().stream) {
      std::string out;
      if (g_.request().include_usage) {
        json c = chunk(json::array());
        c["usage"] = usage(t);
        out += sse(c);
      }
      return out + "data: [DONE]\n\n";
    }
    json choices = json::array();
    for (int i = 0; i < g_.num_choices(); ++i) {
      Acc& a = acc_[i];
      json choice = {{"index", i}};
      if (chat_) {
        json msg = {{"role", "assistant"}};
        msg["content"] = a.content.empty() && !a.calls.empty() ? json(nullptr) : json(a.content);
        if (!a.reasoning.empty()) {
          msg["reasoning_content"] = a.reasoning;
          msg["reasoning"] = a.reasoning;
        }
        if (!a.calls.empty()) {
          json calls = json::array();
          for (auto& c : a.calls)
            calls.push_back({{"id", random_id("call_", 24)},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
          msg["tool_calls"] = std::move(calls);
        }
        choice["message"] = std::move(msg);
        choice["logprobs"] = g_.request().logprobs ? chat_logprobs(a.logprobs) : json(nullptr);
      } else {
        std::string text = a.content;
        if (g_.request().echo)
          text = g_.prepared().prompt_texts[size_t(i) / size_t(g_.request().n)] + text;
        choice["text"] = std::move(text);
        size_t off = 0;
        choice["logprobs"] =
            g_.request().logprobs ? completion_logprobs(a.logprobs, off) : json(nullptr);
      }
      choice["finish_reason"] = finish_reason(a.finish);
      choices.push_back(std::move(choice));
    }
    json body = {{"id", id_},
                 {"object", chat_ ? "chat.completion" : "text_completion"},
                 {"created", created_},
                 {"model", model_},
                 {"choices", std::move(choices)},
                 {"usage", usage(t)}};
    return dump(body);
  }

  std::string stream_error(const std::string& msg) override {
    return "data: " + openai_error_body(500, msg) + "\n\n";
  }
  std::string error_body(const std::string& msg) override { return openai_error_body(500, msg); }

 private:
  struct Acc {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    std::vector<TokenLogprob> logprobs;
    const char* finish = nullptr;
    int num_calls = 0;
    int open_call = -1;  // the index of the call being streamed
    size_t text_offset = 0;
  };

  static json finish_reason(const char* f) { return f ? json(f) : json(nullptr); }

  json chunk(json choices) const {
    json c = {{"id", id_},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", std::move(choices)}};
    if (g_.request().include_usage) c["usage"] = nullptr;
    return c;
  }

  static std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

  static json usage(const Totals& t) {
    return {{"prompt_tokens", t.prompt_tokens},
            {"completion_tokens", t.completion_tokens},
            {"total_tokens", t.prompt_tokens + t.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", t.cached_tokens}}}};
  }

  const Generation& g_;
  bool chat_;
  std::string id_;
  int64_t created_;
  std::string model_;
  std::vector<Acc> acc_;
};

}  // namespace

std::unique_ptr<Formatter> make_openai_formatter(const Generation& g, const std::string& model) {
  return std::make_unique<OpenAIFormatter>(g, model);
}

}  // namespace tandem::server
