// tandem template: the exact prompt text the server would feed the model for an
// OpenAI-style chat request body on stdin (messages, tools, add_generation_prompt,
// chat_template_kwargs.enable_thinking).
#include <cstdio>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Opts {
  std::string model;
  bool ids = false;
};

int run(const Opts& o) {
  using namespace tandem;
  using ojson = nlohmann::ordered_json;
  std::string in(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>{});
  ojson body = ojson::parse(in, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    fail(ErrorKind::kInvalidArgument, "stdin must hold a JSON object (a chat request body)");
  if (!body.contains("messages"))
    fail(ErrorKind::kInvalidArgument, "the request has no \"messages\"");
  tok::ChatOptions opt;
  if (auto it = body.find("add_generation_prompt"); it != body.end()) {
    if (!it->is_boolean())
      fail(ErrorKind::kInvalidArgument, "add_generation_prompt must be true or false");
    opt.add_generation_prompt = it->get<bool>();
  }
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      fail(ErrorKind::kInvalidArgument, "chat_template_kwargs must be an object");
    if (auto et = kw->find("enable_thinking"); et != kw->end() && !et->is_null()) {
      if (!et->is_boolean())
        fail(ErrorKind::kInvalidArgument, "chat_template_kwargs.enable_thinking must be a bool");
      opt.enable_thinking = et->get<bool>();
    }
  }
  ojson tools = body.value("tools", ojson());
  std::string text = tok::render_chat(body["messages"], tools, opt);
  // The renderer is the Qwen3 template; say so when the model ships another one.
  if (!o.model.empty() || o.ids) {
    auto t = tok::load_tokenizer(o.model);
    if (!t->chat_template().empty() &&
        sha256_hex(t->chat_template()) != tok::kQwen3ChatTemplateSha256)
      spdlog::warn("the model's chat_template differs from Qwen3's; rendering Qwen3's template");
    if (o.ids) {
      auto ids = t->encode(text);
      std::string s;
      for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", s.c_str());
      return 0;
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

TANDEM_COMMAND(template, 75, "Print the prompt text for a chat request body (stdin)",
               [](CLI::App& sub) -> tandem::cli::RunFn {
                 auto o = std::make_shared<Opts>();
                 sub.add_option("--model", o->model,
                                "Model folder (its tokenizer for --ids; default: the pinned "
                                "Qwen3 tokenizer)");
                 sub.add_flag("--ids", o->ids, "Print the token ids of the prompt instead");
                 return [o] { return run(*o); };
               });
