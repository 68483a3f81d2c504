// tandem generate: one prompt through the CPU reference model, no server and no engine.
// Text goes to stdout as it is produced; token counts and speeds go to stderr. With --json
// one object is printed instead (prompt ids, generated ids, text, finish reason).
#include <chrono>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/fs.h"
#include "engine/sampler.h"
#include "model/config.h"
#include "model/cpu_runner.h"
#include "model/model_loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

using tandem::model::TokenId;
using Clock = std::chrono::steady_clock;

struct Opts {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  bool chat = false;
  bool no_think = false;
  std::string system;
  int max_tokens = 128;
  bool ignore_eos = false;
  bool json = false;
  int threads = 0;
  int block_size = 16;
  int prefill_chunk = 512;
  // Sampling; unset values come from generation_config.json, else the sampler's defaults.
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int> top_k;
  uint64_t seed = 0;
  int top_logprobs = -1;
};

std::vector<TokenId> parse_ids(const std::string& s) {
  std::vector<TokenId> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(TokenId(v));
    } catch (const std::exception&) {
      tandem::fail(tandem::ErrorKind::kInvalidArgument,
                   "--prompt-ids: '{}' is not a token id (expected e.g. 9707,11,1879)", item);
    }
  }
  return ids;
}

// The model's defaults (the loader's, from generation_config.json), overridden by flags.
tandem::engine::SamplingParams sampling(const Opts& o, const tandem::SamplingKnobs& d) {
  tandem::engine::SamplingParams p;
  static_cast<tandem::SamplingKnobs&>(p) = d;
  if (o.temperature) p.temperature = *o.temperature;
  if (o.top_p) p.top_p = *o.top_p;
  if (o.top_k) p.top_k = *o.top_k;
  if (o.min_p) p.min_p = *o.min_p;
  if (o.repetition_penalty) p.repetition_penalty = *o.repetition_penalty;
  if (o.presence_penalty) p.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) p.frequency_penalty = *o.frequency_penalty;
  p.seed = o.seed;
  p.top_logprobs = o.top_logprobs;
  tandem::engine::validate(p);
  return p;
}

