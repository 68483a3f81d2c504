#include "server/prepare.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace tandem::server {
namespace {

// The model's defaults (model/model_loader.h: generation_config.json) under the request's.
void fill_defaults(engine::SamplingParams& p, const SamplingFields& f, const SamplingKnobs& d) {
  p.temperature = float(f.temperature.value_or(d.temperature));
  p.top_p = float(f.top_p.value_or(d.top_p));
  if (p.top_p <= 0.f) p.top_p = 1e-6f;  // top_p 0 means "only the most likely token"
  p.top_k = f.top_k.value_or(d.top_k);
  p.min_p = float(f.min_p.value_or(d.min_p));
  p.repetition_penalty = float(f.repetition_penalty.value_or(d.repetition_penalty));
  p.presence_penalty = float(f.presence_penalty.value_or(d.presence_penalty));
  p.frequency_penalty = float(f.frequency_penalty.value_or(d.frequency_penalty));
  p.penalty_last_n = f.penalty_last_n.value_or(-1);
  p.seed = f.seed;
}

}  // namespace

Prepared prepare(const GenRequest& r, const ServerContext& ctx) {
  Prepared p;
  const auto& tok = *ctx.tok;
  const bool chat = is_chat(r.api) || (r.api == Api::kOllamaGenerate && !r.raw);
  const char* prompt_field = r.api == Api::kResponses ? "input"
                             : is_chat(r.api)         ? "messages"
                                                      : "prompt";

  if (chat) {
    std::vector<Message> msgs;
    if (r.api == Api::kOllamaGenerate) {
      if (!r.system.empty()) msgs.push_back(Message{"system", r.system, {}, {}, {}, {}});
      msgs.push_back(Message{"user", r.prompts.empty() ? "" : r.prompts[0], {}, {}, {}, {}});
    } else {
      msgs = r.messages;
    }
    const bool use_tools = !r.tools.empty() && r.tool_choice != ToolChoice::kNone;
    const bool force_call = use_tools && (r.tool_choice == ToolChoice::kRequired ||
                                          r.tool_choice == ToolChoice::kNamed);
    // A forced call is written right after the (empty) think block, so it cannot think.
    p.thinking = force_call ? false : resolve_thinking(r, ctx.opt.thinking);
    std::string text = render_chat_prompt(msgs, use_tools ? r.tools : json::array(), p.thinking);
    p.in_think = text.size() >= 8 && text.compare(text.size() - 8, 8, "<think>\n") == 0;
    if (force_call) {
      p.prefill = "<tool_call>\n{\"name\": \"";
      if (r.tool_choice == ToolChoice::kNamed)
        p.prefill += r.tool_choice_name + "\", \"arguments\": ";
      text += p.prefill;
    }
    p.split_reasoning = true;
    p.parse_tools = use_tools;
    p.prompts.push_back(tok.encode(text, /*allow_special=*/true));
    p.prompt_texts.push_back(std::move(text));
  } else {
    for (auto& s : r.prompts) {
      p.prompts.push_back(tok.encode(s, /*allow_special=*/true));
      p.prompt_texts.push_back(s);
    }
    for (auto& ids : r.prompt_ids) {
      for (auto id : ids)
        if (id >= tok.vocab_size())
          bad_field("prompt", "token id {} is out of range (vocabulary of {})", id,
                    tok.vocab_size());
      p.prompts.push_back(ids);
      p.prompt_texts.push_back(tok.decode(ids));
    }
  }

  fill_defaults(p.sampling, r.sampling,
                p.thinking ? ctx.model.defaults.thinking : ctx.model.defaults.plain);
  p.sampling.top_logprobs = r.logprobs ? r.top_logprobs : -1;
  p.thinking_budget = p.thinking ? r.thinking_budget.value_or(ctx.opt.thinking_budget) : -1;
  // EOS is the engine's business (EngineOptions::eos_ids), so ignore_eos works.

  int context = ctx.gen->max_model_len();
  if (r.num_ctx) context = std::min(context, *r.num_ctx);
  size_t longest = 0;
  for (auto& ids : p.prompts) {
    if (ids.empty()) bad_field(prompt_field, "the prompt is empty after tokenization");
    longest = std::max(longest, ids.size());
  }
  if (int(longest) >= context)
    throw ApiError(400, "invalid_request_error", prompt_field,
                   fmt::format("the prompt is {} tokens, which does not fit the context of {} "
                               "tokens (with room for at least one generated token)",
                               longest, context),
                   "context_length_exceeded");
  int room = context - int(longest);
  if (r.max_tokens) {
    if (*r.max_tokens > room && (is_openai(r.api) || r.api == Api::kAnthropic))
      throw ApiError(400, "invalid_request_error",
                     r.api == Api::kOpenAIChat  ? "max_completion_tokens"
                     : r.api == Api::kResponses ? "max_output_tokens"
                                                : "max_tokens",
                     fmt::format("this model's context is {} tokens; the prompt has {} and {} "
                                 "more were requested",
                                 context, longest, *r.max_tokens),
                     "context_length_exceeded");
    p.max_tokens = std::min(*r.max_tokens, room);
  } else {
    p.max_tokens = room;
  }
  return p;
}

}  // namespace tandem::server
