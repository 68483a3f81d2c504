// tandem grammar: structured-output constraints from the command line.
//   tandem grammar compile --schema s.json          the compiled grammar and its time, or the
//                                                   refusal (exit 1)
//   tandem grammar check --schema s.json --instance a.json ...
//       each instance written as a model would write it (schema member order), tokenized
//       with the Qwen3 tokenizer and walked token by token through the masks: accepted, or
//       rejected at a byte offset
//   tandem grammar check --bench sample.json        a JSONSchemaBench file: schemas
//       compiled, valid instances accepted, invalid ones rejected (exit 1 on any invalid
//       accepted or valid rejected by a compiled schema)
//   tandem grammar bench --bench sample.json        compile and mask times, p50/p99
#include <time.h>
#include <algorithm>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "structured/constraint.h"
#include "structured/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tandem;
using namespace tandem::structured;
using Clock = std::chrono::steady_clock;

struct Opts {
  std::string schema, regex, grammar, bench_file, tokenizer, category;
  std::vector<std::string> choices, instances;
  bool json_object = false, print = false, verbose = false;
  int vocab_size = 151936, max_whitespace = 20, max_schemas = 0, repeat = 1;
  double slow_us = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorKind::kIo, "cannot read {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of this thread: what one core spends, whatever else the machine runs.
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(p / 100.0 * double(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

ConstraintSpec spec_of(const Opts& o) {
  ConstraintSpec s;
  s.max_whitespace = o.max_whitespace;
  int n = !o.schema.empty() + !o.regex.empty() + !o.grammar.empty() + !o.choices.empty() +
          o.json_object;
  if (n != 1)
    fail(ErrorKind::kInvalidArgument,
         "give exactly one of --schema, --json-object, --regex, --choice, --grammar");
  if (!o.schema.empty()) {
    s.kind = ConstraintKind::kJsonSchema;
    s.text = read_file(o.schema);
  } else if (o.json_object) {
    s.kind = ConstraintKind::kJsonObject;
  } else if (!o.regex.empty()) {
    s.kind = ConstraintKind::kRegex;
    s.text = o.regex;
  } else if (!o.grammar.empty()) {
    s.kind = ConstraintKind::kGrammar;
    s.text = read_file(o.grammar);
  } else {
    s.kind = ConstraintKind::kChoice;
    s.choices = o.choices;
  }
  return s;
}

std::shared_ptr<const Vocabulary> load_vocab(const Opts& o) {
  auto tok = tok::load_tokenizer(o.tokenizer);
  std::vector<TokenId> eos;
  for (const char* t : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = tok->find_token(t)) eos.push_back(*id);
  return Vocabulary::from_tokenizer(*tok, std::max(o.vocab_size, tok->vocab_size()), eos);
}

void print_grammar(const CompiledGrammar& cg, size_t limit) {
  const Grammar& g = cg.grammar();
  std::printf("rules %zu, nonterminals %zu, lexemes %zu\n", g.rule_lhs.size(), g.num_nonterminals(),
              g.lexemes.size());
  for (size_t r = 0; r < g.rule_lhs.size() && r < limit; ++r) {
    std::string line = g.names[g.rule_lhs[r]] + " ->";
    for (uint32_t i = g.rule_start[r]; !is_rule_end(g.flat[i]); ++i) {
      Symbol s = g.flat[i];
      line += " ";
      if (is_nonterminal(s))
        line += g.names[s & ~kNonterminalBit];
      else
        line += "<" + (g.lexeme_names[s].empty() ? std::to_string(s) : g.lexeme_names[s]) + ">";
    }
    std::printf("  %s\n", line.c_str());
  }
  if (g.rule_lhs.size() > limit) std::printf("  ... %zu more rules\n", g.rule_lhs.size() - limit);
}

// Walks `text` through a fresh matcher token by token, checking each token against the
// mask first. Returns "" when accepted to the end (EOS allowed), else why not. Mask times
// (microseconds) are appended to `mask_us`.
std::string walk(const std::shared_ptr<const CompiledGrammar>& g,
                 const std::shared_ptr<const Vocabulary>& v, const tok::Tokenizer& tok,
                 const std::string& text, std::vector<double>* mask_us, double slow_us = 0) {
  Matcher m(g, v);
  std::vector<TokenId> ids = tok.encode(text, false);
  std::vector<uint32_t> mask(size_t(v->mask_words()));
  size_t offset = 0;
  auto masked = [&](TokenId t) {
    double t0 = cpu_ms();
    m.fill_mask(mask);
    double us = (cpu_ms() - t0) * 1000.0;
    if (mask_us) mask_us->push_back(us);
    if (slow_us > 0 && us > slow_us)
      std::fprintf(stderr, "slow mask %.0f us at byte %zu of %s\n", us, offset,
                   text.substr(0, 120).c_str());
    return (mask[size_t(t) / 32] >> (t % 32)) & 1;
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    TokenId t = ids[i];
    bool allowed = masked(t);
    if (!allowed || !m.accept_token(t)) {
      // Find the byte: a copy of the state takes the token's bytes one at a time.
      Matcher probe = m;
      size_t consumed = 0;
      probe.accept_bytes(v->bytes(t), &consumed);
      std::string why = fmt::format("rejected at byte {} (token {} '{}'{})", offset + consumed, i,
                                    v->bytes(t), allowed ? ", allowed by the mask" : "");
      return why;
    }
    offset += v->bytes(t).size();
  }
  TokenId eos = v->eos().empty() ? -1 : v->eos()[0];
  if (eos < 0 || !masked(eos) || !m.accept_token(eos))
    return fmt::format("rejected at byte {} (the end: EOS not allowed)", offset);
  return "";
}

int run_compile(const Opts& o) {
  ConstraintSpec s = spec_of(o);
  auto t0 = Clock::now();
  std::shared_ptr<const CompiledGrammar> g;
  try {
    g = compile(s);
  } catch (const Error& e) {
    std::printf("refused after %.3f ms: %s\n", ms_since(t0), e.what());
    return 1;
  }
  std::printf("compiled in %.3f ms\n", ms_since(t0));
  print_grammar(*g, o.print ? 100000 : 40);
  return 0;
}

int run_check_instances(const Opts& o) {
  ConstraintSpec s = spec_of(o);
  auto g = compile(s);
  auto v = load_vocab(o);
  auto tok = tok::load_tokenizer(o.tokenizer);
  int bad = 0;
  for (const std::string& path : o.instances) {
    std::string raw = read_file(path);
    std::string text = s.kind == ConstraintKind::kJsonSchema ? write_json_instance(s.text, raw)
                       : s.kind == ConstraintKind::kJsonObject
                           ? write_json_instance(R"({"type":"object"})", raw)
                           : raw;
    std::string why = walk(g, v, *tok, text, nullptr);
    std::printf("%s: %s\n", path.c_str(), why.empty() ? "accepted" : why.c_str());
    bad += !why.empty();
  }
  return bad == 0 ? 0 : 1;
}

int run_bench_file(const Opts& o, bool report_only) {
  nlohmann::json all = nlohmann::json::parse(read_file(o.bench_file));
  auto v = load_vocab(o);
  auto tok = tok::load_tokenizer(o.tokenizer);
  struct Tally {
    int schemas = 0, compiled = 0, valid = 0, valid_ok = 0, invalid = 0, invalid_ok = 0;
  };
  std::map<std::string, Tally> by_cat;
  Tally total;
  std::map<std::string, int> refusals;
  std::vector<double> compile_ms, mask_us;
  std::vector<std::string> failures;
  int n = 0;
  for (const auto& item : all) {
    std::string cat = item.value("category", "");
    if (!o.category.empty() && cat != o.category) continue;
    if (o.max_schemas > 0 && n >= o.max_schemas) break;
    ++n;
    std::string id = item.value("id", "");
    std::string schema = item["schema"].dump();
    Tally& t = by_cat[cat];
    ++t.schemas, ++total.schemas;
    ConstraintSpec s;
    s.kind = ConstraintKind::kJsonSchema;
    s.text = schema;
    s.max_whitespace = o.max_whitespace;
    std::shared_ptr<const CompiledGrammar> g;
    double best = 1e30;
    std::string refusal;
    for (int r = 0; r < std::max(1, o.repeat); ++r) {
      double t0 = cpu_ms();
      try {
        g = compile(s);
      } catch (const Error& e) {
        refusal = e.what();
      }
      best = std::min(best, cpu_ms() - t0);
    }
    compile_ms.push_back(best);
    if (!g) {
      // Group refusals by their keyword: "keyword 'X' at".
      std::string key = refusal;
      size_t k = refusal.find("keyword '");
      if (k != std::string::npos)
        key = refusal.substr(k, refusal.find('\'', k + 9) - k + 1);
      else
        key = refusal.substr(0, 60);
      ++refusals[key];
      if (o.verbose) std::printf("refused %s: %s\n", id.c_str(), refusal.c_str());
      continue;
    }
    ++t.compiled, ++total.compiled;
    int idx = 0;
    for (const auto& test : item["tests"]) {
      bool valid = test.value("valid", false);
      std::string text = write_json_instance(schema, test["data"].dump());
      std::string why = walk(g, v, *tok, text, valid ? &mask_us : nullptr, o.slow_us);
      bool ok = valid ? why.empty() : !why.empty();
      (valid ? t.valid : t.invalid)++;
      (valid ? total.valid : total.invalid)++;
      if (ok) (valid ? t.valid_ok : t.invalid_ok)++, (valid ? total.valid_ok : total.invalid_ok)++;
      if (!ok)
        failures.push_back(fmt::format("{} test {}: {} instance {}: {}", id, idx,
                                       valid ? "valid" : "invalid", text.substr(0, 300),
                                       valid ? why : "accepted"));
      ++idx;
    }
  }
  if (!report_only) {
    for (auto& [cat, t] : by_cat)
      std::printf("%-16s schemas %4d compiled %4d (%5.1f%%)  valid %4d/%-4d  invalid %4d/%-4d\n",
                  cat.c_str(), t.schemas, t.compiled, 100.0 * t.compiled / std::max(1, t.schemas),
                  t.valid_ok, t.valid, t.invalid_ok, t.invalid);
    std::vector<std::pair<int, std::string>> top;
    for (auto& [k, c] : refusals) top.push_back({c, k});
    std::sort(top.rbegin(), top.rend());
    for (size_t i = 0; i < top.size() && i < 20; ++i)
      std::printf("refused %4d  %s\n", top[i].first, top[i].second.c_str());
    for (const std::string& f : failures) std::printf("FAIL %s\n", f.c_str());
  }
  std::printf("schemas compiled: %d/%d (%.1f%%)\n", total.compiled, total.schemas,
              100.0 * total.compiled / std::max(1, total.schemas));
  std::printf("valid instances accepted: %d/%d\n", total.valid_ok, total.valid);
  std::printf("invalid instances rejected: %d/%d\n", total.invalid_ok, total.invalid);
  std::printf("compile ms (CPU time): p50 %.3f p99 %.3f max %.3f\n", percentile(compile_ms, 50),
              percentile(compile_ms, 99), percentile(compile_ms, 100));
  std::printf("mask us (%zu masks, one core): p50 %.1f p99 %.1f max %.1f\n", mask_us.size(),
              percentile(mask_us, 50), percentile(mask_us, 99), percentile(mask_us, 100));
  bool pass = total.valid_ok == total.valid && total.invalid_ok == total.invalid;
  return report_only || pass ? 0 : 1;
}

void common_options(CLI::App& sub, Opts& o) {
  sub.add_option("--schema", o.schema, "JSON Schema file");
  sub.add_flag("--json-object", o.json_object, "Any JSON object");
  sub.add_option("--regex", o.regex, "A regular expression the whole output matches");
  sub.add_option("--choice", o.choices, "One of these strings (repeat the option)");
  sub.add_option("--grammar", o.grammar, "A grammar file (Lark-style EBNF)");
  sub.add_option("--max-whitespace", o.max_whitespace,
                 "JSON: whitespace bytes allowed between tokens (0: compact)")
      ->capture_default_str();
  sub.add_option("--tokenizer", o.tokenizer,
                 "Folder with tokenizer.json (default: the pinned Qwen3 tokenizer)");
  sub.add_option("--vocab-size", o.vocab_size, "Mask width (the model's vocabulary)")
      ->capture_default_str();
}

tandem::cli::RunFn configure(CLI::App& sub) {
  auto o = std::make_shared<Opts>();
  sub.require_subcommand(1);
  CLI::App* c = sub.add_subcommand("compile", "Compile a constraint and print it");
  common_options(*c, *o);
  c->add_flag("--print", o->print, "Print every rule");
  CLI::App* k = sub.add_subcommand("check", "Walk instances token by token through the masks");
  common_options(*k, *o);
  k->add_option("--instance", o->instances, "Instance files (JSON)");
  k->add_option("--bench", o->bench_file, "A JSONSchemaBench file");
  k->add_option("--max-schemas", o->max_schemas, "Only the first N schemas");
  k->add_option("--category", o->category, "Only this category");
  k->add_flag("--verbose", o->verbose, "Print each refusal");
  CLI::App* b = sub.add_subcommand("bench", "Compile and mask times, p50/p99");
  common_options(*b, *o);
  b->add_option("--bench", o->bench_file, "A JSONSchemaBench file")->required();
  b->add_option("--max-schemas", o->max_schemas, "Only the first N schemas");
  b->add_option("--repeat", o->repeat, "Compile each schema this many times (best)")
      ->capture_default_str();
  b->add_option("--slow-us", o->slow_us, "Print each mask that takes longer (microseconds)");
  return [o, c, k]() -> int {
    if (c->parsed()) return run_compile(*o);
    if (k->parsed()) {
      if (!o->bench_file.empty()) return run_bench_file(*o, false);
      if (o->instances.empty())
        fail(ErrorKind::kInvalidArgument, "check needs --instance or --bench");
      return run_check_instances(*o);
    }
    return run_bench_file(*o, true);
  };
}

}  // namespace

TANDEM_COMMAND(grammar, 78, "Structured-output constraints: compile, check instances, bench",
               configure);