int run_generate(const Opts& o) {
  using namespace tandem;
  const std::filesystem::path dir = o.model;
  auto cfg = model::load_config(dir);
  if (o.prompt.empty() == o.prompt_ids.empty())
    fail(ErrorKind::kInvalidArgument, "give exactly one of --prompt TEXT or --prompt-ids IDS");
  if (o.max_tokens < 0) fail(ErrorKind::kInvalidArgument, "--max-tokens must be >= 0");
  auto tok = tok::Tokenizer::load(dir);
  std::vector<TokenId> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_ids(o.prompt_ids);
  } else if (o.chat) {
    // The model's chat template (Qwen3's, rendered natively) for one user turn.
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    if (!o.system.empty()) msgs.push_back({{"role", "system"}, {"content", o.system}});
    msgs.push_back({{"role", "user"}, {"content", o.prompt}});
    tok::ChatOptions co;
    co.add_generation_prompt = true;
    co.enable_thinking = !o.no_think;
    prompt = tok->encode(tok::render_chat(msgs, nlohmann::ordered_json::array(), co),
                         /*allow_special=*/true);
  } else {
    prompt = tok->encode(o.prompt, /*allow_special=*/false);
  }
  if (prompt.empty()) fail(ErrorKind::kInvalidArgument, "the prompt has no tokens");

  const int total = int(prompt.size()) + o.max_tokens;
  if (total > cfg.max_position_embeddings)
    fail(ErrorKind::kInvalidArgument,
         "prompt ({} tokens) + --max-tokens ({}) exceeds the model's context of {} tokens",
         prompt.size(), o.max_tokens, cfg.max_position_embeddings);
  // The one loader, on the CPU reference backend: EOS ids and sampling defaults with it.
  model::LoaderOptions lo;
  lo.backend = "cpu";
  lo.tokenizer = tok;
  auto& ro = lo.cpu;
  ro.block_size = o.block_size;
  ro.threads = o.threads;
  ro.max_model_len = total;
  ro.num_blocks = (total + o.block_size - 1) / o.block_size;
  auto t_load = Clock::now();
  model::LoadedModel loaded = model::load_model(o.model, lo);
  auto runner = std::move(loaded.runner);
  const bool thinks = o.chat && !o.no_think;
  auto params = sampling(o, thinks || !o.chat ? loaded.defaults.thinking : loaded.defaults.plain);
  const auto& eos = loaded.eos_ids;
  const int V = runner->vocab_size();
  for (auto t : prompt)
    if (t < 0 || t >= V)
      fail(ErrorKind::kInvalidArgument, "prompt token id {} outside the vocabulary [0, {})", t, V);

  // One sequence whose blocks are 0, 1, 2, ...: slot = position.
  std::vector<model::BlockId> table(size_t(ro.num_blocks));
  for (int i = 0; i < ro.num_blocks; ++i) table[size_t(i)] = i;
  std::vector<TokenId> seq = prompt;
  auto step = [&](int from, int to, std::vector<float>& logits) {
    model::ForwardBatch b;
    for (int p = from; p < to; ++p) {
      b.tokens.push_back(seq[size_t(p)]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(p);
    }
    b.query_start = {0, to - from};
    b.context_lens = {to};
    b.block_tables = table;
    b.max_blocks = ro.num_blocks;
    b.logit_rows = {to - from - 1};
    logits.resize(size_t(V));
    runner->forward(b, logits);
  };

  std::vector<float> logits;
  auto t0 = Clock::now();
  for (int p = 0; p < int(prompt.size()); p += o.prefill_chunk)
    step(p, std::min<int>(int(prompt.size()), p + o.prefill_chunk), logits);
  auto t1 = Clock::now();

  Rng rng = engine::make_sequence_rng(params, 0);
  tok::StreamDecoder dec(tok, /*skip_special=*/false);
  std::vector<TokenId> out;
  std::vector<engine::SampleResult> samples;
  std::string text;
  const char* finish = "length";
  for (int i = 0; i < o.max_tokens; ++i) {
    auto r = engine::sample(logits, params, prompt, out, rng);
    out.push_back(r.token);
    bool stop = !o.ignore_eos && std::find(eos.begin(), eos.end(), r.token) != eos.end();
    if (!stop) {
      std::string piece = dec.push(r.token);
      text += piece;
      if (!o.json && !piece.empty()) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
    }
    if (o.json) samples.push_back(std::move(r));
    if (stop) {
      finish = "stop";
      break;
    }
    if (i + 1 == o.max_tokens) break;
    seq.push_back(out.back());
    step(int(seq.size()) - 1, int(seq.size()), logits);
  }
  std::string tail = dec.flush();
  text += tail;
  auto t2 = Clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const double pf = secs(t0, t1), dc = secs(t1, t2);
  const int decoded = int(out.size());

  if (o.json) {
    nlohmann::ordered_json j;
    j["prompt_ids"] = prompt;
    j["generated_ids"] = out;
    j["text"] = text;
    j["finish_reason"] = finish;
    if (o.top_logprobs >= 0) {
      auto& lp = j["logprobs"] = nlohmann::json::array();
      for (auto& s : samples) {
        nlohmann::ordered_json e;
        e["token"] = s.token;
        e["logprob"] = s.logprob;
        e["top"] = nlohmann::json::array();
        for (auto& t : s.top) e["top"].push_back({{"token", t.token}, {"logprob", t.logprob}});
        lp.push_back(e);
      }
    }
    j["usage"] = {{"prompt_tokens", prompt.size()}, {"completion_tokens", decoded}};
    j["timings"] = {{"load_s", secs(t_load, t0)}, {"prefill_s", pf}, {"decode_s", dc}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (!tail.empty()) std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::printf("\n");
    std::fflush(stdout);
  }
  // The first generated token comes from the prefill; the rest are decode steps.
  std::fprintf(stderr,
               "prompt: %zu tokens in %.3f s (%.1f tok/s); decode: %d tokens in %.3f s "
               "(%.1f tok/s); finish: %s\n",
               prompt.size(), pf, double(prompt.size()) / std::max(pf, 1e-9), decoded, dc,
               decoded > 1 ? double(decoded - 1) / std::max(dc, 1e-9) : 0.0, finish);
  return 0;
}

}  // namespace

TANDEM_COMMAND(
    generate, 30, "Generate text from a prompt on the CPU (no server)",
    [](CLI::App& sub) -> tandem::cli::RunFn {
      auto o = std::make_shared<Opts>();
      sub.add_option("--model", o->model, "Model folder (config.json, safetensors)")->required();
      sub.add_option("--prompt", o->prompt, "Prompt text");
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Prompt as comma-separated token ids instead of text");
      sub.add_flag("--chat", o->chat,
                   "Render the prompt as one user turn through the model's chat template");
      sub.add_option("--system", o->system, "With --chat: a system message before it");
      sub.add_flag("--no-think", o->no_think,
                   "With --chat: disable thinking (empty <think> block)");
      sub.add_option("--max-tokens", o->max_tokens, "Tokens to generate at most");
      sub.add_flag("--ignore-eos", o->ignore_eos, "Do not stop at EOS");
      sub.add_flag("--json", o->json, "Print one JSON object instead of text");
      sub.add_option("--temperature", o->temperature, "0 = greedy");
      sub.add_option("--top-p", o->top_p, "Nucleus sampling mass (0, 1]");
      sub.add_option("--top-k", o->top_k, "Keep the k most likely tokens; 0 = off");
      sub.add_option("--min-p", o->min_p, "Drop tokens below min_p x the best");
      sub.add_option("--repetition-penalty", o->repetition_penalty,
                     "HF-style, over prompt and output; 1 = off");
      sub.add_option("--presence-penalty", o->presence_penalty, "OpenAI-style");
      sub.add_option("--frequency-penalty", o->frequency_penalty, "OpenAI-style");
      sub.add_option("--seed", o->seed, "Sampling seed (same seed, same text)");
      sub.add_option("--top-logprobs", o->top_logprobs,
                     "With --json: log-probabilities of each token and the top n");
      sub.add_option("--threads", o->threads, "CPU threads; 0 = all cores");
      sub.add_option("--block-size", o->block_size, "KV block size (16 or 32)");
      return [o] { return run_generate(*o); };
    });
